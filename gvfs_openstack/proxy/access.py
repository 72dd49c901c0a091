# SPDX-License-Identifier: Apache-2.0
"""What the server-side proxy lets through: identities, exports, peers.

The GVFS paper's server-side proxy maps the short-lived "shadow" accounts
that middleware allocates on compute nodes to the one file account that
owns the data on the DTN, and it only serves the exports it was told to.
These classes hold that policy and nothing else, so they are tested without
any network.
"""

import ipaddress
import posixpath

from gvfs_openstack.nfs.rpc import AuthSys


class IdentityMap:
    """Maps AUTH_SYS credentials from clients to credentials on the export.

    Every uid/gid found in ``uid_map``/``gid_map`` is translated; anything
    else is squashed to the file account ``(squash_uid, squash_gid)``,
    or with ``squash_unmapped`` off passes unchanged.  Root (uid 0 or gid
    0) never passes unless ``allow_root`` is set, even if a map names it:
    a compromised compute node must not become root on the DTN's export
    by accident.
    """

    def __init__(self, squash_uid, squash_gid, uid_map=None, gid_map=None,
                 allow_root=False, squash_unmapped=True):
        self.squash_uid = squash_uid
        self.squash_gid = squash_gid
        self.uid_map = dict(uid_map or {})
        self.gid_map = dict(gid_map or {})
        self.allow_root = allow_root
        self.squash_unmapped = squash_unmapped

    def _uid(self, uid):
        mapped = self.uid_map.get(
            uid, self.squash_uid if self.squash_unmapped else uid)
        if mapped == 0 and not self.allow_root:
            return self.squash_uid
        return mapped

    def _gid(self, gid):
        mapped = self.gid_map.get(
            gid, self.squash_gid if self.squash_unmapped else gid)
        if mapped == 0 and not self.allow_root:
            return self.squash_gid
        return mapped

    def map(self, cred):
        """The AuthSys to present to the NFS server for ``cred``."""
        if (cred.uid == 0 or cred.gid == 0) and not self.allow_root:
            return AuthSys(self.squash_uid, self.squash_gid, (),
                           cred.machinename, cred.stamp)
        gids = []
        for gid in cred.gids:
            if gid in self.gid_map or not self.squash_unmapped:
                mapped = self._gid(gid)
                if mapped not in gids:
                    gids.append(mapped)
        return AuthSys(self._uid(cred.uid), self._gid(cred.gid), tuple(gids),
                       cred.machinename, cred.stamp)


def parse_id_map(entries, what):
    """``{"1000": "2000"}`` (as oslo.config gives a DictOpt) to ints."""
    result = {}
    for key, value in (entries or {}).items():
        try:
            src, dst = int(key), int(value)
        except (TypeError, ValueError):
            raise ValueError("%s map entry %r:%r is not a pair of numeric "
                             "ids" % (what, key, value)) from None
        if src < 0 or dst < 0 or src > 0xFFFFFFFF or dst > 0xFFFFFFFF:
            raise ValueError("%s map entry %d:%d is out of range"
                             % (what, src, dst))
        result[src] = dst
    return result


class ExportAllowlist:
    """The export paths a MOUNT may name, and their subdirectories."""

    def __init__(self, exports):
        self.exports = tuple(self._normalise(p) for p in exports)
        if not self.exports:
            raise ValueError("at least one export must be allowed")

    @staticmethod
    def _normalise(path):
        if not path.startswith("/"):
            raise ValueError("export path %r is not absolute" % path)
        return posixpath.normpath(path).rstrip("/") or "/"

    def allows(self, path):
        """True if ``path`` is an allowed export or lies under one.

        Paths with ``..`` components, NUL bytes or that are not absolute
        are refused outright rather than normalised: a client that sends
        them is probing.
        """
        if (not path.startswith("/") or "\0" in path
                or ".." in path.split("/")):
            return False
        path = posixpath.normpath(path).rstrip("/") or "/"
        for export in self.exports:
            if export == "/" or path == export or path.startswith(
                    export + "/"):
                return True
        return False

    def filter(self, paths):
        return [p for p in paths if self.allows(p)]

    def inside(self, paths):
        """``paths``, normalised; ValueError if one is not in an export."""
        for path in paths:
            if not self.allows(path):
                raise ValueError("%r is not an absolute path inside an "
                                 "allowed export" % path)
        return [self._normalise(p) for p in paths]


class PeerAllowlist:
    """Addresses that may connect to the server proxy (tunnel endpoints)."""

    def __init__(self, networks):
        self.networks = tuple(ipaddress.ip_network(n, strict=False)
                              for n in networks)

    def allows(self, address):
        if not self.networks:
            return True
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        if ip.version == 6 and ip.ipv4_mapped:
            ip = ip.ipv4_mapped
        return any(ip in net for net in self.networks)


def is_loopback(host):
    """Whether ``host`` is this host's loopback (a name is not)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # A name: it may resolve to anything.


def exposure(role, host, tls, allowed_peers):
    """Why a listener so configured is open to more than its role needs.

    None when it is not.  A server proxy serves the DTN's images to
    whoever connects, after only the export guard and the identity map:
    it must name its tunnel endpoints.  A listener off loopback without
    TLS carries images and AUTH_SYS credentials in clear and believes
    any address that reaches it; it must at least name its peers, and a
    server proxy must not do it at all.  ``[listen] trusted_network``
    overrides both, for networks the operator vouches for.
    """
    if role == "server" and not allowed_peers:
        return ("a server proxy with an empty allowed_peers serves every "
                "host that reaches it; name its tunnel endpoints")
    if tls or is_loopback(host):
        return None
    if not allowed_peers:
        return ("a plain TCP listener on %s with an empty allowed_peers "
                "serves every host that reaches it; name its peers or "
                "use tls_cert" % host)
    if role == "server":
        return ("a server proxy listening on %s without TLS sends images "
                "and credentials in clear; use tls_cert, or ssh tunnels "
                "to a loopback listener" % host)
    return None
