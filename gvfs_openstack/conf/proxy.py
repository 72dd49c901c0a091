# SPDX-License-Identifier: Apache-2.0
"""Options of ``gvfs-proxy``: its role, its listener, and its two sides."""

from oslo_config import cfg

proxy_group = cfg.OptGroup("proxy", title="GVFS proxy",
                           help="What this proxy is and how it behaves.")
listen_group = cfg.OptGroup("listen", title="Downstream listener",
                            help="Where NFS clients or lower proxies "
                                 "connect to this proxy.")
server_group = cfg.OptGroup("server", title="Server role",
                            help="Options of the server-side proxy that "
                                 "runs on the DTN in front of its NFS "
                                 "server.")
upstream_group = cfg.OptGroup("upstream", title="Client role upstream",
                              help="The next hop of a client-side proxy "
                                   "and the tunnel that reaches it.")

proxy_opts = [
    cfg.StrOpt("role", choices=[
        ("server", "on the DTN: authenticates peers, maps identities, "
                   "guards exports, forwards to the NFS server"),
        ("client", "on a controller or compute node: serves local NFS "
                   "clients and forwards to the next proxy")],
        help="""Role of this proxy in the GVFS chain; required by ``serve``.

Related options:
  [server] for the server role, [upstream] for the client role.
"""),
    cfg.IntOpt("max_record_size", default=4 * 1024 * 1024,
               min=64 * 1024, max=64 * 1024 * 1024,
               help="""Largest ONC-RPC record accepted, in bytes.

A larger call or reply is never buffered: it is read and dropped, and
refused alone (a call gets GARBAGE_ARGS, a reply fails its own call); the
connection goes on. The proxy advertises in FSINFO, and lowers READ and
READDIR counts to, the largest power of two that fits a record with its
headers: 2 MiB with the default.

Related options:
  [cache] readahead_kb, [cache] whole_file_chunk_mb (bounded by it).
"""),
    cfg.IntOpt("max_inflight", default=128, min=1, max=4096, mutable=True,
               help="Calls a single downstream connection may have in "
                    "flight before the proxy stops reading from it."),
    cfg.IntOpt("max_buffered_mb", default=32, min=1, max=1024, mutable=True,
               help="""MiB of replies a downstream connection may leave unread.

Past it the proxy stops reading that connection's calls until its
replies drain, so that a client that sends calls without reading the
replies (or reads them slowly) holds at most this much plus the replies
of its ``max_inflight`` calls in the proxy's memory, and slows only
itself.

Related options:
  max_inflight.
"""),
    cfg.IntOpt("heap_retain_mb", default=64, min=0, max=1024,
               help="""MiB of freed memory kept for the next records.

Each READ reply and WRITE call the proxy relays, and each READ a
``gvfs-proxy mount`` answers, has a buffer of its own. With the C
library's defaults a freed 1 MiB buffer goes back to the kernel, and the
next record's pages are faulted in and zeroed again: up to a third of a
relaying hop's CPU. The proxy and its mount ask glibc to keep this much
freed memory (and to serve buffers up to this size, at most 32 MiB, from
it). After a burst they may hold what its buffers took until their
traffic has stopped for 30 seconds, when they hand it back.

Possible values:
  0: the C library's own policy; 1-1024: MiB kept (glibc only).
"""),
    cfg.IntOpt("write_behind_mb", default=0, min=0, max=1024,
               help="""MiB of UNSTABLE WRITEs answered ahead of the server.

NFSv3 lets a server answer an UNSTABLE WRITE before the data is on stable
storage; the client keeps its copy until a COMMIT. The client proxy
answers such WRITEs once it holds them and sends them on back to back, so
that a client with one WRITE in flight is not held to one round trip of
the whole chain per WRITE. A COMMIT, and every other call naming the
file, waits until the file's WRITEs are answered upstream. A WRITE that
fails upstream makes the file's next COMMIT answer NFS3ERR_IO and changes
the write verifier, so no acknowledged byte is lost silently; but the
error reaches the client at its COMMIT (``fsync``, ``close``), not at the
WRITE, and the early replies carry no file attributes. Files written
back (``[cache] write_policy = writeback``) are not concerned.

Possible values:
  0: every WRITE is answered by the server; 1-1024: MiB in flight at most
  (16 is plenty for one stream).
Related options:
  [cache] write_policy.
"""),
    cfg.StrOpt("control_socket",
               help="""Path of the local control socket (mode 0600).

``gvfs-proxy stats`` reads counters through it. Unset: no control socket.
"""),
    cfg.IntOpt("workers", default=0, min=0, max=64,
               help="""Processes of a server proxy; 0: one per core, at most 8.

With more than one, ``gvfs-proxy serve`` binds the port and hands each
connection to the worker with the fewest open ones; each worker is a
whole server proxy on a core of its own.  For DTNs that serve many LAN
caches or compute nodes at once (a boot storm).  The workers split
``[server] upstream_connections`` among them.  Each worker has its own
NFS connections, export guard and duplicate-request cache: a client
that resends a non-idempotent call on a new connection may reach another
worker, which does it again, as after a server restart.  ``stats`` and
the Prometheus endpoint show the workers added up (and what each
served); they need ``control_socket``.  Server role only: a client
proxy's cache belongs to one process (0 gives it one; more is refused).
"""),
]

listen_opts = [
    cfg.HostAddressOpt("host", default="127.0.0.1",
                       help="Address to listen on for NFS and MOUNT "
                            "calls (both programs share one port)."),
    cfg.PortOpt("port", default=0,
                help="Port to listen on; 0 picks a free port, which is "
                     "logged and shown by ``gvfs-proxy stats``."),
    cfg.ListOpt("allowed_peers", default=[], mutable=True,
                help="""Networks (CIDR) whose hosts may connect.

On a server proxy list only the tunnel endpoints: the address sshd connects
from (for ``ssh`` tunnels) or the client proxies (for ``tls`` and ``tcp``).
Empty: every peer may connect -- only allowed on a client proxy, and off
loopback only with TLS. A server proxy with an empty list, a plain TCP
listener off loopback with an empty list, and a server proxy's plain TCP
listener off loopback do not start unless ``trusted_network`` is set.
Related options: trusted_network.
"""),
    cfg.ListOpt("local_users", default=[], mutable=True,
                help="""Other local accounts that may connect.

A connection from a socket of this host is served only if the kernel says
that socket belongs to root, to the proxy's account or to one of these
(user names or numeric uids): any other account could otherwise send any
AUTH_SYS uid and read every image the export's account may read. List the
account sshd logs in as for ``ssh`` tunnels, and that of a FUSE mount run
apart from the proxy; services reach images through the mount, which
checks each user's permissions. Connections from other hosts are governed
by ``allowed_peers`` and TLS alone.
Related options: allowed_peers.
"""),
    cfg.BoolOpt("trusted_network", default=False,
                help="""Start a listener exposed beyond what its role needs.

Off: the proxy refuses to start with a configuration that serves every
host that reaches it, or sends a server proxy's images in clear off
loopback (see ``allowed_peers``). On: it starts and logs a warning; only
for a network where every host that can reach the listener, and every
link between, is trusted (a lab, a private rack network).
Related options: allowed_peers, tls_cert.
"""),
    cfg.StrOpt("tls_cert",
               help="""Certificate (PEM) to serve TLS with.

When set, the listener speaks TLS and requires a client certificate signed
by ``tls_ca`` (mutual TLS). Related options: tls_key, tls_ca.
"""),
    cfg.StrOpt("tls_key", help="Private key (PEM) of ``tls_cert``."),
    cfg.StrOpt("tls_ca", help="CA bundle (PEM) that client certificates "
                              "must chain to."),
]

server_opts = [
    cfg.HostAddressOpt("nfs_host", default="127.0.0.1",
                       help="Address of the NFS server this proxy fronts."),
    cfg.PortOpt("nfs_port", default=2049,
                help="NFS (program 100003) port of the NFS server."),
    cfg.PortOpt("mount_port", default=20048,
                help="MOUNT (program 100005) port of the NFS server."),
    cfg.ListOpt("exports", default=[],
                help="""Export paths that clients may mount.

Subdirectories of these paths may be mounted too.

Required in the server role.

MNT of any other path is answered with MNT3ERR_ACCES and EXPORT replies
list only these.
"""),
    cfg.ListOpt("read_only_dirs", default=[],
                help="""Directories whose files clients may read, not change.

Absolute paths on the NFS server, each inside one of ``exports``: the
``gvfs`` store's image directories, on a server proxy that serves
compute nodes (Glance's node reaches the DTN through another server
proxy, without this option, to upload and delete images).  A call that
would write, truncate, chmod, remove, rename, link or replace a file
directly in one of them, or create a file or directory there, is
answered NFS3ERR_ROFS; so is a change of any name on the way down to
them (renaming, removing or replacing ``images`` or a parent of it) and
of their and their parents' attributes.  Compute nodes still write what
their work needs: boot profiles (``.gvfs-meta.<name>.profile``), the
``.gvfs-refs`` directory and anything in subdirectories (golden
references).  Until the proxy has walked its exports once after a start,
the first change of a file waits for that walk.  A hard link to an image
from outside these directories, or a symbolic link to one of them inside
an export, is not covered: keep none.
"""),
    cfg.IntOpt("squash_uid", default=65534, min=0, max=2 ** 32 - 1,
               help="""uid of the file account on the export.

Every client uid not named in ``uid_map`` is mapped to it (all-squash).
"""),
    cfg.IntOpt("squash_gid", default=65534, min=0, max=2 ** 32 - 1,
               help="gid of the file account; unmapped gids map to it."),
    cfg.DictOpt("uid_map", default={},
                help="""Client uid to export uid, e.g. ``1001:2001,1002:2002``.

Lets per-user shadow accounts on compute nodes reach their own files.
Related options: squash_uid, allow_root.
"""),
    cfg.DictOpt("gid_map", default={},
                help="Client gid to export gid, as ``uid_map``; "
                     "supplementary groups not named here are dropped."),
    cfg.BoolOpt("squash_unmapped", default=True,
                help="""Map ids not named in the maps to the file account.

Off: they reach the NFS server unchanged (an identity-preserving proxy,
for sites whose compute nodes and DTN share one user database, with the
mount's ``[mount] identity = caller``); root still needs ``allow_root``.
Related options: uid_map, gid_map, allow_root.
"""),
    cfg.BoolOpt("allow_root", default=False,
                help="""Let uid/gid 0 reach the NFS server.

Off: root is squashed to the file account even if a map names it.
"""),
    cfg.IntOpt("upstream_connections", default=2, min=1, max=64,
               help="Connections to the NFS server shared by all clients "
                    "(XIDs are multiplexed)."),
    cfg.IntOpt("max_admitted_handles", default=262144, min=1024,
               help="""File handles of allowed exports kept in memory.

The proxy serves only file handles it has seen come down from an allowed
export (a forged handle of another export of the same NFS server is
refused with NFS3ERR_STALE). Beyond this many, the least recently used
are dropped and found again, when used, by walking the allowed exports.
About 170 bytes each; set it above the number of files in the exports.
Related options: handle_rescan_interval.
"""),
    cfg.FloatOpt("handle_rescan_interval", default=10.0, min=0.0,
                 help="""Seconds between walks of the allowed exports.

A client presenting a file handle the proxy does not know (it restarted,
or the handle was dropped) makes it walk the allowed exports (MNT, then
READDIRPLUS of every directory, as the file account) and look again; a
handle still unknown is refused. Within this interval of the last walk an
unknown handle is refused at once, so forged handles cannot make the
proxy walk without pause.
"""),
    cfg.IntOpt("bulk_zstd_level", default=1, min=1, max=19,
               help="""zstd level of whole-file chunks sent to client proxies.

1 compresses at several hundred MB/s per core, enough to outrun a WAN link;
higher levels save link bandwidth for CPU. Chunks are compressed on
several threads.
"""),
]

upstream_opts = [
    cfg.StrOpt("tunnel", default="ssh", choices=[
        ("ssh", "direct-tcpip channel through the DTN's sshd, key auth"),
        ("tls", "mutual TLS straight to the server proxy"),
        ("tcp", "plain TCP: TRUSTED NETWORKS ONLY, nothing is "
                "authenticated or encrypted")],
        help="How to reach the next hop."),
    cfg.HostAddressOpt("host", default="127.0.0.1",
                       help="""Address of the next proxy.

For ``ssh`` tunnels this is as seen from the SSH server (normally
127.0.0.1 on the DTN).
"""),
    cfg.PortOpt("port",
                help="Port of the next proxy (required in the client "
                     "role)."),
    cfg.IntOpt("connections", default=2, min=1, max=64,
               help="Parallel connections to the next hop."),
    cfg.FloatOpt("call_timeout", default=300.0, min=1.0,
                 help="""Seconds a call may wait for the next hop, including
reconnects, before the client gets SYSTEM_ERR.
"""),
    cfg.FloatOpt("reconnect_initial_delay", default=0.05, min=0.001,
                 help="First delay before reconnecting a dead tunnel; "
                      "doubles on each failure."),
    cfg.FloatOpt("reconnect_max_delay", default=5.0, min=0.01,
                 help="Longest delay between reconnect attempts."),
    cfg.StrOpt("tls_cert", help="Client certificate (PEM) for ``tls``."),
    cfg.StrOpt("tls_key", help="Private key (PEM) of ``tls_cert``."),
    cfg.StrOpt("tls_ca", help="CA bundle (PEM) the server proxy's "
                              "certificate must chain to."),
    cfg.StrOpt("tls_server_name",
               help="Name to verify in the server certificate; "
                    "defaults to ``host``."),
    cfg.HostAddressOpt("ssh_host", help="SSH server (the DTN) for ``ssh``."),
    cfg.PortOpt("ssh_port", default=22, help="Port of the SSH server."),
    cfg.StrOpt("ssh_user", help="Account to log in as on the SSH server."),
    cfg.StrOpt("ssh_key", help="Private key file for the SSH login."),
    cfg.StrOpt("ssh_known_hosts",
               help="""known_hosts file holding the SSH server's host key.

Required: unknown host keys are rejected, never trusted on first use.
"""),
    cfg.StrOpt("ssh_command", default="ssh",
               help="""The OpenSSH client the proxy runs for ``ssh``.

The proxy runs it with a local forward to the server proxy and a session
running ``cat`` (which keeps TCP_NODELAY on at both ends and ends the
tunnel when the proxy ends): the DTN account needs a shell, or a forced
``command="cat"`` in its ``authorized_keys``.
"""),
    cfg.ListOpt("ssh_ciphers", default=[
        "aes128-gcm@openssh.com", "aes256-gcm@openssh.com",
        "chacha20-poly1305@openssh.com"],
        help="""Ciphers offered to sshd, most preferred first.

AES-GCM runs on the CPU's AES instructions and is the fastest OpenSSH
cipher on x86 and ARM servers; chacha20-poly1305 is faster only without
them.
"""),
]

GROUPS = (
    (proxy_group, proxy_opts),
    (listen_group, listen_opts),
    (server_group, server_opts),
    (upstream_group, upstream_opts),
)


def register_opts(conf):
    for group, opts in GROUPS:
        conf.register_group(group)
        conf.register_opts(opts, group=group)


def list_opts():
    return [(group, opts) for group, opts in GROUPS]
