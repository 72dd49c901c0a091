# SPDX-License-Identifier: Apache-2.0
"""matplotlib for the benchmarks' charts, loaded only when one is drawn."""


def pyplot():
    """``matplotlib.pyplot`` drawing to files (no display needed)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save(fig, path):
    fig.tight_layout()
    fig.savefig(path)
    print("plot written to %s" % path)
