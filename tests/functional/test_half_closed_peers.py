# SPDX-License-Identifier: Apache-2.0
"""A local account's half-closed connection from the host's own address.

Issue 61, item 1: the client proxy refused another account's connection
only if the kernel listed its socket as ESTABLISHED, and let an address
that is not loopback through when it found none.  So an account binds
one of the host's own addresses, connects to the proxy's loopback port,
sends MNT, LOOKUP and READ of a 0600 image and half-closes before the
proxy looks: its socket is in FIN_WAIT2 by then, and the image was
served.  Here that race is won every time: the proxy is stopped
(SIGSTOP) while the account connects, sends and half-closes, which the
kernel completes on the proxy's behalf, and resumed after.

Neighbours: the connection left open, closed right after sending,
from 127.0.0.1 and from ::1, and a LAN proxy listening on the host's
address attacked through that address.  Controls: the proxy's own
account is served the same way, half-closed, from the same address; a
FUSE mount through the proxy still reads.
"""

import asyncio
import contextlib
import ipaddress
import os
import signal
import socket
import subprocess
import time

import pytest

from gvfs_lab.topology import FILE_GID
from gvfs_lab.topology import FILE_UID
from gvfs_openstack.client.nfs import NfsClient
from gvfs_openstack.nfs import connection
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs import mount3
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy import host_addresses

ATTACKER = 2005
SECRET = b"the private image, half-closed for" * 4

#: argv: source address, proxy address, port, records (hex), mode
#: (open, half or close), source port (0: any).  Connects from the
#: source, sends the records, then leaves the connection open,
#: half-closes or closes it; prints SENT, then (unless closed) the
#: replies' hex or CLOSED.
_ATTACK = """
import socket, sys
source, host, port, records, mode, source_port = sys.argv[1:]
family = socket.AF_INET6 if ":" in host else socket.AF_INET
sock = socket.socket(family)
sock.bind((source, int(source_port)))
sock.connect((host, int(port)))
sock.sendall(bytes.fromhex(records))
if mode == "half":
    sock.shutdown(socket.SHUT_WR)
elif mode == "close":
    sock.close()
print("SENT", flush=True)
if mode == "close":
    sys.exit(0)
sys.stdin.readline()
sock.settimeout(10)
reply = b""
while True:
    try:
        part = sock.recv(65536)
    except (ConnectionResetError, TimeoutError):
        part = b""
    if not part:
        break
    reply += part
print(reply.hex() if reply else "CLOSED")
"""


def _hosts_own(version):
    """An address of this host that is not loopback, or None.

    The one the host would send from on its default route (a UDP
    "connect" sends nothing), else any it has.
    """
    family, probe = {4: (socket.AF_INET, "198.51.100.1"),
                     6: (socket.AF_INET6, "2001:db8::1")}[version]
    ours = {ip for ip in host_addresses.addresses()
            if ip.version == version and not ip.is_loopback
            and not ip.is_link_local}
    with socket.socket(family, socket.SOCK_DGRAM) as udp:
        try:
            udp.connect((probe, 9))
            chosen = ipaddress.ip_address(udp.getsockname()[0])
        except OSError:
            chosen = None
    if chosen in ours:
        return str(chosen)
    return str(min(ours, key=str)) if ours else None


@pytest.fixture(scope="module")
def own_address():
    """The host's own IPv4 address: traffic to it stays on this host."""
    address = _hosts_own(4)
    if address is None:
        pytest.fail("this attack needs an IPv4 address of this host that "
                    "is not loopback (ip -o addr lists none)")
    return address


@pytest.fixture(scope="module")
def lab(lab_factory):
    lab = lab_factory("tcp")
    path = os.path.join(lab.export, "private.img")
    with open(path, "wb") as f:
        f.write(SECRET)
    os.chown(path, FILE_UID, FILE_GID)
    os.chmod(path, 0o600)
    return lab


def _records(lab, port, host="127.0.0.1", uid=FILE_UID):
    """MNT, LOOKUP and READ of the private image, forged as its owner.

    Sent in one go, as an attacker that half-closes at once must: the
    handles are the ones a lawful client is given.
    """
    async def handles():
        async with NfsClient(host, port, port) as client:
            root = await client.mount(lab.export)
            return root, await client.lookup_path("private.img")
    root, fh = asyncio.run(handles())
    cred = rpc.AuthSys(uid, uid if uid != FILE_UID else FILE_GID, (),
                       "forged").to_opaque()
    calls = [
        (const.MOUNT_PROGRAM, const.MOUNT_V3, const.MountProc.MNT,
         mount3.encode_args(const.MountProc.MNT,
                            mount3.MntArgs(lab.export))),
        (const.NFS_PROGRAM, const.NFS_V3, const.Nfs3Proc.LOOKUP,
         nfs3.encode_args(const.Nfs3Proc.LOOKUP, nfs3.LookupArgs(
             nfs3.DirOpArgs(root, "private.img")))),
        (const.NFS_PROGRAM, const.NFS_V3, const.Nfs3Proc.READ,
         nfs3.encode_args(const.Nfs3Proc.READ,
                          nfs3.ReadArgs(fh, 0, 4096))),
    ]
    framed = b""
    for xid, (program, version, proc, args) in enumerate(calls, 0x61A0):
        message = rpc.encode_message(rpc.Call(
            xid, program, version, proc, cred, rpc.AUTH_NONE, args))
        framed += connection.frame_header(len(message)) + message
    return framed


@contextlib.contextmanager
def _stopped(proxy):
    """The proxy stopped: the kernel accepts for it, nobody checks."""
    os.kill(proxy.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(proxy.process.pid, signal.SIGCONT)


def _attack(proxy, source, records, mode, uid=ATTACKER, host="127.0.0.1",
            source_port=0):
    """The attack as ``uid``.

    ``(connections refused, calls the proxy took, the replies' bytes or
    None)``: a half-closed client's replies may be lost as the proxy
    closes on its end of file, but its calls are still carried out (a
    blind WRITE needs no reply), so the proxy's call counters tell.
    """
    def become():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    before = proxy.stats()
    with _stopped(proxy):
        child = subprocess.Popen(
            ["/usr/bin/python3", "-I", "-c", _ATTACK, source, host,
             str(proxy.port), records.hex(), mode, str(source_port)],
            preexec_fn=become if uid != os.geteuid() else None,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, cwd="/")
        try:
            assert child.stdout.readline().strip() == "SENT", \
                child.communicate(timeout=10)[1]
        except BaseException:
            child.kill()
            raise
    out, err = child.communicate("go\n", timeout=60)
    assert child.returncode == 0, err
    after = _decided(proxy, before)
    refused = after["peers_refused"] - before["peers_refused"]
    taken = sum(after["calls"].values()) - sum(before["calls"].values())
    said = out.strip()
    return refused, taken, \
        None if said in ("", "CLOSED") else bytes.fromhex(said)


def _decided(proxy, before):
    """The proxy's counters once it has admitted or refused the peer.

    A closed attacker exits before the proxy, resumed, even accepts.
    """
    deadline = time.monotonic() + 30
    while True:
        after = proxy.stats()
        if after["peers_refused"] + after["connections"] > \
                before["peers_refused"] + before["connections"]:
            return after
        assert time.monotonic() < deadline, \
            "the proxy neither admitted nor refused the connection"
        time.sleep(0.05)


@pytest.mark.parametrize("mode", ["half", "open", "close"])
def test_another_account_from_the_hosts_address_is_refused(lab, mode,
                                                           own_address):
    proxy = lab.client_proxy
    refused, taken, served = _attack(proxy, own_address,
                                     _records(lab, proxy.port), mode)
    assert (refused, taken, served) == (1, 0, None)


@pytest.mark.parametrize("source", ["127.0.0.1", "127.0.0.7"])
def test_another_account_from_loopback_is_refused_half_closed(lab, source):
    proxy = lab.client_proxy
    refused, taken, served = _attack(proxy, source,
                                     _records(lab, proxy.port), "half")
    assert (refused, taken, served) == (1, 0, None)


def test_another_account_over_ipv6_is_refused_half_closed(lab):
    proxy = lab.add_client("v6", listen={"host": "::1"})
    records = _records(lab, proxy.port, host="::1")
    sources = ["::1"] + [a for a in [_hosts_own(6)] if a]
    for source in sources:
        refused, taken, served = _attack(proxy, source, records, "half",
                                         host="::1")
        assert (source, refused, taken, served) == (source, 1, 0, None)


def test_a_lan_proxy_is_not_reached_through_its_own_address(
        lab, own_address):
    """A LAN proxy listens on its rack address, its peers allowed."""
    network = str(ipaddress.ip_network(own_address + "/24", strict=False))
    rack = lab.add_client("rack", listen={
        "host": own_address, "allowed_peers": network})
    records = _records(lab, rack.port, host=own_address)
    for mode in ("half", "close"):
        refused, taken, served = _attack(rack, own_address, records, mode,
                                         host=own_address)
        assert (mode, refused, taken, served) == (mode, 1, 0, None)
    refused, taken, served = _attack(rack, own_address, records, "open",
                                     uid=os.geteuid(), host=own_address)
    assert (refused, taken) == (0, 3) and SECRET in served


def test_the_proxys_own_account_is_served_half_closed(lab, own_address):
    """The same bytes, the same race, from a lawful client: served.

    So the refusals above are the check's doing: half-closed, its three
    calls are taken; left open, it reads the image.
    """
    proxy = lab.client_proxy
    records = _records(lab, proxy.port)
    refused, taken, _ = _attack(proxy, own_address, records, "half",
                                uid=os.geteuid())
    assert (refused, taken) == (0, 3)
    refused, taken, served = _attack(proxy, own_address, records, "open",
                                     uid=os.geteuid())
    assert (refused, taken) == (0, 3) and SECRET in served


def test_a_fuse_mount_through_the_proxy_still_reads(lab, tmp_path):
    mount = lab.mount(str(tmp_path), name="half-closed-mount")
    with open(os.path.join(mount.mountpoint, "private.img"), "rb") as f:
        assert f.read() == SECRET


def test_a_kernel_mount_gives_every_local_account_the_file_account(lab):
    """Why kernel mounts are single-tenant (``mount_type = nfs``).

    The kernel's NFS client connects as root from a reserved port, which
    the proxy serves, and sends each local account's own uid; the server
    proxy maps every uid to the file account, and the kernel asks the
    server (ACCESS) rather than the modes.  So any account that reaches
    the mount point reads a 0600 image: what this sends is what the
    kernel would for uid 2005.
    """
    proxy = lab.client_proxy
    records = _records(lab, proxy.port, uid=ATTACKER)
    refused, taken, served = _attack(proxy, "127.0.0.1", records, "open",
                                     uid=0, source_port=_reserved_port())
    assert (refused, taken) == (0, 3) and SECRET in served


def _reserved_port():
    """A free port below 1024, as the kernel's NFS client binds."""
    for port in range(1023, 600, -1):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    pytest.fail("no free reserved port on 127.0.0.1")
