# SPDX-License-Identifier: Apache-2.0
"""The AUTH_SYS credential of the process behind a FUSE request.

With ``[mount] identity = caller`` each request reaches the NFS server as
the user who made it, as through a kernel NFS mount: the server's own
permission checks (and the server proxy's identity map) then see that
user, not the mount daemon.  The kernel tells FUSE the caller's uid, gid
and pid but not its supplementary groups, which NFS servers need for
group permissions; they are read from ``/proc/<pid>/status``.
"""

from gvfs_openstack.nfs import rpc

#: At most this many supplementary groups fit in AUTH_SYS (RFC 5531
#: appendix A); a kernel NFS client sends the first 16 too.
_MAX_GROUPS = rpc.MAX_AUTH_SYS_GIDS


def supplementary_groups(pid, proc="/proc"):
    """The caller's supplementary gids, or () if it is already gone."""
    try:
        with open("%s/%d/status" % (proc, pid)) as f:
            for line in f:
                if line.startswith("Groups:"):
                    return tuple(int(g) for g in line.split()[1:])
    except (OSError, ValueError):
        pass
    return ()


class Callers:
    """Credentials of the callers of FUSE requests, as opaque AUTH_SYS."""

    def __init__(self, machinename, proc="/proc"):
        self.machinename = machinename
        self.proc = proc

    def of(self, ctx):
        """The credential for a request with pyfuse3 context ``ctx``."""
        groups = tuple(g for g in supplementary_groups(ctx.pid, self.proc)
                       if g != ctx.gid)[:_MAX_GROUPS]
        return rpc.AuthSys(ctx.uid, ctx.gid, groups,
                           self.machinename).to_opaque()
