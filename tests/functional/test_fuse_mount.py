# SPDX-License-Identifier: Apache-2.0
"""``gvfs-proxy mount`` on the lab: a real FUSE mount of the real chain.

mount -> client proxy (cache) -> tunnel -> server proxy -> NFS-Ganesha.
What Glance, Nova and qemu do to a file system, a fio verify run, and a
proxy that hangs, dies and comes back.
"""

import errno
import json
import mmap
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import time

import pytest

from gvfs_lab import process
from gvfs_lab import slowness
from gvfs_openstack.mount import fusectl
from gvfs_openstack.mount import mountinfo
from gvfs_openstack.sidecar import profile as profile_format
from tests.functional.conftest import random_file
from tests.functional.conftest import sha256
from tests import metrics_samples

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def lab(lab_factory):
    return lab_factory("tcp", cache={"capacity_mb": 256})


@pytest.fixture(scope="module")
def mnt(lab, tmp_path_factory):
    return lab.mount(str(tmp_path_factory.mktemp("mnt"))).mountpoint


@pytest.fixture(scope="module")
def cached_mnt(lab, tmp_path_factory):
    """The export through the same proxy, keeping reads in RAM.

    As on a compute node.
    """
    return lab.mount(str(tmp_path_factory.mktemp("cached-mnt")),
                     name="cached-mount", read_cache_mb=64).mountpoint


def _workdir(mountpoint, request):
    path = os.path.join(mountpoint, request.node.name[:60])
    os.mkdir(path)
    return path


@pytest.fixture
def workdir(mnt, request):
    path = _workdir(mnt, request)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["no RAM cache", "RAM cache"])
def each_workdir(request):
    """A directory on the plain mount, then on the RAM-cached one."""
    path = _workdir(request.getfixturevalue(
        "mnt" if request.param == "no RAM cache" else "cached_mnt"), request)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_posix_operations(workdir, lab, mnt):
    a = os.path.join(workdir, "a")
    with open(a, "wb") as f:
        f.write(b"x" * 100)
        f.flush()
        os.fsync(f.fileno())
    st = os.stat(a)
    assert stat.S_ISREG(st.st_mode) and st.st_size == 100
    # The bytes are on the export itself, as the file account's.
    on_export = os.path.join(lab.export, os.path.relpath(a, mnt))
    assert open(on_export, "rb").read() == b"x" * 100

    os.chmod(a, 0o640)
    os.utime(a, ns=(1_000_000_000_123, 2_000_000_000_456))
    st = os.stat(a)
    assert stat.S_IMODE(st.st_mode) == 0o640
    assert st.st_mtime_ns == 2_000_000_000_456

    os.truncate(a, 10)
    assert open(a, "rb").read() == b"x" * 10
    os.mkdir(os.path.join(workdir, "d"))
    os.rename(a, os.path.join(workdir, "d", "b"))
    os.link(os.path.join(workdir, "d", "b"), os.path.join(workdir, "hard"))
    assert os.stat(os.path.join(workdir, "hard")).st_nlink == 2
    os.symlink("d/b", os.path.join(workdir, "sym"))
    assert os.readlink(os.path.join(workdir, "sym")) == "d/b"
    assert open(os.path.join(workdir, "sym"), "rb").read() == b"x" * 10
    assert sorted(os.listdir(workdir)) == ["d", "hard", "sym"]

    with pytest.raises(FileExistsError):
        os.mkdir(os.path.join(workdir, "d"))
    with pytest.raises(OSError) as e:
        os.rmdir(os.path.join(workdir, "d"))
    assert e.value.errno == errno.ENOTEMPTY
    with pytest.raises(FileNotFoundError):
        os.stat(os.path.join(workdir, "missing"))
    with pytest.raises(FileExistsError):
        os.open(os.path.join(workdir, "hard"), os.O_CREAT | os.O_EXCL)

    for name in ("sym", "hard", "d/b"):
        os.unlink(os.path.join(workdir, name))
    os.rmdir(os.path.join(workdir, "d"))
    assert os.listdir(workdir) == []
    vfs = os.statvfs(workdir)
    assert vfs.f_blocks > 0 and vfs.f_bavail <= vfs.f_blocks


def test_large_directory_listing(workdir):
    names = {"f%04d" % i for i in range(1500)}
    for name in names:
        open(os.path.join(workdir, name), "w").close()
    assert set(os.listdir(workdir)) == names


def test_rename_over_an_existing_file_replaces_it(workdir):
    for name, data in (("old", b"old"), ("new", b"new")):
        with open(os.path.join(workdir, name), "wb") as f:
            f.write(data)
    os.rename(os.path.join(workdir, "new"), os.path.join(workdir, "old"))
    assert open(os.path.join(workdir, "old"), "rb").read() == b"new"
    assert os.listdir(workdir) == ["old"]


def test_open_with_o_trunc_empties_the_file(each_workdir):
    # libfuse has the kernel leave O_TRUNC to the open: a mount that
    # ignored it kept the old tail after a shorter rewrite.
    path = os.path.join(each_workdir, "rewritten")
    with open(path, "wb") as f:
        f.write(b"the first, longer content")
    before = os.stat(path)
    time.sleep(0.01)
    with open(path, "r+b") as f:
        assert f.read(9) == b"the first"
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, b"short")
    finally:
        os.close(fd)
    with open(path, "rb") as f:
        assert f.read() == b"short"
    after = os.stat(path)
    assert after.st_size == 5
    assert after.st_mtime_ns > before.st_mtime_ns


def test_read_only_o_trunc_of_a_running_program_keeps_it(workdir):
    # The kernel refuses O_RDONLY|O_TRUNC of a running program (ETXTBSY)
    # only after the file system's open: that open must not truncate.
    program = os.path.join(workdir, "sleeper")
    shutil.copyfile(shutil.which("sleep"), program)
    os.chmod(program, 0o755)
    size = os.stat(program).st_size
    running = subprocess.Popen([program, "30"])
    try:
        # The kernel denies writes to it once the exec is complete, a
        # little after Popen returns.
        process.wait_until(lambda: os.readlink(
            "/proc/%d/exe" % running.pid) == program, "the exec")
        time.sleep(0.2)
        with pytest.raises(OSError) as e:
            os.close(os.open(program, os.O_RDONLY | os.O_TRUNC))
        assert e.value.errno == errno.ETXTBSY
    finally:
        running.kill()
        running.wait()
    assert os.stat(program).st_size == size


def test_large_io_round_trip(each_workdir, tmp_path):
    source = str(tmp_path / "source")
    digest = random_file(source, 96 * MIB + 12345)
    target = os.path.join(each_workdir, "image.raw")
    shutil.copyfile(source, target)
    assert os.path.getsize(target) == 96 * MIB + 12345
    assert sha256(target) == digest
    # One 8 MiB write and read in a single system call.
    fd = os.open(target, os.O_RDWR)
    try:
        block = os.urandom(8 * MIB)
        assert os.pwrite(fd, block, 5 * MIB + 7) == len(block)
        os.fsync(fd)
        assert os.pread(fd, len(block), 5 * MIB + 7) == block
    finally:
        os.close(fd)


def test_bytes_just_written_are_read_and_stated_back(each_workdir):
    """A READ or GETATTR must not overtake the WRITEs before it.

    The mount answers a write(2) before the proxy answered its WRITE,
    and the server gives no order between calls in flight: a stat or
    read right after could see the file as it was (qemu-img creating a
    qcow2 reads back its refcount table so, and lays the image out
    differently when that comes back short).
    """
    for i in range(40):
        fd = os.open(os.path.join(each_workdir, "f%d" % i),
                     os.O_RDWR | os.O_CREAT, 0o644)
        try:
            head, rest = os.urandom(64 * 1024), os.urandom(128 * 1024)
            os.pwrite(fd, head, 0)
            os.pwrite(fd, rest, len(head))
            assert os.fstat(fd).st_size == len(head) + len(rest), i
            assert os.pread(fd, 64 * 1024, len(head)) == rest[:64 * 1024], i
            os.pwrite(fd, head, len(head))  # Over bytes just written.
            assert os.pread(fd, 64 * 1024, len(head)) == head, i
        finally:
            os.close(fd)


def test_qemu_img_lays_out_an_image_as_on_a_local_disk(each_workdir, tmp_path):
    local = str(tmp_path / "local.qcow2")
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", local, "1G"],
                   check=True)
    with open(local, "rb") as f:
        expected = f.read()
    for i in range(20):
        path = os.path.join(each_workdir, "i%d.qcow2" % i)
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", path,
                        "1G"], check=True)
        with open(path, "rb") as f:
            assert f.read() == expected, i


def test_sparse_file_keeps_its_holes(workdir, lab):
    path = os.path.join(workdir, "sparse.raw")
    with open(path, "wb") as f:
        f.seek(512 * MIB)
        f.write(b"end")
    st = os.stat(path)
    assert st.st_size == 512 * MIB + 3
    assert st.st_blocks * 512 < 4 * MIB
    with open(path, "rb") as f:
        f.seek(300 * MIB)
        assert f.read(MIB) == bytes(MIB)
    # Growing with truncate makes a hole too.
    os.truncate(path, 1024 * MIB)
    assert os.stat(path).st_blocks * 512 < 4 * MIB


def test_fio_verify_run(each_workdir):
    """fio writes with checksums, then reads back and checks.

    Random order, block sizes from 4 KiB to 1 MiB, several jobs at once.
    """
    fio = shutil.which("fio")
    assert fio, "fio is in bindep.txt"
    result = subprocess.run(
        [fio, "--output-format=json", "--name=verify",
         "--directory=%s" % each_workdir, "--ioengine=psync", "--rw=randwrite",
         "--bsrange=4k-1m", "--size=48m", "--numjobs=3",
         "--verify=crc32c", "--verify_fatal=1", "--do_verify=1",
         "--verify_state_save=0",
         "--fsync_on_close=1", "--randrepeat=0", "--group_reporting"],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout[-2000:]
    report = json.loads(result.stdout[result.stdout.index("{"):])
    job = report["jobs"][0]
    assert job["error"] == 0
    assert job["write"]["io_bytes"] >= 3 * 48 * MIB
    assert job["read"]["io_bytes"] >= 3 * 48 * MIB


def test_fio_mixed_read_write_with_verify(each_workdir):
    result = subprocess.run(
        [shutil.which("fio"), "--name=mixed", "--directory=%s" % each_workdir,
         "--ioengine=psync", "--rw=randrw", "--bs=64k", "--size=32m",
         "--verify=md5", "--verify_fatal=1", "--do_verify=1",
         "--verify_state_save=0",
         "--fsync=16", "--randrepeat=0"],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout[-2000:]
    assert "verify" not in result.stderr.lower()


def test_reads_come_from_the_proxy_cache(workdir, lab):
    path = os.path.join(workdir, "cached.raw")
    with open(path, "wb") as f:
        f.write(os.urandom(16 * MIB))
    before = lab.client_proxy.stats()
    for _ in range(2):
        # O_DIRECT is not honoured by FUSE without direct_io; drop the
        # page cache of this file instead so each pass reaches the proxy.
        with open(path, "rb") as f:
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)
    after = lab.client_proxy.stats()
    assert after["cache_bytes_local"] - before["cache_bytes_local"] \
        >= 8 * MIB


def _read_afresh(path):
    """The file's bytes, asked of the mount (not the page cache)."""
    with open(path, "rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        return f.read()


def test_the_ram_cache_answers_reads_again_without_the_proxy(
        workdir, lab, mnt, cached_mnt):
    data = os.urandom(8 * MIB + 1234)
    with open(os.path.join(workdir, "boot.raw"), "wb") as f:
        f.write(data)
    path = os.path.join(cached_mnt, os.path.relpath(workdir, mnt),
                        "boot.raw")
    assert _read_afresh(path) == data
    before = lab.client_proxy.stats()["calls"]
    assert _read_afresh(path) == data
    after = lab.client_proxy.stats()["calls"]
    assert after.get("nfs_read", 0) == before.get("nfs_read", 0)
    # Each open asked whether the file changed (close-to-open).
    assert after["nfs_getattr"] > before["nfs_getattr"]


def _client_reads(lab):
    return lab.client_proxy.stats()["calls"].get("nfs_read", 0)


def _client_readvs(lab):
    return lab.client_proxy.stats()["calls"].get("bulk_readv", 0)


def test_an_images_boot_profile_fills_the_ram_cache_at_its_open(
        workdir, lab, mnt, cached_mnt):
    """The boot's scattered blocks are read ahead at the open, in READVs.

    Then the guest's own reads of them never reach the client proxy; an
    image without a profile is read from the proxy as ever.
    """
    blocks = 64         # 4 MiB of 64 KiB blocks; every other one booted.
    written = {}
    for name in ("profiled.raw", "plain.raw"):
        written[name] = os.urandom(blocks * 64 * 1024)
        with open(os.path.join(workdir, name), "wb") as f:
            f.write(written[name])
    stored = os.stat(os.path.join(
        lab.export, os.path.relpath(workdir, mnt), "profiled.raw"))
    order = list(range(0, blocks, 2))
    random.Random(5).shuffle(order)
    with open(os.path.join(workdir, ".gvfs-meta.profiled.raw.profile"),
              "wb") as f:
        f.write(profile_format.Profile(
            stored.st_size, stored.st_mtime_ns, 64 * 1024, 1,
            tuple((block, 0) for block in order)).to_bytes())
    here = os.path.join(cached_mnt, os.path.relpath(workdir, mnt))
    reads, readvs = _client_reads(lab), _client_readvs(lab)
    with open(os.path.join(here, "profiled.raw"), "rb") as opened:
        # Read ahead in the background: the profile, then READVs of
        # 1 MiB of scattered blocks each; their replies kept a moment
        # later.
        process.wait_until(lambda: _client_readvs(lab) - readvs >= 2,
                           "the prefill's READVs", timeout=30)
        time.sleep(0.5)
        assert _client_readvs(lab) - readvs == 2, \
            "the blocks did not go 16 to a call"
        # The profile itself was READ; no block of the image was.
        assert _client_reads(lab) - reads <= 2
        reads = _client_reads(lab)
        os.posix_fadvise(opened.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        # The guest's reads only, no read-ahead of the blocks between.
        os.posix_fadvise(opened.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
        got = {block: os.pread(opened.fileno(), 64 * 1024,
                               block * 64 * 1024) for block in order}
    assert got == {block: written["profiled.raw"][
        block * 64 * 1024:(block + 1) * 64 * 1024] for block in order}
    assert _client_reads(lab) == reads
    # The control: no profile, no reads ahead; the reads go to the proxy.
    before = _client_reads(lab)
    assert _read_afresh(os.path.join(here, "plain.raw"))
    assert _client_reads(lab) > before


def test_a_profile_another_account_planted_is_not_prefilled(
        workdir, lab, mnt, cached_mnt):
    """On the all-squash export any writer may plant an image's profile.

    Planted by another account than the image's and its directory's,
    the mount's prefill does not believe it (nor does the proxy): no
    READV at the open, and the mount's log says why.  The lawful
    profile's prefill is the test above.
    """
    name = "planted-profile.raw"
    data = os.urandom(64 * 64 * 1024)
    with open(os.path.join(workdir, name), "wb") as f:
        f.write(data)
    on_export = os.path.join(lab.export, os.path.relpath(workdir, mnt))
    stored = os.stat(os.path.join(on_export, name))
    stranger = 2003
    assert stranger not in (stored.st_uid, os.stat(on_export).st_uid)
    planted = os.path.join(on_export, profile_format.profile_name(name))
    with open(planted, "wb") as f:
        f.write(profile_format.Profile(
            stored.st_size, stored.st_mtime_ns, 64 * 1024, 1,
            tuple((block, 0) for block in range(0, 64, 2))).to_bytes())
    os.chown(planted, stranger, stored.st_gid)
    os.chmod(planted, 0o644)
    log = os.path.join(lab.workdir, "cached-mount.log")
    readvs = _client_readvs(lab)
    here = os.path.join(cached_mnt, os.path.relpath(workdir, mnt))
    refusal = "ignoring the boot profile of %r: owned by uid %d" % (
        name, stranger)

    def refused():
        with open(log) as f:
            return refusal in f.read()

    with open(os.path.join(here, name), "rb") as opened:
        process.wait_until(
            lambda: refused() or _client_readvs(lab) > readvs,
            "the mount's prefill to begin or be refused", timeout=30)
        time.sleep(0.5)
        assert _client_readvs(lab) == readvs, "the planted profile was used"
        assert refused()
        assert os.pread(opened.fileno(), 100, 65536) == data[65536:65636]


def _mount_samples(port):
    samples = metrics_samples.scrape(port)

    def value(name, **labels):
        return samples.get(("gvfs_mount_" + name,
                            tuple(sorted(labels.items()))), 0)

    return value


def test_a_scrape_of_the_mount_matches_what_moved(workdir, lab, mnt,
                                                  tmp_path):
    """``[mount] metrics_port``: what the kernel and the proxy saw.

    A file larger than the RAM cache read through a metered mount, a
    scrape between its reads and one after, checked against the bytes
    read and against the client proxy's own count of READs (the only
    reader meanwhile).
    """
    port = process.free_port()
    metered = lab.mount(str(tmp_path / "metered"), name="metered-mount",
                        read_cache_mb=4, metrics_port=port).mountpoint
    data = os.urandom(12 * MIB + 4321)
    with open(os.path.join(workdir, "scraped.raw"), "wb") as f:
        f.write(data)
    path = os.path.join(metered, os.path.relpath(workdir, mnt), "scraped.raw")
    reads_before = _client_reads(lab)
    during = []
    with open(path, "rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        read = b""
        while chunk := f.read(4 * MIB):
            read += chunk
            during.append(_mount_samples(port)("read_bytes_total"))
    assert read == data
    after = _mount_samples(port)
    proxy_reads = _client_reads(lab) - reads_before
    # Every byte the file has reached the reader once.
    assert after("read_bytes_total") == len(data)
    # Scraped between reads: part of it, then more (read-ahead runs on).
    assert during[0] < len(data) and during == sorted(during), during
    # Each of the mount's READs is one the proxy answered.
    assert after("upstream_call_seconds_count", procedure="read") \
        == proxy_reads > 0
    assert after("upstream_call_seconds_bucket", procedure="read",
                 le="+Inf") == proxy_reads
    assert after("requests_total", operation="read") \
        == after("read_cache_misses_total") + after("read_cache_hits_total")
    # 12 MiB through 4 MiB of cache: at least 8 MiB let go.
    assert after("read_cache_evictions_total") >= 8 * MIB // (64 * 1024)
    assert after("read_cache_used_bytes") <= 4 * MIB
    assert after("read_cache_capacity_bytes") == 4 * MIB
    assert after("open_files") == 0
    # A file the export does not have: the kernel got ENOENT.
    assert not os.path.exists(os.path.join(metered, "not-there"))
    assert _mount_samples(port)("request_failures_total",
                                errno="ENOENT") >= 1


def test_a_file_changed_elsewhere_is_read_afresh_from_its_next_open(
        workdir, mnt, cached_mnt):
    """Another host's writes show from the next open on.

    As on a kernel NFS mount; writes through the mount itself show at
    once.
    """
    old, new = os.urandom(2 * MIB), os.urandom(2 * MIB)
    elsewhere = os.path.join(workdir, "golden.raw")
    with open(elsewhere, "wb") as f:
        f.write(old)
    here = os.path.join(cached_mnt, os.path.relpath(elsewhere, mnt))
    assert _read_afresh(here) == old
    with open(elsewhere, "r+b") as f:    # Same size: only times change.
        f.write(new)
    assert _read_afresh(here) == new
    with open(here, "r+b") as f:
        f.seek(MIB)
        f.write(old[:MIB])
        f.flush()
        assert os.pread(f.fileno(), MIB, MIB) == old[:MIB]
    assert _read_afresh(here) == new[:MIB] + old[:MIB]
    assert _read_afresh(elsewhere) == new[:MIB] + old[:MIB]


def test_o_direct_reads_see_the_writes_before_them(workdir, mnt, cached_mnt):
    """Reads that bypass the page cache (qemu's ``cache=none``).

    A write through the RAM-cached mount drops the blocks it covers at
    once: no new attributes may have been seen by the time the next
    read comes.
    """
    path = os.path.join(cached_mnt, os.path.relpath(workdir, mnt), "disk")
    block = 64 * 1024
    buf = mmap.mmap(-1, 4 * block)     # O_DIRECT wants aligned memory.
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    try:
        for i in range(20):
            old, new = os.urandom(4 * block), os.urandom(block)
            buf[:] = old
            assert os.pwritev(fd, [buf], 0) == len(buf)
            assert os.preadv(fd, [buf], 0) == len(buf)
            assert buf[:] == old, i
            buf[:block] = new
            assert os.pwritev(fd, [memoryview(buf)[:block]], block) == block
            assert os.preadv(fd, [buf], 0) == len(buf)
            assert buf[:] == old[:block] + new + old[2 * block:], i
    finally:
        os.close(fd)
        buf.close()


def test_a_hung_proxy_gives_etimedout_not_a_hang(lab, tmp_path):
    leaf = lab.add_leaf("hang-leaf")
    m = lab.mount(str(tmp_path / "m"), proxy=leaf, name="hang-mount",
                  io_timeout=2)
    path = os.path.join(m.mountpoint, "hung.raw")
    with open(path, "wb") as f:
        f.write(b"data")
    leaf.process.signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        # A separate process: an uncached stat goes to the proxy.
        probe = subprocess.run(
            [sys.executable, "-c",
             "import os,sys\ntry:\n os.stat(sys.argv[1])\nexcept OSError "
             "as e:\n print(e.errno)", os.path.join(m.mountpoint, "other")],
            capture_output=True, text=True, timeout=60)
        waited = time.monotonic() - started
    finally:
        leaf.process.signal(signal.SIGCONT)
    assert probe.stdout.strip() == str(errno.ETIMEDOUT)
    assert waited < 20
    assert "no answer from the proxy" in open(m.log_path).read()
    # Once the proxy answers again, so does the mount.
    assert open(path, "rb").read() == b"data"


def test_the_mount_reconnects_when_the_proxy_restarts(lab, tmp_path):
    port = process.free_port()
    m = lab.mount(str(tmp_path / "m"), name="restart-mount", io_timeout=30,
                  metrics_port=port)
    path = os.path.join(m.mountpoint, "across-restart.raw")
    first, second = os.urandom(3 * MIB), os.urandom(3 * MIB)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.pwrite(fd, first, 0)
        lab.restart_client_proxy(kill=True)
        # Writes sent before the restart but not committed, and writes
        # after it, are all there after fsync.
        os.pwrite(fd, second, len(first))
        os.fsync(fd)
    finally:
        os.close(fd)
    with open(os.path.join(lab.export, os.path.relpath(
            path, m.mountpoint)), "rb") as f:
        assert f.read() == first + second
    assert "reconnected to the proxy" in open(m.log_path).read()
    assert _mount_samples(port)("upstream_reconnects_total") >= 1


def test_a_sighup_leaves_the_mount_serving(lab, tmp_path):
    """logrotate's postrotate sends SIGHUP: the mount re-reads, stays."""
    m = lab.mount(str(tmp_path / "m"), name="hup-mount")
    path = os.path.join(m.mountpoint, "before-hup.raw")
    data = os.urandom(MIB)
    with open(path, "wb") as f:
        f.write(data)
    m.process.signal(signal.SIGHUP)
    process.wait_until(
        lambda: "SIGHUP: re-reading" in open(m.log_path).read(),
        "the mount's answer to SIGHUP", 30)
    assert m.process.poll() is None
    assert os.path.ismount(m.mountpoint)
    with open(path, "rb") as f:
        assert f.read() == data


def test_a_wrong_export_fails_at_start(lab, tmp_path):
    with pytest.raises(process.LabError) as e:
        lab.mount(str(tmp_path / "m"), name="bad-export",
                  export="/not/exported")
    log = open(str(e.value).split("log: ")[1].rstrip(")")).read()
    assert "cannot mount" in log and "/not/exported" in log
    assert "ERR_ACCES" in log
    assert not os.path.ismount(str(tmp_path / "m"))


def _read_ahead_kb(mountpoint):
    device = int(mountinfo.fuse_connection(mountpoint))
    with open("/sys/class/bdi/%d:%d/read_ahead_kb" % (
            device >> 20, device & 0xFFFFF)) as f:
        return int(f.read())


def test_the_kernel_keeps_max_background_requests_in_flight(
        mnt, lab, tmp_path):
    connection = mountinfo.fuse_connection(mnt)
    assert fusectl.max_background(connection) == 64   # The default.
    assert _read_ahead_kb(mnt) == 4096
    # A mount made without the right to set it: tune-mount does it.
    m = lab.mount(str(tmp_path / "m"), name="untuned", max_background=0,
                  read_ahead_kb=0)
    untuned = mountinfo.fuse_connection(m.mountpoint)
    assert fusectl.max_background(untuned) == 12   # The kernel's own.
    assert _read_ahead_kb(m.mountpoint) == 128
    config = tmp_path / "tune.conf"
    config.write_text("[mount]\nmax_background = 96\nread_ahead_kb = 2048\n")
    out = subprocess.run(
        [sys.executable, "-m", "gvfs_openstack.cmd.proxy", "--config-file",
         lab.client_proxy.config, "--config-file", str(config),
         "tune-mount", m.mountpoint], capture_output=True, text=True,
        timeout=60)
    assert out.returncode == 0, out.stderr
    assert fusectl.max_background(untuned) == 96
    assert _read_ahead_kb(m.mountpoint) == 2048
    m.stop()
    out = subprocess.run(
        [sys.executable, "-m", "gvfs_openstack.cmd.proxy", "--config-file",
         lab.client_proxy.config, "tune-mount", "--wait", "0.5",
         m.mountpoint], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "nothing is mounted at %s" % m.mountpoint in out.stderr


#: Requests NFSv3 or the server cannot carry out, each run in a child
#: process: a request the daemon never answers leaves its caller blocked
#: in the kernel, and the child is then killed and the test fails.
_UNANSWERABLE = {
    # nfstime3 seconds are 32 bits: year 2106 (pjdfstest utimensat/09.t).
    "mtime of 2^32 s": (
        "open(p, 'w').close(); os.utime(p, ns=(2**31 * 10**9, "
        "2**32 * 10**9))", errno.EOVERFLOW),
    "atime before 1970": (
        "open(p, 'w').close(); os.utime(p, ns=(-10**9, 0))",
        errno.EOVERFLOW),
    "a name of 256 bytes": ("open(os.path.join(d, 'n' * 256), 'w')",
                            errno.ENAMETOOLONG),
    "a directory name of 256 bytes": ("os.mkdir(os.path.join(d, 'n' * 256))",
                                      errno.ENAMETOOLONG),
    "a FIFO": ("os.mkfifo(os.path.join(d, 'fifo'))", None),
    "a size beyond any file": (
        "open(p, 'w').close(); os.truncate(p, 2**63 - 1)", None),
    "a rename exchange": (
        "open(p, 'w').close(); open(p + '2', 'w').close(); "
        "renameat2(p, p + '2', RENAME_EXCHANGE)", errno.EINVAL),
}

_CHILD = """
import ctypes, errno, os, sys
RENAME_EXCHANGE = 2
_libc = ctypes.CDLL(None, use_errno=True)
def renameat2(old, new, flags):
    if _libc.renameat2(-100, old.encode(), -100, new.encode(), flags):
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
d = sys.argv[1]
p = os.path.join(d, "f")
try:
    %s
except OSError as e:
    print(e.errno)
else:
    print(0)
"""


@pytest.mark.parametrize("case", sorted(_UNANSWERABLE))
def test_every_request_gets_an_answer(workdir, case):
    """Each request is answered within seconds.

    With the errno expected, or with the server's own answer where NFSv3
    can carry the request.
    """
    code, expected = _UNANSWERABLE[case]
    child = subprocess.Popen([sys.executable, "-c", _CHILD % code, workdir],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        out, err = child.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        # A caller blocked on an unanswered FUSE request may not even die
        # of SIGKILL until the daemon goes: never wait for it here.
        child.kill()
        pytest.fail("%s: no answer within 30 s" % case)
    assert child.returncode == 0, err
    answer = int(out)
    if expected is not None:
        assert answer == expected, (case, errno.errorcode.get(answer))
    assert os.listdir(workdir) is not None   # The mount still answers.


def _hidden_on_export(lab):
    hidden = os.path.join(lab.export, ".gvfs-unlinked")
    return sorted(os.listdir(hidden)) if os.path.isdir(hidden) else []


def _gone_from_export(lab, timeout=10):
    """Whether no hidden file is left, waiting a little.

    The kernel sends RELEASE after close() has returned, so the daemon's
    REMOVE comes a little later.
    """
    deadline = time.monotonic() + slowness.scaled(timeout)
    while _hidden_on_export(lab) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _hidden_on_export(lab) == []


def test_an_open_file_unlinked_stays_readable_and_writable(
        workdir, lab, mnt):
    path = os.path.join(workdir, "unlinked-while-open")
    payload = os.urandom(MIB + 7)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.pwrite(fd, payload, 0)
        os.fsync(fd)
        os.unlink(path)
        assert not os.path.exists(path)
        assert "unlinked-while-open" not in os.listdir(workdir)
        assert ".gvfs-unlinked" not in os.listdir(mnt)
        assert os.pread(fd, len(payload), 0) == payload   # not ESTALE
        os.pwrite(fd, b"more", len(payload))
        os.fsync(fd)
        assert os.fstat(fd).st_size == len(payload) + 4
        assert len(_hidden_on_export(lab)) == 1
    finally:
        os.close(fd)
    # The last close removes it.
    assert _gone_from_export(lab)


def test_a_file_renamed_over_while_open_stays_readable(workdir, lab):
    old = os.path.join(workdir, "replaced")
    new = os.path.join(workdir, "replacement")
    with open(old, "wb") as f:
        f.write(b"old contents")
    with open(new, "wb") as f:
        f.write(b"new contents")
    with open(old, "rb") as reader:
        os.rename(new, old)
        assert reader.read() == b"old contents"
        with open(old, "rb") as f:
            assert f.read() == b"new contents"
    assert _gone_from_export(lab)


def test_files_a_crash_left_unlinked_go_at_the_next_mount(lab, tmp_path):
    where = str(tmp_path / "m")
    m = lab.mount(where, name="crash-mount")
    path = os.path.join(m.mountpoint, "open-at-the-crash")
    with open(path, "wb") as f:
        f.write(b"x" * 4096)
    before = set(_hidden_on_export(lab))
    fd = os.open(path, os.O_RDONLY)
    try:
        os.unlink(path)
        left = set(_hidden_on_export(lab)) - before
        assert len(left) == 1
        m.process.signal(signal.SIGKILL)
        m.process.popen.wait(timeout=30)
    finally:
        try:
            os.close(fd)
        except OSError as e:
            assert e.errno == errno.ENOTCONN   # The daemon is gone.
    m.stop()
    assert left <= set(_hidden_on_export(lab))
    # The same mount (host, mount point, export) again: it cleans up.
    again = lab.mount(where, name="crash-mount-again")
    try:
        assert not left & set(_hidden_on_export(lab))
        assert "removed 1 files unlinked while open" in open(
            again.log_path).read()
    finally:
        again.stop()


def test_unlink_of_an_open_file_that_cannot_be_hidden_still_removes_it(
        lab, tmp_path):
    # An export whose .gvfs-unlinked is no directory the mount may use
    # (here a file in the way): the unlink must not fail for that.
    export = os.path.join(lab.export, "nowhere-to-hide")
    os.makedirs(export)
    with open(os.path.join(export, ".gvfs-unlinked"), "wb"):
        pass
    subprocess.run(["chown", "-R", "%d:%d" % (4242, 4242), export],
                   check=True)
    m = lab.mount(str(tmp_path / "m"), name="no-hide-mount", export=export)
    try:
        path = os.path.join(m.mountpoint, "open-when-unlinked")
        with open(path, "wb") as f:
            f.write(b"y" * 4096)
        with open(path, "rb"):
            os.unlink(path)
            assert "open-when-unlinked" not in os.listdir(m.mountpoint)
        assert "cannot keep open-when-unlinked" in open(m.log_path).read()
    finally:
        m.stop()
