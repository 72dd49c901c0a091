# SPDX-License-Identifier: Apache-2.0
"""A Grafana dashboard's panels drawn from a real Prometheus, for the docs.

Grafana is not packaged for Debian, so the pictures in the guide are
drawn here: each panel of a dashboard JSON (``etc/grafana``) at its
place in the dashboard's 24-column grid, each target's PromQL asked of
a :class:`gvfs_lab.prometheus.Prometheus` over the run
(``query_range``), with the dashboard's variables filled in as Grafana
fills them (``$job``: every job; ``$__rate_interval``: four scrape
intervals, at least 15 s) and the series named by the targets'
``legendFormat``.  The values are Prometheus's; only the drawing is
not Grafana's.
"""

import json
import re

from gvfs_lab import prometheus as prometheus_lab
from tools.bench import charts

#: Grafana's units: (factor, axis label).
UNITS = {"Bps": (1 / 2 ** 20, "MiB/s"), "bytes": (1 / 2 ** 20, "MiB"),
         "s": (1000.0, "ms"), "percentunit": (100.0, "%"),
         "reqps": (1.0, "per second"), "ops": (1.0, "per second"),
         "short": (1.0, "")}
#: Inches per grid column and per grid row of height.
COLUMN, ROW = 0.75, 0.42


def _legend(template, labels):
    return re.sub(r"\{\{\s*(\w+)\s*\}\}",
                  lambda m: labels.get(m.group(1), ""), template).strip()


def draw(dashboard_path, prometheus, start, end, png, caption, step=2.0):
    """Draw a dashboard over [start, end]; the panels left empty.

    ``dashboard_path`` is its JSON, ``png`` the picture to write,
    ``caption`` what the run did; the titles of the panels whose queries
    gave no series are returned.
    """
    with open(dashboard_path) as f:
        dashboard = json.load(f)
    rate_interval = "%ds" % max(15, 4 * prometheus.interval)
    # Two rows above the panels for the title.
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"]
               for p in dashboard["panels"]) + 2
    pyplot = charts.pyplot()
    figure = pyplot.figure(figsize=(24 * COLUMN, rows * ROW))
    figure.suptitle("%s: %s" % (dashboard["title"], caption), fontsize=14,
                    y=1 - 0.6 / rows)
    empty = []
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        axes = figure.add_axes([
            (grid["x"] + 0.6) / 24,
            1 - (grid["y"] + 2 + grid["h"] - 0.9) / rows,
            (grid["w"] - 1.0) / 24, (grid["h"] - 2.2) / rows])
        axes.set_xlim(0, end - start)
        factor, unit = UNITS.get(panel["fieldConfig"]["defaults"].get(
            "unit", "short"), (1.0, ""))
        drawn = 0
        for target in panel["targets"]:
            for labels, values in prometheus.query_range(
                    prometheus_lab.grafana_query(target["expr"],
                                                 rate_interval), start,
                    end, step):
                axes.plot([t - start for t, _ in values],
                          [v * factor for _, v in values],
                          label=_legend(target.get("legendFormat", ""),
                                        labels) or None, linewidth=1.2)
                drawn += 1
        axes.set_title(panel["title"], fontsize=10, loc="left")
        axes.set_ylabel(unit, fontsize=8)
        axes.tick_params(labelsize=7)
        axes.grid(alpha=0.3)
        if drawn:
            if drawn <= 12:
                axes.legend(fontsize=6, loc="upper left")
        else:
            empty.append(panel["title"])
            axes.text(0.5, 0.5, "no data in this run", ha="center",
                      va="center", transform=axes.transAxes, color="grey")
    figure.text(0.5, 0.01, "seconds since the run began", ha="center",
                fontsize=9)
    figure.savefig(png, dpi=80)
    pyplot.close(figure)
    return empty
