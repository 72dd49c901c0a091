# SPDX-License-Identifier: Apache-2.0
"""RPC records on asyncio transports: socket buffers and record writes.

The I/O half of :mod:`gvfs_openstack.nfs.connection`, which stays
sans-IO; the NFS client and both proxy roles write their records here.
"""

import socket

from gvfs_openstack.nfs import connection


#: Below this size, buffers are joined into one write (one syscall).
_JOIN_BELOW = 64 * 1024


def tune_socket(transport, size=4 * 1024 * 1024):
    """Large socket buffers, so a 1 MiB record leaves in one ``send``."""
    sock = transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6,
                                           socket.AF_UNIX):
        return
    for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, option, size)
        except OSError:
            return  # Not a real socket (e.g. a test double): keep defaults.


def write_record(transport, buffers):
    """Write ``buffers`` as one record; returns the bytes written.

    Small records are joined so that each costs one ``send``; large ones
    go out buffer by buffer so that a 1 MiB payload is never copied just
    to prepend four bytes.
    """
    total = sum(len(b) for b in buffers)
    header = connection.frame_header(total)
    if total < _JOIN_BELOW:
        transport.write(b"".join((header, *buffers)))
    else:
        transport.write(header)
        for buf in buffers:
            transport.write(buf)
    return 4 + total
