# SPDX-License-Identifier: Apache-2.0
"""NFS clients -> client proxy -> tunnel -> server proxy -> NFS-Ganesha.

Everything here is real: libnfs's nfs-cp/nfs-ls and our asyncio client on
one end, NFS-Ganesha on the other, sshd, TLS and toxiproxy in between.
"""

import asyncio
import os
import signal
import socket
import subprocess
import time

import pytest

from gvfs_lab import certs
from gvfs_lab import process
from gvfs_lab import slowness
from gvfs_lab.topology import FILE_GID
from gvfs_lab.topology import FILE_UID
from gvfs_lab.topology import Proxy
from gvfs_openstack.client.nfs import NfsClient
from gvfs_openstack.nfs import connection
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.errors import NfsError
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy import ssh_forward
from gvfs_openstack.proxy import tunnel
from tests.functional.conftest import nfs_cp
from tests.functional.conftest import random_file
from tests.functional.conftest import sha256

MIB = 1024 * 1024


@pytest.mark.parametrize("tunnel", ["tcp", "tls", "ssh"])
def test_256mib_round_trip_is_byte_identical(lab_factory, tmp_path, tunnel):
    lab = lab_factory(tunnel)
    src = tmp_path / "src"
    expected = random_file(src, 256 * MIB)
    up = nfs_cp(str(src), lab.client_url("round-trip.bin"))
    assert up.returncode == 0, up.stderr
    back = tmp_path / "back"
    down = nfs_cp(lab.client_url("round-trip.bin"), str(back))
    assert down.returncode == 0, down.stderr
    assert sha256(back) == expected
    on_export = os.path.join(lab.export, "round-trip.bin")
    assert sha256(on_export) == expected
    # Created through the proxy: owned by the mapped file account,
    # although nfs-cp ran as root.
    st = os.stat(on_export)
    assert (st.st_uid, st.st_gid) == (FILE_UID, FILE_GID)
    stats = lab.client_proxy.stats()
    assert stats["calls"]["nfs_write"] >= 256
    assert stats["upstream_bytes_out"] > 256 * MIB
    os.unlink(on_export)


def client_for(lab, port=None, uid=1000):
    port = port or lab.client_proxy.port
    return NfsClient("127.0.0.1", port, port, uid=uid, gid=uid, window=4)


def test_directory_operations_through_the_chain(lab_factory):
    lab = lab_factory("tcp")

    async def scenario():
        async with client_for(lab) as nfs:
            root = await nfs.mount(lab.export)
            top = await nfs.mkdir(root, "dir-ops")
            sub = await nfs.mkdir(top, "sub")
            fh = await nfs.create(sub, "file.txt")
            payload = os.urandom(3 * MIB + 17)
            assert await nfs.write_file(fh, [payload]) == len(payload)
            await nfs.rename(sub, "file.txt", top, "renamed.txt")
            names = sorted(e.name for e in await nfs.readdirplus(top))
            assert names == [".", "..", "renamed.txt", "sub"]
            renamed = await nfs.lookup_path("dir-ops/renamed.txt")
            data = bytearray()
            async for _, chunk in nfs.read_file(renamed):
                data += chunk
            assert bytes(data) == payload
            attrs = await nfs.getattr(renamed)
            assert (attrs.uid, attrs.size) == (FILE_UID, len(payload))
            with pytest.raises(NfsError, match="NOTEMPTY"):
                await nfs.rmdir(root, "dir-ops")
            await nfs.remove(top, "renamed.txt")
            await nfs.rmdir(top, "sub")
            await nfs.rmdir(root, "dir-ops")
            with pytest.raises(NfsError, match="NOENT"):
                await nfs.lookup(root, "dir-ops")
            fsstat = await nfs.fsstat()
            assert fsstat.tbytes > 0
            allowed = await nfs.access(root, const.ACCESS3_READ |
                                       const.ACCESS3_MODIFY)
            assert allowed & const.ACCESS3_READ
            await nfs.unmount()

    asyncio.run(scenario())
    listing = subprocess.run(["nfs-ls", lab.client_url("")],
                             capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0, listing.stderr


def test_mount_outside_the_allowlist_is_refused(lab_factory):
    lab = lab_factory("tcp")

    async def scenario():
        async with client_for(lab) as nfs:
            with pytest.raises(NfsError, match="ACCES"):
                await nfs.mount("/etc")
            with pytest.raises(NfsError, match="ACCES"):
                await nfs.mount(lab.export + "/../")
            assert await nfs.exports() == [lab.export]

    asyncio.run(scenario())
    port = lab.client_proxy.port
    out = subprocess.run(
        ["nfs-ls", "nfs://127.0.0.1/etc?version=3&nfsport=%d&mountport=%d"
         % (port, port)], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert lab.server_proxy.stats()["mount_refused"] >= 3


def _guarded_proxy(lab, allowed):
    """A second server proxy on the lab's Ganesha that allows ``allowed``."""
    sections = lab._server_sections()
    sections["server"]["exports"] = allowed
    sections["server"]["handle_rescan_interval"] = 0
    return Proxy(lab.workdir, "guarded-proxy", sections)


def test_handles_outside_the_allowed_export_are_refused(lab_factory):
    """Only a subdirectory of Ganesha's export is allowed.

    Its parent is one LOOKUP of ".." away, and a file beside it is one
    handle away: the handle Ganesha gives a direct client, used through
    the proxy as a forged one would be.  Both must be refused, and a
    handle the proxy handed out before it restarted must still work.
    """
    lab = lab_factory("tcp")
    allowed = os.path.join(lab.export, "allowed")
    os.makedirs(os.path.join(lab.export, "secret"))
    os.makedirs(allowed)
    os.chown(allowed, FILE_UID, FILE_GID)
    with open(os.path.join(lab.export, "secret", "key"), "wb") as f:
        f.write(b"the secret")
    image = os.urandom(100 * 1024)
    with open(os.path.join(allowed, "image.img"), "wb") as f:
        f.write(image)
    guarded = _guarded_proxy(lab, allowed)

    async def forge():
        async with NfsClient("127.0.0.1", lab.ganesha.nfs_port,
                             lab.ganesha.mount_port) as direct:
            await direct.mount(lab.export)
            return await direct.lookup_path("secret/key")

    async def escape(secret):
        async with client_for(lab, guarded.port) as nfs:
            root = await nfs.mount(allowed)
            fh = (await nfs.lookup(root, "image.img")).object
            assert (await nfs.read(fh, 0, len(image))).data == image
            with pytest.raises(NfsError, match="STALE"):
                await nfs.read(secret, 0, 100)
            with pytest.raises(NfsError, match="STALE"):
                await nfs.write(secret, 0, b"overwritten")
            with pytest.raises(NfsError, match="STALE"):
                await nfs.bulk_write(secret, 0, b"overwritten" * 1000)
            parent = (await nfs.lookup(root, "..")).object
            with pytest.raises(NfsError, match="STALE"):
                await nfs.readdirplus(parent)
            with pytest.raises(NfsError, match="STALE"):
                await nfs.rename(root, "image.img", parent, "moved.img")
            return fh

    async def after_restart(fh):
        # No MNT: a client that kept its handle across the restart.
        async with client_for(lab, guarded.port) as nfs:
            await nfs.nfs.connect()
            return (await nfs.read(fh, 0, len(image))).data

    try:
        secret = asyncio.run(forge())
        fh = asyncio.run(escape(secret))
        refused = guarded.stats()["handles_refused"]
        guarded.stop()
        guarded = _guarded_proxy(lab, allowed)
        assert asyncio.run(after_restart(fh)) == image
        stats = guarded.stats()
    finally:
        guarded.stop()
    assert refused == 5
    assert stats["handle_walks"] == 1 and stats["handles_refused"] == 0
    with open(os.path.join(lab.export, "secret", "key"), "rb") as f:
        assert f.read() == b"the secret"
    assert sorted(os.listdir(lab.export)) == ["allowed", "secret"]


def _closed_by_peer(sock):
    sock.settimeout(10)
    try:
        sock.sendall(connection.frame(rpc.encode_message(
            rpc.Call(1, 100003, 3, 0))))
        return sock.recv(100) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def test_a_client_off_the_tunnel_cannot_reach_the_server_proxy(lab_factory):
    lab = lab_factory("tcp")
    with socket.socket() as sock:
        sock.bind(("127.0.0.2", 0))
        sock.connect(("127.0.0.1", lab.server_proxy.port))
        assert _closed_by_peer(sock)
    assert lab.server_proxy.stats()["peers_refused"] >= 1


def test_plain_tcp_to_a_tls_server_proxy_gets_nothing(lab_factory):
    lab = lab_factory("tls")
    with socket.create_connection(("127.0.0.1",
                                   lab.server_proxy.port)) as sock:
        assert _closed_by_peer(sock)


@pytest.mark.parametrize("proxy", ["client_proxy", "server_proxy"])
@pytest.mark.parametrize("garbage", [
    connection.frame(b"not an rpc call, just text"),   # bad call header
    b"\x80\x00\x00\x40short",                          # truncated record
    b"\xff\xff\xff\xff" + b"A" * 64,                   # oversized record
    connection.frame(rpc.encode_message(rpc.Reply(3))),  # reply, not call
])
def test_garbage_closes_only_the_sender(lab_factory, proxy, garbage):
    lab = lab_factory("tcp")
    target = getattr(lab, proxy)
    before = target.stats()["protocol_errors"]

    async def scenario():
        async with client_for(lab, port=target.port) as good:
            await good.mount(lab.export)
            with socket.create_connection(("127.0.0.1", target.port)) as bad:
                bad.sendall(garbage)
                if garbage.startswith(b"\x80\x00\x00\x40"):
                    bad.shutdown(socket.SHUT_WR)
                bad.settimeout(10)
                try:
                    assert bad.recv(100) == b""
                except ConnectionResetError:
                    pass  # Aborted: as good as closed.
            await good.null()
            assert (await good.getattr(good.root)).type == 2

    asyncio.run(scenario())
    assert target.stats()["protocol_errors"] >= before


def _cut_while_copying(lab, cmd, cut):
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    stats = lab.client_proxy.stats
    deadline = time.monotonic() + slowness.scaled(60)
    # Cut once a quarter of the data has crossed the tunnel.
    while stats()["upstream_bytes_in"] + stats()["upstream_bytes_out"] < \
            64 * MIB and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "copy finished before the tunnel was cut"
    cut()
    try:
        out, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        # Say where it hung: the proxy's view and its last words.
        proc.kill()
        out, err = proc.communicate()
        with open(lab.client_proxy.process.log_path, errors="replace") as f:
            log_tail = f.readlines()[-40:]
        pytest.fail("%s hung after the cut; client proxy stats %s; "
                    "its log ends:\n%s\nstderr: %s" % (
                        cmd[0], stats(), "".join(log_tail), err))
    assert proc.returncode == 0, err
    return stats()


@pytest.mark.parametrize("tunnel,link", [("tcp", True), ("ssh", False)])
def test_tunnel_cut_mid_copy_still_gives_identical_bytes(
        lab_factory, tmp_path, tunnel, link):
    lab = lab_factory(tunnel, link=link)
    src = tmp_path / "src"
    expected = random_file(src, 256 * MIB)
    before = lab.client_proxy.stats()["upstream_connects"]
    stats = _cut_while_copying(
        lab, ["nfs-cp", str(src), lab.client_url("cut.bin")], lab.cut_tunnel)
    assert stats["upstream_connects"] > before
    assert sha256(os.path.join(lab.export, "cut.bin")) == expected
    back = tmp_path / "back"
    before = stats["upstream_connects"]
    stats = _cut_while_copying(
        lab, ["nfs-cp", lab.client_url("cut.bin"), str(back)],
        lab.cut_tunnel)
    assert stats["upstream_connects"] > before
    assert sha256(back) == expected


def test_write_behind_copy_cut_mid_way_still_gives_identical_bytes(
        lab_factory, tmp_path):
    """nfs-cp's UNSTABLE WRITEs answered by the client proxy, then cut.

    The WRITEs in flight when the tunnel dies are sent again by the
    proxy; nfs-cp's COMMIT waits for them, and none is lost.
    """
    lab = lab_factory("tcp", link=True, write_behind_mb=16)
    src = tmp_path / "src"
    expected = random_file(src, 256 * MIB)
    before = lab.client_proxy.stats()["upstream_connects"]
    stats = _cut_while_copying(
        lab, ["nfs-cp", str(src), lab.client_url("behind.bin")],
        lab.cut_tunnel)
    assert stats["upstream_connects"] > before
    # Nearly every WRITE was answered before the server had it.
    assert stats["write_behind_answered"] > 200
    assert stats["write_behind_failed"] == 0
    assert sha256(os.path.join(lab.export, "behind.bin")) == expected


def test_a_write_refused_after_its_early_reply_fails_the_commit(lab_factory):
    """Ganesha refuses a WRITE the client proxy has already answered.

    A WRITE that would end past the largest file offset (2**63) gets
    NFS3ERR_FBIG from Ganesha; through a write-behind proxy the client
    hears it at its COMMIT (NFS3ERR_IO, under a new write verifier), and
    the same WRITE sent again then gets Ganesha's own answer.
    """
    lab = lab_factory("tcp", write_behind_mb=16)

    async def scenario():
        async with client_for(lab) as nfs:
            root = await nfs.mount(lab.export)
            fh = await nfs.create(root, "refused.bin")
            first = await nfs.write(fh, 0, b"a" * 4096)
            beyond = (1 << 63) - 10
            early = await nfs.write(fh, beyond, b"b" * 4096)
            assert early.verf == first.verf
            with pytest.raises(NfsError) as refused:
                await nfs.commit(fh)
            assert refused.value.status == const.NfsStat.NFS3ERR_IO
            with pytest.raises(NfsError) as again:
                await nfs.write(fh, beyond, b"b" * 4096)
            assert again.value.status == const.NfsStat.NFS3ERR_FBIG
            await nfs.write(fh, 4096, b"c" * 4096)
            # Committed under a verifier the first WRITE never had: a
            # client that checks sends it again.
            assert await nfs.commit(fh) != first.verf

    asyncio.run(scenario())
    with open(os.path.join(lab.export, "refused.bin"), "rb") as f:
        assert f.read() == b"a" * 4096 + b"c" * 4096
    stats = lab.client_proxy.stats()
    assert stats["write_behind_failed"] == 1
    assert stats["write_behind_commits_failed"] == 1


def test_a_cut_inside_a_relayed_reply_is_invisible_to_the_reader(
        lab_factory, tmp_path):
    """The tunnel dies while a READ reply is being relayed cut-through.

    Half the record is already with the client; libnfs never recovers
    from a record cut there (it fails every later reply), so the proxy
    sends the READ again and finishes the record with the new reply.
    A slow link keeps a relay in progress nearly all the time; the cut
    is repeated until one landed inside a relay.
    """
    lab = lab_factory("tcp", link=True)
    src = tmp_path / "src"
    expected = random_file(src, 48 * MIB)
    put_out = subprocess.run(["nfs-cp", str(src), lab.client_url("slow.bin")],
                             capture_output=True, text=True, timeout=300)
    assert put_out.returncode == 0, put_out.stderr
    lab.toxiproxy.wan("wan", 0, 64)  # 8 MB/s: a 1 MiB reply takes 0.13 s.
    back = tmp_path / "back"
    before = lab.client_proxy.stats()["connections"]
    proc = subprocess.Popen(["nfs-cp", lab.client_url("slow.bin"), str(back)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    stats = lab.client_proxy.stats
    try:
        deadline = time.monotonic() + slowness.scaled(60)
        while stats()["upstream_relays_cut"] == 0 and proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.7)
            lab.cut_tunnel()
        assert stats()["upstream_relays_cut"] >= 1, \
            "no cut landed inside a relayed reply"
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert sha256(back) == expected
    # Finished, not dropped: nfs-cp's mount and NFS connections were all
    # it ever opened.
    assert stats()["connections"] - before == 2


def test_sigterm_stops_proxies_cleanly(lab_factory):
    lab = lab_factory("tcp")
    assert lab.client_proxy.stop() == 0
    assert not os.path.exists(lab.client_proxy.control_socket)


def test_ssh_tunnel_refuses_a_host_key_it_does_not_know(lab_factory,
                                                        tmp_path):
    lab = lab_factory("ssh")
    other = tmp_path / "other_host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                    str(other)], check=True)
    kind, key = (other.with_suffix(".pub")).read_text().split()[:2]
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("[127.0.0.1]:%d %s %s\n" % (lab.sshd.port, kind,
                                                       key))
    connector = tunnel.SshConnector(
        "127.0.0.1", lab.server_proxy.port, "127.0.0.1", lab.sshd.port,
        lab.sshd.user, lab.sshd.key, str(known_hosts))
    try:
        with pytest.raises(ssh_forward.ForwardFailed,
                           match="Host key verification failed"):
            asyncio.run(connector.connect(asyncio.Protocol))
    finally:
        connector.close()


def test_ssh_tunnel_ends_with_the_proxy(lab_factory):
    # The forward's session reads the proxy's pipe: a proxy killed
    # without a word leaves no ssh behind.
    lab = lab_factory("ssh")
    proxy = lab.add_client("ssh-orphan-check")
    process.wait_until(lambda: _ssh_children(proxy.process.pid),
                       "the proxy's ssh")
    ssh_pids = _ssh_children(proxy.process.pid)
    proxy.process.signal(signal.SIGKILL)
    proxy.process.popen.wait(timeout=30)
    process.wait_until(lambda: not any(
        os.path.exists("/proc/%d" % pid) and
        open("/proc/%d/stat" % pid).read().split()[2] != "Z"
        for pid in ssh_pids), "its ssh to end")


def _ssh_children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid), "-x", "ssh"],
                         capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _tls_chain(lab, workdir, server_cert, client_cert, ca):
    """A server proxy and a client proxy over TLS; both proxies.

    ``server_cert`` and ``client_cert`` are (pem, key) pairs.
    """
    server = Proxy(workdir, "purpose-server", {
        "proxy": {"role": "server"},
        "listen": {"host": "127.0.0.1", "port": process.free_port(),
                   "allowed_peers": "127.0.0.1/32",
                   "tls_cert": server_cert[0], "tls_key": server_cert[1],
                   "tls_ca": ca},
        "server": {"nfs_port": lab.ganesha.nfs_port,
                   "mount_port": lab.ganesha.mount_port,
                   "exports": lab.export, "squash_uid": FILE_UID,
                   "squash_gid": FILE_GID},
    })
    client = Proxy(workdir, "purpose-client", {
        "proxy": {"role": "client"},
        "listen": {"host": "127.0.0.1", "port": process.free_port()},
        "upstream": {"tunnel": "tls", "host": "127.0.0.1",
                     "port": server.port, "tls_cert": client_cert[0],
                     "tls_key": client_cert[1], "tls_ca": ca,
                     "reconnect_max_delay": 0.5},
    })
    return server, client


@pytest.mark.parametrize("case", [
    "a server certificate as the client's",
    "a client certificate without a purpose",
    "a client certificate as the server's",
    "a server certificate without a purpose",
])
def test_each_proxy_checks_the_purpose_of_the_peer_certificate(
        lab_factory, tmp_path, case):
    """A DTN's certificate does not pass as a client's, and the reverse.

    Certificates without an extended key usage, which OpenSSL accepts for
    any purpose, are refused too.
    """
    lab = lab_factory("tls")
    pki = certs.make_pki(str(tmp_path / "pki"),
                         names=("server", "client", "any"),
                         purposes={"any": None})
    server_cert, client_cert = {
        "a server certificate as the client's": ("server", "server"),
        "a client certificate without a purpose": ("server", "any"),
        "a client certificate as the server's": ("client", "client"),
        "a server certificate without a purpose": ("any", "client"),
    }[case]
    server, client = _tls_chain(lab, str(tmp_path), pki[server_cert],
                                pki[client_cert], pki["ca"])
    try:
        async def scenario():
            nfs = NfsClient("127.0.0.1", client.port, client.port,
                            timeout=3)
            try:
                with pytest.raises((TimeoutError, ConnectionError,
                                    NfsError)):
                    await nfs.mount(lab.export)
            finally:
                nfs.close()

        asyncio.run(scenario())
        with open(client.process.log_path, errors="replace") as f:
            client_log = f.read()
        # A certificate for the other purpose fails OpenSSL's own check in
        # the handshake; one with no purpose passes it and is refused by
        # the proxy's.
        if case == "a client certificate without a purpose":
            assert server.stats()["peers_refused"] >= 1
        elif case == "a server certificate without a purpose":
            assert "not issued for TLS servers" in client_log
        elif case == "a client certificate as the server's":
            assert "unsuitable certificate purpose" in client_log
        # The right pair works, from the same CA.
        os.mkdir(tmp_path / "good")
        good_server, good_client = _tls_chain(
            lab, str(tmp_path / "good"), pki["server"], pki["client"],
            pki["ca"])
    finally:
        client.stop()
        server.stop()

    async def works():
        async with NfsClient("127.0.0.1", good_client.port,
                             good_client.port, timeout=10) as nfs:
            await nfs.mount(lab.export)
            await nfs.null()

    try:
        asyncio.run(works())
    finally:
        good_client.stop()
        good_server.stop()
