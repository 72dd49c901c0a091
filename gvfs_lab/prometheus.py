# SPDX-License-Identifier: Apache-2.0
"""A real Prometheus server scraping the lab's endpoints.

The metrics tests parse each endpoint with prometheus_client's parser;
this is the server an operator runs: it scrapes every ``interval``,
stores the samples and answers PromQL over its HTTP API, so the
dashboards' queries are evaluated as Grafana would have them evaluated.
Debian's ``prometheus`` package (bindep.txt); its own service, if the
package started one, is left alone: this one has a port, a
configuration and a data directory of its own.
"""

import json
import os
import shutil
import urllib.error
import urllib.parse
import urllib.request

from gvfs_lab import process

#: Lab-local: never through an HTTP proxy of the environment.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def grafana_query(expr, rate_interval, job=".+"):
    """A dashboard panel's ``expr`` with its variables filled in.

    As Grafana fills them: ``$job`` the jobs chosen (a regular
    expression; all by default), ``$__rate_interval`` a duration such
    as ``"30s"``.
    """
    return expr.replace("$job", job).replace("$__rate_interval",
                                             rate_interval)


class QueryError(Exception):
    """Prometheus refused a query: its error type and words."""


class Prometheus:
    """Scrapes ``targets`` (``{job: [port, ...]}`` on loopback).

    Every ``interval`` seconds; :meth:`query` and :meth:`query_range`
    evaluate PromQL at its HTTP API.
    """

    def __init__(self, workdir, targets, interval=1.0):
        os.makedirs(workdir, exist_ok=True)
        self.interval = interval
        self.port = process.free_port()
        config = os.path.join(workdir, "prometheus.yml")
        with open(config, "w") as f:
            # JSON is YAML: no YAML library needed to write it.
            json.dump({
                # Prometheus' durations are whole numbers of a unit.
                "global": {"scrape_interval": "%dms" % (interval * 1000),
                           "scrape_timeout": "%dms" % (interval * 1000)},
                "scrape_configs": [
                    {"job_name": job, "static_configs": [{"targets": [
                        "127.0.0.1:%d" % port for port in ports]}]}
                    for job, ports in sorted(targets.items())]}, f)
        binary = shutil.which("prometheus") or "/usr/bin/prometheus"
        self.process = process.ManagedProcess("prometheus", [
            binary, "--config.file", config,
            "--storage.tsdb.path", os.path.join(workdir, "data"),
            "--web.listen-address", "127.0.0.1:%d" % self.port],
            os.path.join(workdir, "prometheus.log"))
        try:
            process.wait_until(self._ready, "Prometheus ready", 60,
                               self.process, 0.1)
        except process.LabError:
            self.process.stop()
            raise

    def _get(self, path, **params):
        url = "http://127.0.0.1:%d%s" % (self.port, path)
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with _DIRECT.open(url, timeout=30) as reply:
                return json.loads(reply.read())
        except urllib.error.HTTPError as e:
            answer = json.loads(e.read())
            raise QueryError("%s: %s" % (answer.get("errorType"),
                                         answer.get("error"))) from None

    def _ready(self):
        try:
            with _DIRECT.open("http://127.0.0.1:%d/-/ready" % self.port,
                              timeout=5) as reply:
                return reply.status == 200
        except OSError:
            return False

    def targets_up(self):
        """``{scrape url: health}`` of every target."""
        active = self._get("/api/v1/targets")["data"]["activeTargets"]
        return {t["scrapeUrl"]: t["health"] for t in active}

    def query(self, expr):
        """The instant vector of ``expr``: ``[(labels, value)]``."""
        data = self._get("/api/v1/query", query=expr)["data"]
        return [(item["metric"], float(item["value"][1]))
                for item in data["result"]]

    def query_range(self, expr, start, end, step):
        """``[(labels, [(unix time, value), ...])]`` of ``expr``."""
        data = self._get("/api/v1/query_range", query=expr, start=start,
                         end=end, step=step)["data"]
        return [(item["metric"], [(float(t), float(v))
                                  for t, v in item["values"]])
                for item in data["result"]]

    def stop(self):
        return self.process.stop(timeout=30)
