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
management network that only the Prometheus server reaches, and set
``token_file`` off loopback (a warning is logged without it).

Related options: token_file.
"""),
    cfg.PortOpt("port",
                help="Port of the endpoint; unset (the default): no "
                     "endpoint."),
    cfg.StrOpt("token_file",
               help="""A file whose content is the endpoint's bearer token.

Set, every scrape must send ``Authorization: Bearer <token>`` or is
answered 401: Prometheus' ``authorization: {credentials_file: ...}`` of
the scrape job. The metrics name export paths, replication policies and
other projects' ids; without a token anyone who reaches the address
reads them. Readable only by the service's account (a warning is logged
otherwise). Unset (the default): no token, for a loopback address.

Related options: host.
"""),
]


def register_opts(conf):
    conf.register_group(metrics_group)
    conf.register_opts(metrics_opts, group=metrics_group)


def list_opts():
    return [(metrics_group, metrics_opts)]
