# SPDX-License-Identifier: Apache-2.0
"""Run one benchmark scenario and print its table.

Every scenario measures its baseline in the same run and reports ratios
against it; ``--json`` writes ``{"scenario", "metrics", "ratios"}``.
"""

import argparse
import json
import os
import sys

from gvfs_lab import fusemount
from tools.bench import boot
from tools.bench import cache
from tools.bench import clone
from tools.bench import glance
from tools.bench import local_copy
from tools.bench import metadata
from tools.bench import migrate
from tools.bench import migrate_small
from tools.bench import proxy_throughput
from tools.bench import replicate
from tools.bench import segments
from tools.bench import server_workers
from tools.bench import storm
from tools.bench import wan_link
from tools.bench import warm

SCENARIOS = {
    "boot": boot.run,
    "cache": cache.run,
    "clone": clone.run,
    "glance": glance.run,
    "local-copy": local_copy.run,
    "metadata": metadata.run,
    "migrate": migrate.run,
    "migrate-small": migrate_small.run,
    "proxy-throughput": proxy_throughput.run,
    "replicate": replicate.run,
    "segments": segments.run,
    "server-workers": server_workers.run,
    "storm": storm.run,
    "wan-link": wan_link.run,
    "warm": warm.run,
}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tox -e bench --")
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--quick", action="store_true",
                        help="a smaller run that takes under a minute")
    parser.add_argument("--json", metavar="FILE",
                        help="write the results as JSON to FILE")
    parser.add_argument("--plot", metavar="PNG",
                        help="where to write the chart (default: "
                             "bench-results/SCENARIO.png)")
    args = parser.parse_args(argv)
    if args.plot is None:
        os.makedirs("bench-results", exist_ok=True)
        args.plot = os.path.join("bench-results", args.scenario + ".png")
    with fusemount.fusectl_mounted():
        result = SCENARIOS[args.scenario](quick=args.quick, plot=args.plot)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
