# SPDX-License-Identifier: Apache-2.0
"""Write-back through the client proxy, on the lab with real Ganesha.

What the client was acknowledged must reach the export: after a flush,
a SIGKILL and a replay, a full journal disk, a corrupted journal.
"""

import asyncio
import configparser
import os
import random
import signal
import time

import pytest

from gvfs_lab import slowness
from gvfs_openstack.client.nfs import NfsClient
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.errors import NfsError
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.proxy import control
from tests.functional.conftest import nfs_cp
from tests.functional.conftest import random_file
from tests.functional.conftest import sha256

MIB = 1024 * 1024
WRITEBACK = {"capacity_mb": 64, "write_policy": "writeback",
             "writeback_idle_seconds": 0}


@pytest.fixture(scope="module")
def wb_lab(lab_factory):
    return lab_factory("tcp", cache=WRITEBACK)


def chunk(seed, size=MIB):
    """Deterministic bytes, so a test need not keep what it wrote."""
    return random.Random(seed).randbytes(size)


def on_export(lab, name):
    return os.path.join(lab.export, name)


def stats(lab):
    return lab.client_proxy.stats()


def flush(lab):
    return control.request(lab.client_proxy.control_socket, "flush",
                           timeout=300)


def client(lab):
    port = lab.client_proxy.port
    return NfsClient("127.0.0.1", port, port, timeout=30)


async def _create(nfs, lab, name):
    await nfs.mount(lab.export)
    return await nfs.create(nfs.root, name)


def test_writes_are_acknowledged_locally_and_reach_the_export_on_flush(
        wb_lab, tmp_path):
    lab = wb_lab
    data = chunk(1, 8 * MIB + 4321)
    before = stats(lab)

    async def scenario():
        async with client(lab) as nfs:
            fh = await _create(nfs, lab, "wb.bin")
            await nfs.write_file(fh, [data])
            # Reads and attributes see the dirty bytes.
            assert (await nfs.getattr(fh)).size == len(data)
            found = await nfs.lookup(nfs.root, "wb.bin")
            assert found.obj_attributes.size == len(data)
            listed = {e.name: e for e in await nfs.readdirplus(nfs.root)}
            assert listed["wb.bin"].name_attributes.size == len(data)
            return b"".join([bytes(d) async for _, d in nfs.read_file(fh)])

    assert asyncio.run(scenario()) == data
    after = stats(lab)
    assert after["writeback_bytes"] - before["writeback_bytes"] >= len(data)
    assert after["writeback_dirty_bytes"] == len(data)
    # Only metadata crossed the tunnel, not the 8 MiB.
    assert after["upstream_bytes_out"] - before["upstream_bytes_out"] < MIB
    assert os.path.getsize(on_export(lab, "wb.bin")) == 0
    done = flush(lab)
    assert done["flushed_bytes"] == len(data) and done["dirty_bytes"] == 0
    with open(on_export(lab, "wb.bin"), "rb") as f:
        assert f.read() == data
    assert stats(lab)["journal_bytes"] == 0, "flushed segments are deleted"


def test_libnfs_clients_write_and_read_back_through_write_back(wb_lab,
                                                               tmp_path):
    lab = wb_lab
    src = tmp_path / "src"
    expected = random_file(src, 20 * MIB + 7)
    out = nfs_cp(str(src), lab.client_url("cp.bin"))
    assert out.returncode == 0, out.stderr
    assert stats(lab)["writeback_dirty_bytes"] > 0
    back = tmp_path / "back"
    out = nfs_cp(lab.client_url("cp.bin"), str(back))
    assert out.returncode == 0, out.stderr
    assert sha256(back) == expected
    flush(lab)
    assert sha256(on_export(lab, "cp.bin")) == expected


def test_dirty_bytes_are_laid_over_the_servers(wb_lab, tmp_path):
    lab = wb_lab
    src = tmp_path / "base"
    random_file(src, 3 * MIB)
    out = nfs_cp(str(src), lab.server_proxy_url("mixed.bin"))
    assert out.returncode == 0, out.stderr
    patch = chunk(2, 100000)

    async def scenario():
        async with client(lab) as nfs:
            await nfs.mount(lab.export)
            fh = await nfs.lookup_path("mixed.bin")
            await nfs.write_file(fh, [patch], offset=MIB + 3)
            # Past the end: the file grows, the gap reads as zeros.
            await nfs.write_file(fh, [b"tail"], offset=4 * MIB)
            assert (await nfs.getattr(fh)).size == 4 * MIB + 4
            # The bulk channel has no overlay of dirty bytes: a READV
            # (a mount's prefill) is told to try later, never given the
            # server's older bytes.
            with pytest.raises(NfsError, match="JUKEBOX"):
                await nfs.bulk_readv(fh, [(MIB, 4096)])
            return b"".join([bytes(d) async for _, d in nfs.read_file(fh)])

    expected = bytearray(src.read_bytes())
    expected[MIB + 3:MIB + 3 + len(patch)] = patch
    expected += bytes(4 * MIB - len(expected)) + b"tail"
    got = asyncio.run(scenario())
    assert len(got) == 4 * MIB + 4
    assert got == bytes(expected)
    flush(lab)
    with open(on_export(lab, "mixed.bin"), "rb") as f:
        assert f.read() == bytes(expected)


def test_truncate_and_remove_of_dirty_files(wb_lab):
    lab = wb_lab
    data = chunk(3, 2 * MIB)

    async def scenario():
        async with client(lab) as nfs:
            fh = await _create(nfs, lab, "trunc.bin")
            await nfs.write_file(fh, [data])
            # SETATTR writes the file back first: the truncate is final.
            await nfs.setattr(fh, nfs3.Sattr(size=MIB))
            assert (await nfs.getattr(fh)).size == MIB
            gone = await _create(nfs, lab, "gone.bin")
            await nfs.write_file(gone, [data])
            await nfs.remove(nfs.root, "gone.bin")

    before = stats(lab)["writeback_discarded_bytes"]
    asyncio.run(scenario())
    with open(on_export(lab, "trunc.bin"), "rb") as f:
        assert f.read() == data[:MIB]
    # The removed file's bytes have nowhere to go: dropped, not an error.
    flush(lab)
    assert stats(lab)["writeback_discarded_bytes"] - before == len(data)
    assert not os.path.exists(on_export(lab, "gone.bin"))


async def _write_until_killed(lab, name, kill_after):
    """Write 1 MiB chunks, 8 in flight; SIGKILL the proxy after
    ``kill_after`` acknowledged bytes.  Returns acknowledged offsets and
    the verifier of the last COMMIT."""
    acked = set()
    killed = asyncio.Event()
    verifiers = set()
    async with client(lab) as nfs:
        fh = await _create(nfs, lab, name)

        async def one(index):
            ok = await nfs.write(fh, index * MIB, chunk(index),
                                 const.StableHow.UNSTABLE)
            assert ok.count == MIB
            verifiers.add(ok.verf)
            acked.add(index)
            if len(acked) * MIB >= kill_after and not killed.is_set():
                killed.set()
                lab.client_proxy.process.signal(signal.SIGKILL)

        tasks = set()
        for index in range(256):
            if killed.is_set():
                break
            tasks.add(asyncio.ensure_future(one(index)))
            if len(tasks) >= 8:
                done, tasks = await asyncio.wait(
                    tasks, return_when=asyncio.FIRST_COMPLETED)
        await asyncio.gather(*tasks, return_exceptions=True)
    return fh, acked, verifiers


def test_acknowledged_writes_survive_a_sigkill(lab_factory):
    """256 MiB stream, proxy SIGKILLed mid-way, restarted, flushed."""
    lab = lab_factory("tcp", cache=WRITEBACK)
    fh, acked, verifiers = asyncio.run(
        _write_until_killed(lab, "kill.bin", 96 * MIB))
    assert len(acked) >= 96, "the stream stopped before the kill"
    assert len(acked) < 256, "the kill came too late to test anything"
    assert len(verifiers) == 1
    lab.restart_client_proxy()
    replayed = stats(lab)
    assert replayed["journal_replayed_bytes"] >= len(acked) * MIB
    assert replayed["journal_corrupt_records"] == 0

    async def commit():
        async with client(lab) as nfs:
            await nfs.mount(lab.export)
            return await nfs.commit(fh)

    # A new process: a new verifier, so a client resends what it had not
    # seen committed, as after a server reboot.
    assert asyncio.run(commit()) not in verifiers
    flush(lab)
    with open(on_export(lab, "kill.bin"), "rb") as f:
        for index in sorted(acked):
            f.seek(index * MIB)
            assert f.read(MIB) == chunk(index), \
                "acknowledged write at %d MiB lost" % index


def test_a_corrupt_journal_record_is_discarded_never_flushed(lab_factory):
    lab = lab_factory("tcp", cache=WRITEBACK)

    async def scenario():
        async with client(lab) as nfs:
            fh = await _create(nfs, lab, "corrupt.bin")
            for index in range(4):
                await nfs.write(fh, index * MIB, chunk(index),
                                const.StableHow.FILE_SYNC)

    asyncio.run(scenario())
    lab.client_proxy.process.signal(signal.SIGKILL)
    lab.client_proxy.process.popen.wait()
    journal_dir = os.path.join(lab.cache["directory"], "journal")
    (segment,) = os.listdir(journal_dir)
    path = os.path.join(journal_dir, segment)
    record = os.path.getsize(path) // 4
    with open(path, "r+b") as f:
        f.seek(record + record // 2)  # Inside the second record's data.
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    lab.restart_client_proxy()
    assert stats(lab)["journal_corrupt_records"] == 1
    flush(lab)
    with open(on_export(lab, "corrupt.bin"), "rb") as f:
        for index in range(4):
            data = f.read(MIB)
            if index == 1:
                # Discarded: never garbage; the client that wrote it sees
                # a new verifier and has it sent again.
                assert data.strip(b"\0") == b""
            else:
                assert data == chunk(index)


@pytest.mark.parametrize("limit", ["a full disk", "writeback_max_mb"])
def test_a_full_journal_falls_back_to_write_through(lab_factory, tiny_disk,
                                                    limit):
    if limit == "a full disk":
        options = {"journal_directory": tiny_disk(4)}
    else:
        options = {"writeback_max_mb": 3, "writeback_flush_mb": 2}
    lab = lab_factory("tcp", cache=dict(WRITEBACK, **options))
    data = chunk(7, 16 * MIB)

    async def scenario():
        async with client(lab) as nfs:
            fh = await _create(nfs, lab, "full.bin")
            await nfs.write_file(fh, [data])
            return b"".join([bytes(d) async for _, d in nfs.read_file(fh)])

    assert asyncio.run(scenario()) == data
    assert stats(lab)["writeback_fallbacks"] > 0
    flush(lab)
    with open(on_export(lab, "full.bin"), "rb") as f:
        assert f.read() == data


def _write(lab, name, seed):
    async def scenario():
        async with client(lab) as nfs:
            fh = await _create(nfs, lab, name)
            await nfs.write_file(fh, [chunk(seed)])

    asyncio.run(scenario())


def _reaches_export(lab, name, seed, timeout=30):
    deadline = time.monotonic() + slowness.scaled(timeout)
    while time.monotonic() < deadline:
        with open(on_export(lab, name), "rb") as f:
            if f.read() == chunk(seed):
                return True
        time.sleep(0.2)
    return False


def test_signals_and_clean_shutdown_write_back(lab_factory):
    lab = lab_factory("tcp", cache=WRITEBACK)
    _write(lab, "usr1.bin", 11)
    time.sleep(1)
    assert os.path.getsize(on_export(lab, "usr1.bin")) == 0
    lab.client_proxy.process.signal(signal.SIGUSR1)
    assert _reaches_export(lab, "usr1.bin", 11)

    _write(lab, "usr2.bin", 12)
    lab.client_proxy.process.signal(signal.SIGUSR2)
    assert _reaches_export(lab, "usr2.bin", 12)

    _write(lab, "term.bin", 13)
    lab.restart_client_proxy()  # SIGTERM: writes back before it exits.
    with open(on_export(lab, "term.bin"), "rb") as f:
        assert f.read() == chunk(13)
    assert stats(lab)["journal_replayed_records"] == 0


def _set_options(proxy, section, **values):
    """Edit the proxy's configuration file as an operator would."""
    parser = configparser.ConfigParser()
    parser.read(proxy.config)
    if not parser.has_section(section):
        parser.add_section(section)
    for name, value in values.items():
        parser[section][name] = str(value)
    with open(proxy.config, "w") as f:
        parser.write(f)


def _logged(proxy, text, times=1, timeout=30):
    """Whether the proxy's log says ``text`` ``times`` times, soon."""
    deadline = time.monotonic() + slowness.scaled(timeout)
    while time.monotonic() < deadline:
        with open(proxy.process.log_path, errors="replace") as f:
            if f.read().count(text) >= times:
                return True
        time.sleep(0.1)
    return False


def _read_back(lab, name):
    async def scenario():
        async with client(lab) as nfs:
            await nfs.mount(lab.export)
            fh = await nfs.lookup_path(name)
            return b"".join([bytes(d) async for _, d in nfs.read_file(fh)])

    return asyncio.run(scenario())


def test_sighup_reloads_what_may_change_and_keeps_dirty_data(lab_factory):
    lab = lab_factory("tcp", cache=WRITEBACK)
    proxy = lab.client_proxy
    _write(lab, "hup.bin", 21)
    dirty = stats(lab)["writeback_dirty_bytes"]
    assert dirty >= MIB
    # Who may connect changes live; the cache's size waits for a restart.
    _set_options(proxy, "listen", allowed_peers="192.0.2.0/24")
    _set_options(proxy, "cache", capacity_mb=128)
    proxy.process.signal(signal.SIGHUP)
    assert _logged(proxy, "reload: configuration re-read; changed: "
                          "[listen] allowed_peers")
    assert _logged(proxy, "Ignoring change to immutable option "
                          "cache.capacity_mb")
    refused = stats(lab)["peers_refused"]
    with pytest.raises((ConnectionError, OSError, asyncio.TimeoutError)):
        _read_back(lab, "hup.bin")
    now = stats(lab)
    assert now["peers_refused"] > refused
    # Nothing was written back or dropped, and the proxy runs on.
    assert now["writeback_dirty_bytes"] == dirty
    assert os.path.getsize(on_export(lab, "hup.bin")) == 0
    assert now["cache_capacity"] == 64 * MIB

    _set_options(proxy, "listen", allowed_peers="")
    proxy.process.signal(signal.SIGHUP)
    assert _logged(proxy, "changed: [listen] allowed_peers", times=2)
    assert _read_back(lab, "hup.bin") == chunk(21)
    flush(lab)
    with open(on_export(lab, "hup.bin"), "rb") as f:
        assert f.read() == chunk(21)


def test_an_idle_proxy_writes_back(lab_factory):
    lab = lab_factory("tcp", cache=dict(WRITEBACK,
                                        writeback_idle_seconds=1))
    _write(lab, "idle.bin", 10)
    assert _reaches_export(lab, "idle.bin", 10)
