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

The FUSE mount is the other way in: with ``[mount] group`` it shows its
files as the services' group's only, and the kernel keeps every other
account out (``default_permissions``).
"""

import asyncio
import errno
import os
import stat
import subprocess
import sys
import tempfile

import pytest

from gvfs_lab import fusemount
from gvfs_lab.topology import FILE_GID
from gvfs_lab.topology import FILE_UID
from gvfs_openstack.client.nfs import NfsClient
from gvfs_openstack.nfs import connection
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc

ATTACKER = 2003
#: A member of the services' group (as glance, nova and qemu are).
MEMBER = 2004
SERVICES_GROUP = 2010
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
    # Readable by all on the DTN, as an image the store wrote 0644.
    path = os.path.join(lab.export, "shared.img")
    with open(path, "wb") as f:
        f.write(SECRET)
    os.chown(path, FILE_UID, FILE_GID)
    os.chmod(path, 0o644)
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


#: Reads a file; prints its hex, or the errno's name.
_READ = """
import errno, sys
try:
    with open(sys.argv[1], "rb") as f:
        print(f.read().hex())
except OSError as e:
    print(errno.errorcode[e.errno])
"""


def _read_as(uid, groups, path):
    def become():
        os.setgroups(groups)
        os.setgid(uid)
        os.setuid(uid)
    done = subprocess.run(["/usr/bin/python3", "-I", "-c", _READ, path],
                          preexec_fn=become, capture_output=True, text=True,
                          timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr
    said = done.stdout.strip()
    return said if said in errno.errorcode.values() else bytes.fromhex(said)


def _mount(lab, name, **options):
    # Other accounts must reach the mount point: not under pytest's 0700
    # temporary directories.
    mountpoint = tempfile.mkdtemp(prefix="gvfs-shown-")
    os.chmod(mountpoint, 0o755)
    return lab.mount(mountpoint, name=name, allow_other="true",
                     **options).mountpoint


def test_a_mount_without_a_group_shows_the_dtns_modes(lab):
    """What a group mount prevents: any account reads a 0644 image."""
    mountpoint = _mount(lab, "dtn-modes")
    path = os.path.join(mountpoint, "shared.img")
    assert _read_as(ATTACKER, [], path) == SECRET


def test_a_group_mount_admits_only_the_services_group(lab):
    mountpoint = _mount(lab, "group-shown", group=str(SERVICES_GROUP))
    for name, mode in (("shared.img", 0o660), ("private.img", 0o660)):
        path = os.path.join(mountpoint, name)
        st = os.stat(path)
        # The mount's own account and the group, with the owner's bits.
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (
            os.geteuid(), SERVICES_GROUP, mode)
        assert _read_as(ATTACKER, [], path) == "EACCES"
        assert _read_as(MEMBER, [SERVICES_GROUP], path) == SECRET
    assert stat.S_IMODE(os.stat(mountpoint).st_mode) & 0o007 == 0


@pytest.mark.parametrize("options, said", [
    ({"group": str(SERVICES_GROUP), "identity": "caller"},
     "[mount] group is for identity = daemon: a mount acting as its "
     "callers shows the files' own owners"),
    ({"group": "no-such-group-here"},
     "[mount] group no-such-group-here: no such group on this node"),
])
def test_a_group_the_mount_cannot_show_is_refused_at_start(lab, tmp_path,
                                                           options, said):
    config = fusemount.write_mount_config(str(tmp_path / "m.conf"),
                                          options)
    refused = subprocess.run(
        [sys.executable, "-m", "gvfs_openstack.cmd.proxy", "--config-file",
         lab.client_proxy.config, "--config-file", config, "mount",
         "--export", lab.export, str(tmp_path)], capture_output=True,
        text=True, timeout=60)
    assert refused.returncode == 2
    assert refused.stderr.strip() == "gvfs-proxy mount: " + said
    assert not os.path.ismount(str(tmp_path))
