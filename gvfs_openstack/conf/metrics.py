# SPDX-License-Identifier: Apache-2.0
"""``[metrics]``: the Prometheus endpoint of a service."""

from oslo_config import cfg

metrics_group = cfg.OptGroup(
    "metrics", title="Prometheus metrics",
    help="An HTTP endpoint serving the service's counters in Prometheus' "
         "text format (``GET /metrics``). Off unless ``port`` is set.")

metrics_opts = [
    cfg.HostAddressOpt("host", default="127.0.0.1",
                       help="""Address the endpoint listens on.

The proxies' metrics name export paths: keep it on loopback or a
management network that only the Prometheus server reaches.
"""),
    cfg.PortOpt("port",
                help="Port of the endpoint; unset (the default): no "
                     "endpoint."),
]


def register_opts(conf):
    conf.register_group(metrics_group)
    conf.register_opts(metrics_opts, group=metrics_group)


def list_opts():
    return [(metrics_group, metrics_opts)]
