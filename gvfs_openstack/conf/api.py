# SPDX-License-Identifier: Apache-2.0
"""Options of ``gvfs-api``, the REST service in front of the conductor.

``[api]`` is the service's own; it also reads ``[keystone_authtoken]``
(keystonemiddleware), ``[oslo_policy]``, ``[oslo_middleware]``,
``[healthcheck]`` and the message bus (``[DEFAULT] transport_url``),
whose options their libraries register and document.  SIGHUP makes
``gvfs-api`` re-read its files: the options marked mutable change.
"""

from oslo_config import cfg

from gvfs_openstack.conf import metrics as metrics_conf

GROUP = "api"

API_OPTS = [
    cfg.HostAddressOpt("host_ip", default="0.0.0.0",
                       help="Address ``gvfs-api`` listens on. Only for "
                            "the ``gvfs-api`` program; a WSGI server that "
                            "runs ``gvfs_openstack.wsgi.api`` binds its own."),
    cfg.PortOpt("port", default=9494,
                help="TCP port ``gvfs-api`` listens on (its catalog "
                     "endpoint's port)."),
    cfg.IntOpt("max_connections", default=64, min=1, max=4096,
               help="""Connections ``gvfs-api`` serves at once.

One thread each; a connection beyond waits in the listen queue until one
ends. Only for the ``gvfs-api`` program (a WSGI server has its own
worker settings). Related options: client_timeout, request_timeout,
max_connections_per_source.
"""),
    cfg.FloatOpt("client_timeout", default=60.0, min=1.0,
                 help="""Seconds ``gvfs-api`` waits on a client's socket.

Each read and each write of a connection's socket: a client that sends
nothing (or reads nothing of its reply) for that long loses its
connection. It bounds one wait, not a request: a byte every few seconds
keeps a connection open, which ``request_timeout`` ends. Only for the
``gvfs-api`` program. Related options: max_connections, request_timeout.
"""),
    cfg.FloatOpt("request_timeout", default=60.0, min=1.0,
                 help="""Seconds a client has to send a whole request.

Counted from the start of a connection's service to the last byte of the
request's head and body. A client still sending then loses its
connection, however steadily it trickles, so that unauthenticated
clients sending a byte at a time cannot keep the threads of
``max_connections`` from honest requests. The time the API then takes
to answer is not counted. Only for the ``gvfs-api`` program: a WSGI
server runs behind a web server whose own request timeouts do this
(Apache ``mod_reqtimeout``, nginx ``client_header_timeout`` and
``client_body_timeout``), with uWSGI ``harakiri`` or gunicorn
``timeout`` bounding each request.

Possible values: seconds, at least 1; at least what the slowest lawful
client needs for a request body (at most 256 KiB).

Related options: client_timeout, max_connections,
max_connections_per_source.
"""),
    cfg.IntOpt("max_connections_per_source", default=16, min=1, max=4096,
               help="""Connections one client address may hold at once.

A connection beyond it is answered 503 at once and closed, so that one
host cannot take every one of ``max_connections``. An IPv6 client counts
by its /64 network (one host may hold many addresses of its /64). A
reverse proxy in front of ``gvfs-api`` is one source: raise this option
to ``max_connections`` there and limit clients in the proxy. Only for
the ``gvfs-api`` program.

Possible values: 1 to 4096; at most ``max_connections`` to mean
anything.

Related options: max_connections, request_timeout.
"""),
    cfg.IntOpt("max_limit", default=1000, min=1, mutable=True,
               help="""The most migrations one list request returns.

A request's ``limit`` above it is lowered to it; the reply's ``next``
link carries the marker of the page that follows.
"""),
    cfg.BoolOpt("trusts", default=True, mutable=True,
                help="""Delegate each user's authority to gvfs-conductor.

For every migration gvfs-api makes a Keystone trust from the user to the
conductor's user, in the user's project with the user's roles; the
conductor finds and reads the source images with it, so Glance shows it
only what it shows the user, and deletes it when the job ends.  False:
the conductor reads with its own (admin) credentials, and policy alone
decides.

Related options: trust_lifetime_hours.
"""),
    cfg.StrOpt("trustee_user_id", mutable=True,
               help="""Keystone id of the user gvfs-conductor authenticates as.

Every user's trust names it as the trustee. It is configured here and
never asked of the conductor over the message bus, where any consumer
could answer and receive every user's authority. Required with
``trusts``: gvfs-api does not start without it.
Related options: trusts, delegated_roles.
"""),
    cfg.ListOpt("delegated_roles", default=["member", "reader"],
                mutable=True,
                help="""Roles a migration's trust may carry.

The caller's roles in the project that are in this list are delegated,
no others (an admin's ``admin`` role is not, by default); a caller with
none of them cannot migrate while trusts are on.
Related options: trusts.
"""),
    cfg.IntOpt("trust_lifetime_hours", default=72, min=1, mutable=True,
               help="How long a migration's trust lasts: a job resumed "
                    "after it expired fails at its next read of the source "
                    "Glance."),
    cfg.FloatOpt("rpc_timeout", default=60.0, min=1.0, mutable=True,
                 help="Seconds to wait for gvfs-conductor to answer a "
                      "request before the API answers 503."),
]


UPGRADE_LEVELS_GROUP = "upgrade_levels"

UPGRADE_LEVELS_OPTS = [
    cfg.StrOpt("conductor", regex=r"^1\.[0-9]+$",
               help="""The newest RPC version gvfs-api sends gvfs-conductor.

Unset: this release's own.  During a rolling upgrade, while some
conductors still run the previous release, set it to their version (the
release notes say which) and restart gvfs-api; unset it once every
conductor is upgraded.  Requests that need a newer version (a
migration against a named base needs 1.4; replication policies 1.3) are
then answered 409 with the reason, and the rest go on.
"""),
]


def register_opts(conf):
    conf.register_opts(API_OPTS, group=GROUP)
    metrics_conf.register_opts(conf)
    conf.register_opts(UPGRADE_LEVELS_OPTS, group=UPGRADE_LEVELS_GROUP)


def list_opts():
    return [(GROUP, API_OPTS), (UPGRADE_LEVELS_GROUP, UPGRADE_LEVELS_OPTS)]
