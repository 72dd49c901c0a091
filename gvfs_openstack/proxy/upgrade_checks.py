# SPDX-License-Identifier: Apache-2.0
"""What ``gvfs-status upgrade check`` reports of a proxy's configuration.

The settings the security guide calls unsafe, read from the proxy's own
file, so an operator sees them before (or after) restarting a proxy of
a new release rather than in its log: a listener open beyond what its
role needs (the proxy refuses to start with one unless ``[listen]
trusted_network`` says so), root passed through to the export, and a
plain TCP tunnel across a network.
"""

from oslo_upgradecheck import upgradecheck

from gvfs_openstack.proxy import access

Code = upgradecheck.Code
Result = upgradecheck.Result


def listener(conf):
    listen = conf.listen
    exposed = access.exposure(conf.proxy.role, listen.host,
                              bool(listen.tls_cert), listen.allowed_peers)
    if exposed is None:
        return Result(Code.SUCCESS)
    if listen.trusted_network:
        return Result(Code.WARNING, (
            "%s. It starts only because [listen] trusted_network is set: "
            "do so only on a network you vouch for." % exposed))
    return Result(Code.FAILURE, "%s. The proxy refuses to start so."
                  % exposed)


def root(conf):
    if conf.proxy.role == "server" and conf.server.allow_root:
        return Result(Code.WARNING, (
            "[server] allow_root = true: root on any node that reaches "
            "this proxy is root on the export (set-user-ID files, every "
            "image). Leave it off unless a mount with identity = caller "
            "must clear others' set-user-ID bits."))
    return Result(Code.SUCCESS)


def tunnel(conf):
    upstream = conf.upstream
    if conf.proxy.role == "client" and upstream.tunnel == "tcp" and \
            not access.is_loopback(upstream.host):
        return Result(Code.WARNING, (
            "[upstream] tunnel = tcp to %s: images and AUTH_SYS "
            "credentials cross the network in clear and nothing "
            "authenticates the next hop. Use ssh or tls unless it is a "
            "LAN proxy on a network you vouch for." % upstream.host))
    return Result(Code.SUCCESS)


#: (name, check of the parsed configuration) in the order reported.
CHECKS = (
    ("Proxy listener", listener),
    ("Root on the export", root),
    ("Tunnel", tunnel),
)
