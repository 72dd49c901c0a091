# SPDX-License-Identifier: Apache-2.0
"""The mount interface without a mount.

Inode numbers, attribute and status translation, and the kernel NFS
mount the privsep daemon would run, recorded and checked as the daemon
checks it (no kernel NFS client exists on these machines).
"""

import errno
import os
import stat
import threading

from oslo_config import cfg
import pytest

from gvfs_openstack.conf import privileged as privileged_conf
from gvfs_openstack import exceptions
from gvfs_openstack.fuse import inodes
from gvfs_openstack.fuse import nfsattr
from gvfs_openstack.mount import mounter
from gvfs_openstack.mount import privileged
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs import nfs3


# --- inode table ------------------------------------------------------------

def test_root_is_inode_one_and_never_forgotten():
    table = inodes.InodeTable(b"root")
    assert table.handle(inodes.ROOT_INODE) == b"root"
    table.forget(inodes.ROOT_INODE, 5)
    assert table.handle(1) == b"root"


def test_inode_lives_while_the_kernel_holds_references():
    table = inodes.InodeTable(b"root")
    ino = table.remember(b"a")
    assert table.remember(b"a") == ino and ino != 1
    table.forget(ino, 1)
    assert table.handle(ino) == b"a"
    table.forget(ino, 1)
    with pytest.raises(inodes.StaleInode):
        table.handle(ino)
    # A handle seen again later gets a new number, never a reused one.
    assert table.remember(b"a") > ino
    assert table.remember(b"b") not in (ino, 1)


def test_assigned_but_unreferenced_numbers_are_stable():
    table = inodes.InodeTable(b"root")
    assert table.inode(b"x") == table.inode(b"x") == table.remember(b"x")
    assert len(table) == 2


# --- attributes and statuses ----------------------------------------------

def _fattr(**kw):
    values = dict(type=const.FileType.NF3REG, mode=0o100640, nlink=2,
                  uid=7, gid=8, size=10_000, used=8192,
                  rdev=nfs3.SpecData(0, 0), fsid=1, fileid=99,
                  atime=nfs3.NfsTime(1, 2), mtime=nfs3.NfsTime(3, 4),
                  ctime=nfs3.NfsTime(5, 6))
    values.update(kw)
    return nfs3.Fattr(**values)


def test_stat_fields_of_a_regular_file():
    fields = nfsattr.stat_fields(_fattr(), ino=12, blksize=65536)
    assert fields["st_ino"] == 12
    assert stat.S_ISREG(fields["st_mode"])
    assert stat.S_IMODE(fields["st_mode"]) == 0o640
    assert fields["st_blocks"] == 16
    assert fields["st_mtime_ns"] == 3_000_000_004
    assert (fields["st_uid"], fields["st_gid"], fields["st_nlink"]) == \
        (7, 8, 2)


@pytest.mark.parametrize("kind,check", [
    (const.FileType.NF3DIR, stat.S_ISDIR),
    (const.FileType.NF3LNK, stat.S_ISLNK),
    (const.FileType.NF3FIFO, stat.S_ISFIFO),
    (const.FileType.NF3CHR, stat.S_ISCHR),
])
def test_file_types(kind, check):
    assert check(nfsattr.stat_fields(_fattr(type=kind), 2, 4096)["st_mode"])


def test_device_numbers():
    fields = nfsattr.stat_fields(_fattr(type=const.FileType.NF3BLK,
                                        rdev=nfs3.SpecData(8, 1)), 2, 4096)
    assert os.major(fields["st_rdev"]) == 8
    assert os.minor(fields["st_rdev"]) == 1


@pytest.mark.parametrize("status,err", [
    (const.NfsStat.NFS3ERR_NOENT, errno.ENOENT),
    (const.NfsStat.NFS3ERR_NAMETOOLONG, errno.ENAMETOOLONG),
    (const.NfsStat.NFS3ERR_NOTEMPTY, errno.ENOTEMPTY),
    (const.NfsStat.NFS3ERR_STALE, errno.ESTALE),
    (const.NfsStat.NFS3ERR_BADHANDLE, errno.ESTALE),
    (const.NfsStat.NFS3ERR_DQUOT, errno.EDQUOT),
    (const.NfsStat.NFS3ERR_NOSPC, errno.ENOSPC),
    (const.NfsStat.NFS3ERR_JUKEBOX, errno.EAGAIN),
    (123456, errno.EIO),
])
def test_status_to_errno(status, err):
    assert nfsattr.errno_of(status) == err


def test_every_nfs_status_has_an_errno():
    for status in const.NfsStat:
        if status != const.NfsStat.NFS3_OK:
            assert status in nfsattr.ERRNO


def test_setattr_sends_only_what_changes():
    changes = {"mode": True, "uid": False, "gid": False, "size": True,
               "atime": False, "mtime": True}
    attrs = {"st_mode": stat.S_IFREG | 0o600, "st_uid": 1, "st_gid": 2,
             "st_size": 77, "st_atime_ns": 5, "st_mtime_ns": 1_500_000_000}
    sattr = nfsattr.sattr(changes, attrs)
    assert sattr.mode == 0o600 and sattr.size == 77
    assert sattr.uid is None and sattr.gid is None and sattr.atime is None
    assert sattr.mtime == nfs3.NfsTime(1, 500_000_000)
    # It encodes: what the proxy receives is a valid sattr3.
    nfs3.encode_args(const.Nfs3Proc.SETATTR,
                     nfs3.SetattrArgs(b"fh", sattr))


# --- the kernel NFS mount, parsed back --------------------------------------

def _daemon_conf(base, exports=("/srv/images",),
                 hosts=("127.0.0.1", "192.0.2.1"), ports=(2049, 20490),
                 config_files=()):
    """The privileged daemon's own configuration."""
    conf = cfg.ConfigOpts()
    privileged_conf.register(conf)
    args = []
    for path in config_files:
        args += ["--config-file", str(path)]
    conf(args, project="test", default_config_files=[],
         default_config_dirs=[])
    group = privileged_conf.GROUP
    conf.set_override("mount_bases", [str(base)], group)
    conf.set_override("exports", list(exports), group)
    conf.set_override("proxy_hosts", list(hosts), group)
    conf.set_override("proxy_ports", list(ports), group)
    return conf


#: The options a mount must have, whatever else a test varies.
OPTIONS = "vers=3,port=2049,mountport=2049,nosuid,nodev"


class Recorder:
    """The privileged steps, checked as the daemon checks them."""

    def __init__(self, conf=None):
        self.conf = conf
        self.mounts = []
        self.unmounts = []

    def mount(self, share, path, options):
        if self.conf is not None:
            privileged.check_mount_args(share, path, options, self.conf)
        self.mounts.append((share, path, options))

    def unmount(self, path):
        self.unmounts.append(path)


@pytest.fixture
def recorded(tmp_path):
    recorder = Recorder(_daemon_conf(tmp_path))
    nfs = mounter.NfsMounter(str(tmp_path), io_timeout=30,
                             options=["noatime", "nconnect=4"],
                             rsize=512 * 1024, mount_nfs=recorder.mount,
                             unmount_nfs=recorder.unmount)
    return nfs, recorder


def _parse(options):
    parsed = {}
    for item in options.split(","):
        key, _, value = item.partition("=")
        parsed[key] = value or True
    return parsed


def test_the_proxy_is_mounted_with_nfsv3_options(recorded):
    nfs, recorder = recorded
    share = mounter.Share("127.0.0.1", 20490, "/srv/images")
    nfs.mount(share, nfs.mount_point(share))
    [(device, path, options)] = recorder.mounts
    assert device == "127.0.0.1:/srv/images"
    # os-brick's layout: md5 of the share under the base, made first.
    assert os.path.dirname(path) == nfs.base
    assert os.path.isdir(path)
    assert path == mounter.Mounter.mount_point(nfs, share)
    opts = _parse(options)
    assert opts["vers"] == "3" and opts["proto"] == "tcp"
    assert opts["port"] == opts["mountport"] == "20490"
    assert opts["mountproto"] == "tcp" and opts["nolock"] is True
    assert opts["rsize"] == str(512 * 1024)
    assert opts["wsize"] == str(1024 * 1024)
    # A dead proxy gives ETIMEDOUT after about io_timeout, not a hang.
    assert opts["softerr"] is True
    timeo, retrans = int(opts["timeo"]), int(opts["retrans"])
    assert timeo * (retrans + 1) / 10 == pytest.approx(30, abs=1)
    # The operator's options come last, so they win.
    assert options.endswith(",noatime,nconnect=4")


def test_the_mount_point_is_where_os_brick_puts_it(tmp_path):
    """Nova's and Cinder's NFS users find a share where os-brick would.

    os-brick is not a dependency (the ``nfs`` extra leaves it out); Nova
    brings it to the test environment, so its own layout is the judge.
    """
    from os_brick.remotefs import remotefs
    share = mounter.Share("192.0.2.7", 20490, "/srv/images")
    brick = remotefs.RemoteFsClient("nfs", root_helper=None,
                                    nfs_mount_point_base=str(tmp_path))
    nfs = mounter.NfsMounter(str(tmp_path), mount_nfs=Recorder().mount,
                             unmount_nfs=Recorder().unmount)
    assert nfs.mount_point(share) == brick.get_mount_point(share.name)


def test_hard_from_the_operator_drops_the_timeouts(tmp_path):
    nfs = mounter.NfsMounter(str(tmp_path), options=["hard"],
                             mount_nfs=Recorder().mount,
                             unmount_nfs=Recorder().unmount)
    opts = _parse(nfs.options(mounter.Share("h", 1, "/e")))
    assert "softerr" not in opts and "timeo" not in opts and opts["hard"]


def test_mount_errors_become_mount_failed(tmp_path):
    def refuse(share, path, options):
        raise OSError("mount.nfs: Connection refused")

    nfs = mounter.NfsMounter(str(tmp_path), mount_nfs=refuse,
                             unmount_nfs=Recorder().unmount)
    share = mounter.Share("127.0.0.1", 1, "/srv/images")
    with pytest.raises(exceptions.MountFailed) as e:
        nfs.mount(share, nfs.mount_point(share))
    assert "127.0.0.1:/srv/images" in str(e.value)
    assert "Connection refused" in str(e.value)


@pytest.mark.parametrize("share,path,options", [
    ("h:/e", "/elsewhere/x", OPTIONS),               # outside the base
    ("h:/e", "{base}/a/b", OPTIONS),                 # not directly under
    ("h:/e", "{base}/x", OPTIONS.replace("3", "4")),     # not NFSv3
    ("h:/e", "{base}/x", OPTIONS + ",exec;rm -rf /"),    # shell junk
    ("h:/e", "{base}/x", OPTIONS + ",remount,bind=/"),   # odd values
    ("h:/e; reboot", "{base}/x", OPTIONS),           # not a share
    ("h:/e/../../etc", "{base}/x", OPTIONS),         # escapes
    ("-o:/e", "{base}/x", OPTIONS + ",,"),           # empty option
    ("h:/other", "{base}/x", OPTIONS),               # another export
    ("dtn.example:/e", "{base}/x", OPTIONS),         # not a local proxy
    # Another NFS server on the proxy's host, or the portmapper's choice.
    ("h:/e", "{base}/x", OPTIONS.replace("port=2049,m", "port=2050,m")),
    ("h:/e", "{base}/x", OPTIONS.replace("mountport=2049", "mountport=1")),
    ("h:/e", "{base}/x", "vers=3,mountport=2049,nosuid,nodev"),
    ("h:/e", "{base}/x", "vers=3,port=2049,nosuid,nodev"),
    ("h:/e", "{base}/x", OPTIONS + ",port=111"),     # the last one wins
    # Files on the mount may not raise privileges.
    ("h:/e", "{base}/x", OPTIONS.replace(",nosuid", "")),
    ("h:/e", "{base}/x", OPTIONS.replace(",nodev", "")),
])
def test_the_privileged_mount_refuses_anything_else(tmp_path, share, path,
                                                    options):
    conf = _daemon_conf(tmp_path, exports=["/e"], hosts=["h"],
                        ports=[2049])
    with pytest.raises(ValueError):
        privileged.check_mount_args(share, path.format(base=tmp_path),
                                    options, conf)


@pytest.mark.parametrize("mode,owner", [(0o644, 65534), (0o664, 0),
                                        (0o646, 0)])
def test_limits_from_a_file_others_may_write_are_refused(tmp_path, mode,
                                                         owner):
    # The service names the daemon's --config-file: only root's own
    # files may set its limits.
    written = tmp_path / "limits.conf"
    written.write_text("[%s]\n" % privileged_conf.GROUP)
    os.chown(written, owner, 0)
    os.chmod(written, mode)
    conf = _daemon_conf(tmp_path, config_files=[written])
    with pytest.raises(ValueError) as e:
        privileged.check_mount_args("127.0.0.1:/srv/images",
                                    str(tmp_path / "m"), OPTIONS, conf)
    assert "only writable by root" in str(e.value)
    os.chmod(written, 0o640)
    os.chown(written, 0, 0)
    privileged.check_mount_args("127.0.0.1:/srv/images",
                                str(tmp_path / "m"), OPTIONS, conf)


def test_a_link_in_the_base_is_no_mount_point(tmp_path):
    (tmp_path / "m").symlink_to("/etc")
    (tmp_path / "f").write_text("")
    with pytest.raises(ValueError, match="link is refused"):
        privileged._check_mount_point(str(tmp_path / "m"))
    with pytest.raises(ValueError, match="not a directory"):
        privileged._check_mount_point(str(tmp_path / "f"))
    with pytest.raises(ValueError, match="does not exist"):
        privileged._check_mount_point(str(tmp_path / "gone"))
    (tmp_path / "d").mkdir()
    privileged._check_mount_point(str(tmp_path / "d"))


def test_the_privileged_mount_accepts_what_the_mounter_builds(recorded):
    nfs, recorder = recorded
    share = mounter.Share("192.0.2.1", 2049, "/srv/images/")
    privileged.check_mount_args(share.name, nfs.mount_point(share),
                                nfs.options(share), recorder.conf)


def test_the_mount_base_comes_from_the_daemons_configuration(tmp_path):
    """A service that asks with another base is refused.

    Before, the caller passed the base it wanted checked against.
    """
    allowed, other = tmp_path / "allowed", tmp_path / "other"
    allowed.mkdir()
    other.mkdir()
    conf = _daemon_conf(allowed)
    share = "127.0.0.1:/srv/images"
    privileged.check_mount_args(share, str(allowed / "m"), OPTIONS, conf)
    with pytest.raises(ValueError) as e:
        privileged.check_mount_args(share, str(other / "m"), OPTIONS,
                                    conf)
    assert "mount_bases" in str(e.value)


def test_no_export_is_mounted_unless_listed(tmp_path):
    conf = _daemon_conf(tmp_path, exports=[])
    with pytest.raises(ValueError) as e:
        privileged.check_mount_args("127.0.0.1:/srv/images",
                                    str(tmp_path / "m"), OPTIONS, conf)
    assert "exports" in str(e.value)


def test_unknown_kind():
    with pytest.raises(ValueError) as e:
        mounter.make("smb", "/tmp")
    assert "nfs, fuse" in str(e.value)


# --- health checks ----------------------------------------------------------

def test_a_healthy_path_passes(tmp_path):
    mounter.check_health(str(tmp_path), timeout=5)


def test_a_dead_path_is_reported(tmp_path):
    with pytest.raises(exceptions.MountUnhealthy) as e:
        mounter.check_health(str(tmp_path / "gone"), timeout=5)
    assert "is dead" in str(e.value)


def test_a_hung_path_is_reported_once_and_not_probed_again(tmp_path,
                                                           monkeypatch):
    release = threading.Event()
    calls = []
    real_statvfs = os.statvfs

    def hanging(path):
        calls.append(path)
        if path == str(tmp_path):
            release.wait(30)
        return real_statvfs(path)

    monkeypatch.setattr(os, "statvfs", hanging)
    try:
        for _ in range(2):
            with pytest.raises(exceptions.MountUnhealthy) as e:
                mounter.check_health(str(tmp_path), timeout=0.2)
            assert "hung" in str(e.value)
        assert calls == [str(tmp_path)]
    finally:
        release.set()


def test_statfs_asks_the_proxy_once_per_attribute_timeout():
    """qemu asks at every open; each ask is a round trip to the DTN."""
    import asyncio
    import types

    from gvfs_openstack.fuse import fusefs

    class Session:
        root = b"root-fh"
        client = types.SimpleNamespace(wsize=1 << 20)
        calls = 0

        async def call(self, name, *args, **kwargs):
            assert name == "fsstat"
            self.calls += 1
            return types.SimpleNamespace(
                tbytes=1 << 30, fbytes=1 << 29, abytes=1 << 28, tfiles=100,
                ffiles=50, afiles=40)

    session = Session()
    cached = fusefs.GvfsFuse(session, fusefs.MountOptions(
        attr_timeout=60.0))
    first = asyncio.run(cached.statfs(None))
    second = asyncio.run(cached.statfs(None))
    assert session.calls == 1
    assert second.f_bavail == first.f_bavail == (1 << 28) // 4096
    uncached = fusefs.GvfsFuse(session, fusefs.MountOptions(
        attr_timeout=0.0))
    asyncio.run(uncached.statfs(None))
    asyncio.run(uncached.statfs(None))
    assert session.calls == 3


def test_directory_names_are_cached_longer_than_file_names():
    """A path walk asks the DTN only for the names that may change.

    Image files are renamed aside by a delete (whose grace counts on
    ``entry_timeout``); directories are not renamed, and the kernel
    checks each one's mode on the way, so their attributes last as long.
    """
    import types

    from gvfs_openstack.fuse import fusefs
    from gvfs_openstack.nfs import const
    from gvfs_openstack.nfs import nfs3

    session = types.SimpleNamespace(root=b"root-fh",
                                    client=types.SimpleNamespace(
                                        rsize=1 << 20))
    ops = fusefs.GvfsFuse(session, fusefs.MountOptions(
        attr_timeout=1.0, entry_timeout=1.0, dir_entry_timeout=30.0))

    def attrs(kind):
        t = nfs3.NfsTime(1, 0)
        return nfs3.Fattr(kind, 0o755, 1, 0, 0, 4096, 4096, nfs3.SpecData(),
                          1, 7, t, t, t)

    directory = ops._entry(attrs(const.FileType.NF3DIR), 7)
    image = ops._entry(attrs(const.FileType.NF3REG), 7)
    assert directory.entry_timeout == 30.0
    assert image.entry_timeout == 1.0
    assert directory.attr_timeout == 30.0
    assert image.attr_timeout == 1.0
    same = fusefs.GvfsFuse(session, fusefs.MountOptions(
        entry_timeout=2.0))
    assert same._entry(attrs(const.FileType.NF3DIR), 7).entry_timeout == 2.0


def test_a_passed_health_check_stands_for_recheck_after(tmp_path,
                                                        monkeypatch):
    """A clone asks for the mount several times within a second."""
    probes = []
    monkeypatch.setattr(mounter, "is_mounted", lambda path: True)
    monkeypatch.setattr(mounter, "check_health",
                        lambda path, timeout: probes.append(path))
    now = [10.0]
    monkeypatch.setattr(mounter.time, "monotonic", lambda: now[0])
    made = mounter.FuseMounter(str(tmp_path))
    share = mounter.Share("127.0.0.1", 2049, "/srv/images")
    made.ensure(share)
    made.ensure(share)
    assert len(probes) == 2  # By default every call probes.
    made.recheck_after = 5.0
    made.ensure(share)
    now[0] += 4.0
    made.ensure(share)
    assert len(probes) == 2  # The check at t=10 still stands.
    now[0] += 1.5
    made.ensure(share)
    assert len(probes) == 3


def test_the_mount_command_does_not_load_the_proxy():
    """A mount starts at each compute node's first clone.

    The proxy's modules (paramiko, the cache, the tunnels) took a third
    of a second of its start to import, for nothing.
    """
    import subprocess
    import sys

    loaded = subprocess.run(
        [sys.executable, "-c",
         "import sys; from oslo_config import cfg; "
         "from gvfs_openstack.cmd import proxy; "
         "proxy.register_opts(cfg.ConfigOpts()); "
         "from gvfs_openstack.fuse import fusefs, session; "
         "from gvfs_openstack.mount import mounter; "
         "print(' '.join(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True).stdout.split()
    assert "gvfs_openstack.fuse.fusefs" in loaded
    # Nor other programs' options: oslo.privsep and keystoneauth's
    # plugins are the conductor's and the kernel mount's.
    for heavy in ("paramiko", "gvfs_openstack.proxy.service",
                  "gvfs_openstack.proxy.cache.reads", "oslo_privsep",
                  "keystoneauth1.loading", "gvfs_openstack.conf.nova"):
        assert heavy not in loaded
