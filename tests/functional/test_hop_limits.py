# SPDX-License-Identifier: Apache-2.0
"""What each proxy advertises is what it carries.

And one client's oversized request costs that request alone.

A raw RPC client (our sans-IO codec, sizes chosen by the test) against
every path to NFS-Ganesha: the server proxy alone, a pass-through client
proxy over tcp, tls and ssh, a caching client proxy, and a leaf behind a
caching LAN proxy.  NFS-Ganesha advertises 64 MiB in FSINFO; the proxies
read records of at most ``[proxy] max_record_size`` (4 MiB).
"""

import asyncio
import os
import time

import pytest

from gvfs_openstack.client.nfs import NfsClient
from gvfs_openstack.nfs import connection
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.errors import RpcError
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy import limits

MIB = 1024 * 1024
#: What a proxy with the default 4 MiB records carries in a READ or WRITE.
IO_SIZE = limits.io_size(4 * MIB)
FILE_SIZE = 8 * MIB


@pytest.fixture(scope="module")
def tcp_lab(lab_factory):
    lab = lab_factory("tcp")
    with open(os.path.join(lab.export, "eight-mib"), "wb") as f:
        f.write(os.urandom(FILE_SIZE))
    return lab


def _start_path(lab_factory, tcp_lab, path):
    """(port of the first hop of ``path``, the lab whose export it serves)."""
    if path == "server proxy":
        return tcp_lab.server_proxy.port, tcp_lab
    if path == "pass-through/tcp":
        return tcp_lab.client_proxy.port, tcp_lab
    if path in ("pass-through/tls", "pass-through/ssh"):
        lab = lab_factory(path.split("/")[1])
        with open(os.path.join(tcp_lab.export, "eight-mib"), "rb") as f:
            content = f.read()
        with open(os.path.join(lab.export, "eight-mib"), "wb") as f:
            f.write(content)
        return lab.client_proxy.port, lab
    cache = {"capacity_mb": 64}
    if path == "caching":
        return tcp_lab.add_client("caching", cache=cache).port, tcp_lab
    tcp_lab.add_client("lan", cache=cache)
    return tcp_lab.add_leaf("lan-leaf", cache=cache).port, tcp_lab


PATHS = ["server proxy", "pass-through/tcp", "pass-through/tls",
         "pass-through/ssh", "caching", "leaf behind a LAN proxy"]


@pytest.fixture(scope="module")
def started_paths():
    return {}


@pytest.fixture(params=PATHS)
def path(request, lab_factory, tcp_lab, started_paths):
    """See :func:`_start_path`; each path is started once per module."""
    if request.param not in started_paths:
        started_paths[request.param] = _start_path(lab_factory, tcp_lab,
                                                   request.param)
    return started_paths[request.param]


def _client(port):
    return NfsClient("127.0.0.1", port, port, uid=1000, gid=1000)


def _read_args(fh, offset, count):
    return nfs3.encode_args(const.Nfs3Proc.READ,
                            nfs3.ReadArgs(fh, offset, count))


async def _raw(nfs, proc, args):
    return nfs3.decode_res(proc, await nfs.nfs.call(
        const.NFS_PROGRAM, const.NFS_V3, proc, args))


def test_every_limit_advertised_is_carried(path):
    port, lab = path

    async def scenario():
        async with _client(port) as nfs:
            root = await nfs.mount(lab.export)
            info = await nfs.fsinfo(root)
            for field in ("rtmax", "rtpref", "wtmax", "wtpref", "dtpref"):
                assert 0 < getattr(info, field) <= IO_SIZE, field
            fh = await nfs.lookup_path("eight-mib")
            with open(os.path.join(lab.export, "eight-mib"), "rb") as f:
                content = f.read()
            # Counts far beyond what any hop carries get a short READ,
            # never an error: 2^32 - 1, then twice rtmax.
            for count in (2**32 - 1, 2 * info.rtmax):
                res = await _raw(nfs, const.Nfs3Proc.READ,
                                 _read_args(fh, 0, count))
                assert res.ok, count
                assert 0 < res.body.count <= info.rtmax
                assert not res.body.eof
                assert bytes(res.body.data) == content[:res.body.count]
            # A WRITE of wtmax, FILE_SYNC, as advertised, is taken whole.
            out = await nfs.create(root, "written-at-wtmax")
            data = os.urandom(info.wtmax)
            res = await _raw(nfs, const.Nfs3Proc.WRITE, nfs3.encode_args(
                const.Nfs3Proc.WRITE, nfs3.WriteArgs(
                    out, 0, len(data), const.StableHow.FILE_SYNC, data)))
            assert res.ok and res.body.count == len(data)
            # A READDIRPLUS asking for more than a hop carries is served.
            res = await _raw(nfs, const.Nfs3Proc.READDIRPLUS,
                             nfs3.encode_args(
                                 const.Nfs3Proc.READDIRPLUS,
                                 nfs3.ReaddirplusArgs(root, 0, bytes(8),
                                                      2**32 - 1, 2**32 - 1)))
            assert res.ok
            await nfs.remove(root, "written-at-wtmax")

    asyncio.run(scenario())


def test_a_call_over_the_record_limit_is_refused_alone(path):
    port, lab = path

    async def scenario():
        async with _client(port) as nfs:
            root = await nfs.mount(lab.export)
            out = await nfs.create(root, "too-large-write")
            data = os.urandom(5 * MIB)
            with pytest.raises(RpcError) as e:
                await _raw(nfs, const.Nfs3Proc.WRITE, nfs3.encode_args(
                    const.Nfs3Proc.WRITE, nfs3.WriteArgs(
                        out, 0, len(data), const.StableHow.FILE_SYNC,
                        data)))
            assert e.value.reply.accept_stat == \
                const.AcceptStat.GARBAGE_ARGS
            # The same connection goes on.
            assert nfs.nfs.connected
            assert (await nfs.getattr(out)).size == 0
            await nfs.remove(root, "too-large-write")

    asyncio.run(scenario())


def test_a_client_flooding_huge_reads_breaks_nobody_else(tcp_lab):
    """A client flooding READs of 2^32 - 1 bytes harms nobody else.

    It asks one every 20 ms while three others create and remove files:
    none of theirs fails, and the server proxy keeps its connections to
    the NFS server.
    """
    connects = tcp_lab.server_proxy.stats()["upstream_connects"]
    port = tcp_lab.client_proxy.port

    async def flood(stop):
        async with _client(port) as nfs:
            await nfs.mount(tcp_lab.export)
            fh = await nfs.lookup_path("eight-mib")
            sent = 0
            while not stop.is_set():
                res = await _raw(nfs, const.Nfs3Proc.READ,
                                 _read_args(fh, 0, 2**32 - 1))
                assert res.ok
                sent += 1
                await asyncio.sleep(0.02)
            return sent

    async def busy(index, stop):
        calls, slowest = 0, 0.0
        async with _client(port) as nfs:
            root = await nfs.mount(tcp_lab.export)
            name = "busy-%d" % index
            while not stop.is_set():
                started = time.monotonic()
                fh = await nfs.create(root, name)
                await nfs.getattr(fh)
                await nfs.remove(root, name)
                slowest = max(slowest, time.monotonic() - started)
                calls += 3
        return calls, slowest

    async def scenario():
        stop = asyncio.Event()
        tasks = [asyncio.create_task(flood(stop))] + [
            asyncio.create_task(busy(i, stop)) for i in range(3)]
        await asyncio.sleep(4)
        stop.set()
        return await asyncio.gather(*tasks)

    floods, *others = asyncio.run(scenario())
    assert floods > 10 and all(calls > 0 for calls, _ in others)
    # Three calls of a well-behaved client take well under a second on
    # loopback while the flood goes on (a shared connection re-made, as
    # before, cost them seconds and errors).
    assert max(slowest for _, slowest in others) < 2.0, others
    assert tcp_lab.server_proxy.stats()["upstream_connects"] == connects


def _rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS for %d" % pid)


def test_a_client_that_never_reads_its_replies_holds_a_bounded_amount(
        tcp_lab):
    """400 READs of 2 MiB sent, none of the replies read.

    The server proxy stops reading that connection once its replies pile
    up: its memory grows by the replies of the calls in flight at most,
    not by the 800 MiB asked, and another client is served meanwhile.
    """
    proxy = tcp_lab.server_proxy
    before = _rss_mib(proxy.process.pid)
    sent = [0]

    async def scenario():
        async with _client(proxy.port) as nfs:
            await nfs.mount(tcp_lab.export)
            fh = await nfs.lookup_path("eight-mib")
        cred = rpc.AuthSys(1000, 1000, (), "flood").to_opaque()
        reader, writer = await asyncio.open_connection("127.0.0.1",
                                                       proxy.port)
        try:
            for xid in range(400):
                call = rpc.encode_message(rpc.Call(
                    xid, const.NFS_PROGRAM, const.NFS_V3,
                    const.Nfs3Proc.READ, cred,
                    args=_read_args(fh, 0, IO_SIZE)))
                writer.write(connection.frame(call))
                try:
                    await asyncio.wait_for(writer.drain(), 0.5)
                except TimeoutError:
                    break   # The proxy stopped reading: as it should.
                sent[0] += 1
            await asyncio.sleep(2)
            grown = _rss_mib(proxy.process.pid) - before
            async with _client(proxy.port) as other:
                await other.mount(tcp_lab.export)
                assert (await other.getattr(fh)).size == FILE_SIZE
            return grown
        finally:
            writer.transport.abort()

    grown = asyncio.run(scenario())
    # 128 calls in flight x 2 MiB, 32 MiB unread, and slack.
    assert grown < 128 * 2 + 32 + 100, (grown, sent[0])
    assert proxy.stats()["clients_backlogged"] >= 1
