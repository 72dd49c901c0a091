# SPDX-License-Identifier: Apache-2.0
"""Another local account cannot read images through the client proxy.

Issue 43, item 1: the client proxy listens on loopback, and behind it the
server proxy squashes every caller to the account that owns every image;
so any account on a compute node that can open a TCP connection could
read a 0600 image by sending a forged AUTH_SYS uid.  The attack here is
the real one: an unprivileged process (the system Python, switched to
another uid in a child) connects from an ordinary port and sends a READ
of a private image's handle with a forged credential.  The proxy must
drop it at accept; the same bytes from an account listed in ``[listen]
local_users`` are served, which shows the attack would otherwise work.
"""

import asyncio
import os
import subprocess

import pytest

from gvfs_openstack.client.nfs import NfsClient
from gvfs_openstack.nfs import connection
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from tests.lab.topology import FILE_GID
from tests.lab.topology import FILE_UID

ATTACKER = 2003
SECRET = b"the private image's first bytes" * 4

#: Connects, sends one record, prints the reply's hex or CLOSED.
_ATTACK = """
import socket, sys
sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
sock.settimeout(30)
sock.sendall(bytes.fromhex(sys.argv[2]))
reply = b""
while True:
    try:
        part = sock.recv(65536)
    except ConnectionResetError:
        part = b""
    if not part:
        break
    reply += part
    if len(reply) > 4 and len(reply) >= 4 + (
            int.from_bytes(reply[:4], "big") & 0x7FFFFFFF):
        break
print(reply.hex() if reply else "CLOSED")
"""


@pytest.fixture(scope="module")
def lab(lab_factory):
    lab = lab_factory("tcp")
    path = os.path.join(lab.export, "private.img")
    with open(path, "wb") as f:
        f.write(SECRET)
    os.chown(path, FILE_UID, FILE_GID)
    os.chmod(path, 0o600)
    return lab


def _read_record(lab, port):
    """A READ of the private image, forged as its owner, framed."""
    async def handle():
        async with NfsClient("127.0.0.1", port, port) as client:
            await client.mount(lab.export)
            return await client.lookup_path("private.img")
    fh = asyncio.run(handle())
    cred = rpc.AuthSys(FILE_UID, FILE_GID, (), "forged").to_opaque()
    message = rpc.encode_message(rpc.Call(
        0x5EC0, const.NFS_PROGRAM, const.NFS_V3, const.Nfs3Proc.READ, cred,
        rpc.AUTH_NONE, nfs3.encode_args(const.Nfs3Proc.READ,
                                        nfs3.ReadArgs(fh, 0, 4096))))
    return connection.frame_header(len(message)) + message


def _attack(port, record):
    def become():
        os.setgroups([])
        os.setgid(ATTACKER)
        os.setuid(ATTACKER)
    done = subprocess.run(
        ["/usr/bin/python3", "-I", "-c", _ATTACK, str(port), record.hex()],
        preexec_fn=become, capture_output=True, text=True, timeout=60,
        cwd="/")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_another_account_is_dropped_by_the_client_proxy(lab):
    port = lab.client_proxy.port
    answer = _attack(port, _read_record(lab, port))
    assert answer == "CLOSED"
    refused = lab.client_proxy.stats()["peers_refused"]
    assert refused >= 1


def test_an_account_named_in_local_users_is_served(lab):
    """The same attack against a proxy that trusts the account works.

    So the refusal above is the listener's doing, not a broken record.
    """
    trusting = lab.add_client("trusting", listen={
        "local_users": str(ATTACKER)})
    answer = bytes.fromhex(_attack(trusting.port, _read_record(
        lab, trusting.port)))
    assert SECRET in answer


def test_root_and_the_proxys_account_are_served(lab):
    port = lab.client_proxy.port

    async def read():
        async with NfsClient("127.0.0.1", port, port, uid=FILE_UID,
                             gid=FILE_GID) as client:
            await client.mount(lab.export)
            fh = await client.lookup_path("private.img")
            return (await client.read(fh, 0, 4096)).data
    assert asyncio.run(read()) == SECRET
