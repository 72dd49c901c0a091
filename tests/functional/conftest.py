# SPDX-License-Identifier: Apache-2.0
"""Fixtures that build the loopback lab from real parts."""

import contextlib
import hashlib
import os
import shutil
import subprocess

import pytest

from gvfs_lab import drlab
from gvfs_lab import glance_api
from gvfs_lab import keystone as keystone_lab
from gvfs_lab import libvirt
from gvfs_lab import postgres
from gvfs_lab import process
from gvfs_lab.topology import Lab
from gvfs_lab import workers
from gvfs_openstack.mount import mounter

REQUIRED = ("ganesha.nfsd", "nfs-cp", "nfs-ls", "sshd", "ssh-keygen",
            "globus-url-copy", "globus-gridftp-server", "rabbitmq-server",
            "epmd", "iptables", "ip", "tc", "mariadbd")


#: Seconds each module takes (setup, calls and teardown) in a run at half
#: the CPU (``../shared/tools/slow-ci 0.5``, doc/source/contributor/
#: testing.rst): the work units start longest first
#: (gvfs_lab/workers.py); only their order matters.  A run prints every
#: module's total under "seconds by module": copy them here when a
#: module grows or the workers' loads drift apart.
MODULE_SECONDS = {
    "test_nova_cloud": 2843.0,
    "test_gvfs_api": 1020.0,
    "test_migration": 739.0,
    "test_server_migration": 725.0,
    "test_delta_transfer": 653.0,
    "test_glance_api": 353.0,
    "test_guest_boot": 219.0,
    "test_proxy_chain": 201.0,
    "test_pjdfstest": 187.0,
    "test_fuse_mount": 117.0,
    "test_job_store_backends": 59.0,
    "test_many_hosts": 46.0,
    "test_half_closed_peers": 39.0,
    "test_differential": 36.0,
    "test_cache": 31.0,
    "test_boot_profiles": 30.0,
    "test_wholefile": 26.0,
}

#: Modules that share the session's two-site DR lab run in one worker,
#: which builds it once.
SHARED = {"dr-lab": ("test_server_migration", "test_gvfs_api",
                     "test_migration", "test_delta_transfer")}


def pytest_collection_modifyitems(config, items):
    missing = [tool for tool in REQUIRED
               if not shutil.which(tool) and not os.path.exists(
                   os.path.join("/usr/sbin", tool))]
    if missing or os.geteuid() != 0:
        # Say so loudly: the suite must not pass quietly without its parts.
        raise pytest.UsageError(
            "functional tests need root and %s; run tools/install-deps.sh"
            % ", ".join(missing or ["root"]))
    workers.schedule(items, MODULE_SECONDS, SHARED)


def pytest_xdist_make_scheduler(config, log):
    """Whole work units to each worker: a module, or a SHARED group."""
    if config.getvalue("dist") == "loadfile":
        return workers.group_scheduler(config, log, SHARED)
    return None


def pytest_configure(config):
    """The controller holds what the machine has one of, for all workers.

    With pytest-xdist, a session fixture runs once per worker: a worker
    that started rpcbind or mounted fusectl would take them away from
    the others when it ends.  The controller (or a run without workers)
    holds them instead, from before the first worker starts to after
    the last one ends; the labs then find them there and leave them be.
    """
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    config.pluginmanager.register(workers.ModuleTimes(), "module-times")
    config.stash[workers.MACHINE_PARTS] = workers.hold_machine_parts()


def pytest_unconfigure(config):
    held = config.stash.get(workers.MACHINE_PARTS, None)
    if held is not None:
        held.close()


@pytest.fixture(scope="session")
def keystone(tmp_path_factory):
    """The session's Keystone: every glance-api and the DR lab use it.

    One for the session: each glance-api has a region of its own in its
    catalog, so they do not mix.
    """
    with keystone_lab.Keystone(str(tmp_path_factory.mktemp("keystone"))) \
            as identity:
        yield identity


@pytest.fixture(scope="session")
def nova_parts():
    """What a lab's Nova needs of this machine, checked once.

    Skipped where mount namespaces are refused (the lab's libvirtd
    cannot run); a missing PostgreSQL is a failure (install-deps.sh
    installs it).
    """
    if not libvirt.mount_namespaces_work():
        pytest.skip("this kernel or container refuses mount namespaces "
                    "(unshare --mount): the lab's libvirtd cannot run")
    if not postgres.available():
        raise process.LabError("PostgreSQL is missing: run "
                               "tools/install-deps.sh")


@pytest.fixture(scope="session")
def dr(tmp_path_factory, keystone):
    """The two-site DR lab, shared by the migration and gvfs-api tests."""
    with drlab.DrLab(str(tmp_path_factory.mktemp("dr")),
                     keystone=keystone) as lab:
        yield lab


@pytest.fixture(scope="module")
def lab_factory(tmp_path_factory):
    labs = []

    def make(tunnel, link=False, cache=None, wan=None, write_behind_mb=0,
             metrics=False):
        workdir = str(tmp_path_factory.mktemp("lab-%s" % tunnel))
        lab = Lab(workdir, tunnel=tunnel, link=link, cache=cache, wan=wan,
                  write_behind_mb=write_behind_mb, metrics=metrics)
        labs.append(lab)
        return lab.__enter__()

    yield make
    for lab in labs:
        lab.stop()


@contextlib.contextmanager
def glance_on(lab, workdir, keystone, io_timeout=10, workers=2):
    """glance-api with stores ``dtn`` (gvfs, default) and ``local``.

    Behind ``keystone``; its helper calls are those of ``alpha-member``.
    """
    local = os.path.join(workdir, "local-store")
    os.makedirs(local)
    mounts = os.path.join(workdir, "mounts")
    api = glance_api.GlanceApi(workdir, {
        "dtn": ("gvfs", lab.gvfs_store_options(
            "images", mounts, gvfs_store_io_timeout=io_timeout)),
        "local": ("file", {"filesystem_store_datadir": local}),
    }, keystone, workers=workers)
    try:
        yield api
    finally:
        api.stop()
        mounter.FuseMounter(mounts).unmount_all()


@pytest.fixture(scope="module")
def glance(lab, keystone, tmp_path_factory):
    """glance-api on the module's ``lab``."""
    with glance_on(lab, str(tmp_path_factory.mktemp("glance")),
                   keystone) as api:
        yield api


@pytest.fixture
def tiny_disk(tmp_path):
    """Makes small tmpfs mounts (size in MiB), unmounted after the test."""
    mounts = []

    def make(mib):
        path = tmp_path / ("tiny%d" % len(mounts))
        path.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dm" % mib,
                        "tmpfs", str(path)], check=True)
        mounts.append(path)
        return str(path)

    yield make
    for path in mounts:
        subprocess.run(["umount", "-l", str(path)], check=False)


def random_file(path, size):
    """A file of ``size`` random bytes; returns its sha256."""
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        remaining = size
        while remaining:
            chunk = os.urandom(min(remaining, 8 << 20))
            digest.update(chunk)
            f.write(chunk)
            remaining -= len(chunk)
    return digest.hexdigest()


def sha256(path, algo="sha256"):
    """The hex digest of a file (``algo``: any hashlib name)."""
    digest = hashlib.new(algo)
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def nfs_cp(src, dst, timeout=600):
    return subprocess.run(["nfs-cp", src, dst], capture_output=True,
                          text=True, timeout=timeout)
