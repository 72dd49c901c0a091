# SPDX-License-Identifier: Apache-2.0
"""A compute node for the lab: Nova's real driver and image backend.

The driver is loaded the way nova-compute loads it (``compute_driver =
gvfs.GvfsLibvirtDriver`` through Nova's loader); libvirt itself is Nova's
fake (``LibvirtFixture``) -- the image backend does not need it -- and
privileged calls run in-process (``PrivsepFixture``).  Disks are made by
real ``qemu-img``, guest I/O is replayed with real ``qemu-io``.

Several hosts are several processes, as several nova-computes are:

    python -m gvfs_lab.compute < spec.json

clones ``count`` instances of one image at once (threads, as nova-compute
spawns) and prints what each took; see :func:`run_spec`.
"""

import concurrent.futures
import contextlib
import json
import os
import subprocess
import sys
import time

from gvfs_lab import process
from gvfs_openstack.cmd import nova_compute
from gvfs_openstack.conf import nova as gvfs_nova_conf

MIB = 1024 * 1024
GIB = 1024 * MIB
#: The project of the lab's instances.
PROJECT_ID = "5e1c" * 8


def threading_mode():
    """Nova in native threading, as nova-compute runs by default.

    Must run before anything imports eventlet: Nova's test fixtures would
    otherwise monkey-patch the process.
    """
    os.environ["OS_NOVA_DISABLE_EVENTLET_PATCHING"] = "1"
    from nova import monkey_patch
    monkey_patch.patch(backend="threading")


@contextlib.contextmanager
def nova_fixtures():
    """Nova's config defaults, fake libvirt and in-process privsep."""
    from nova import conf as nova_conf
    from nova.tests import fixtures

    used = [fixtures.ConfFixture(nova_conf.CONF), fixtures.LibvirtFixture(),
            fixtures.PrivsepFixture()]
    for fixture in used:
        fixture.setUp()
    try:
        yield
    finally:
        for fixture in reversed(used):
            fixture.cleanUp()
        from nova import service_auth
        service_auth.reset_globals()


def _service_user(conf, options):
    """What ``[service_user]`` of nova.conf gives nova-compute.

    Its service token goes beside the user's (``send_service_user_token``).
    The keystoneauth plugin goes straight into Nova's cache of loaded
    plugins: loading it from options would register keystoneauth's
    plugin options at run time, which Nova's ConfFixture does not allow
    between tests.
    """
    from keystoneauth1.identity import v3
    from nova import service_auth

    conf.set_override("send_service_user_token", True,
                      group="service_user")
    service_auth.reset_globals()
    service_auth._AUTHS["service_user"] = v3.Password(**{
        name: value for name, value in options.items()
        if name != "auth_type"})


class ComputeNode:
    """One compute host: its Nova config, driver and instances.

    ``gvfs`` holds the ``[gvfs]`` options.  Nova's config is global to a
    process: ``activate`` applies this host's settings and loads its
    driver, which keeps its ``[gvfs]`` options from then on.
    """

    def __init__(self, instances_path, host="compute-1", glance_url=None,
                 auth_token=None, service_auth=None, **gvfs):
        from nova import context
        from nova import objects

        objects.register_all()
        self.instances_path = instances_path
        self.host = host
        self.glance_url = glance_url
        self.gvfs = gvfs
        self.context = context.get_admin_context()
        # The Keystone token nova-compute would hold for the user whose
        # instance it builds: the lab's glance-api checks it.
        self.context.auth_token = auth_token
        #: keystoneauth options of Nova's service user (``[service_user]``):
        #: its token goes beside the user's, as Glance's location API
        #: requires of a snapshot registered by location.
        self.service_auth = service_auth
        self.driver = None

    def activate(self):
        from nova import conf as nova_conf
        from nova.virt import driver
        from nova.virt import fake

        conf = nova_conf.CONF
        conf.set_override("instances_path", self.instances_path)
        conf.set_override("host", self.host)
        conf.set_override("images_type", "qcow2", group="libvirt")
        conf.set_override("lock_path", os.path.join(self.instances_path,
                                                    "locks"),
                          group="oslo_concurrency")
        if self.glance_url:
            conf.set_override("api_servers", [self.glance_url],
                              group="glance")
        if self.service_auth:
            _service_user(conf, self.service_auth)
        nova_compute.register()
        # What the driver registers when it loads, to hold this host's
        # values before it does.
        gvfs_nova_conf.register_opts(conf)
        for name, value in self.gvfs.items():
            conf.set_override(name, value, group="gvfs")
        if self.driver is None:
            self.driver = driver.load_compute_driver(
                fake.FakeVirtAPI(), "gvfs.GvfsLibvirtDriver")
        return self

    def instance(self, root_gb=1):
        """A new instance of a flavor with a ``root_gb`` root disk.

        Built directly: Nova's ``fake_instance`` lives in its unit test
        package, whose import monkey-patches the process with eventlet.
        """
        from nova import objects
        from oslo_utils import uuidutils

        flavor = objects.Flavor(
            id=1, name="m1", memory_mb=256, vcpus=1, root_gb=root_gb,
            ephemeral_gb=0, flavorid="1", swap=0, rxtx_factor=1.0,
            vcpu_weight=1, disabled=False, is_public=True, extra_specs={},
            projects=[])
        instance = objects.Instance(
            self.context, uuid=uuidutils.generate_uuid(), host=self.host,
            project_id=PROJECT_ID, flavor=flavor, vm_state="building",
            task_state=None, system_metadata={}, metadata={})
        os.makedirs(os.path.join(self.instances_path, instance.uuid),
                    exist_ok=True)
        return instance

    def spawn_root_disk(self, instance, image_id, fetch=None, name="disk"):
        """What spawn does for a root disk from an image.

        ``LibvirtDriver._create_and_inject_local_root``: the disk named
        ``disk`` from the backend, ``cache()`` with the image id and the
        flavor's size, and the download function (default: Nova's own).
        Rescue does the same for ``disk.rescue``.
        """
        from nova.virt.libvirt import imagecache
        from nova.virt.libvirt import utils as libvirt_utils

        disk = self.driver.image_backend.by_name(instance, name)
        disk.cache(fetch_func=fetch or libvirt_utils.fetch_image,
                   context=self.context,
                   filename=imagecache.get_cache_fname(image_id),
                   image_id=image_id,
                   size=instance.flavor.root_gb * GIB,
                   trusted_certs=None)
        return disk

    def base_dir(self):
        return os.path.join(self.instances_path, "_base")


def qemu_img_info(path):
    out = subprocess.run(["qemu-img", "info", "--output=json", "-U", path],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def qemu_io(path, *commands, fmt="qcow2", cache=None):
    """Run qemu-io ``commands`` (e.g. ``"read -P 0xab 0 64k"``) on a disk.

    ``cache`` is a qemu cache mode: ``none`` (O_DIRECT, bypassing the
    host's page cache) is what Nova gives guests on file systems that
    support it.  Returns stdout; raises if a command or a pattern check
    failed.
    """
    args = ["qemu-io", "-f", fmt] + (["-t", cache] if cache else [])
    for command in commands:
        args += ["-c", command]
    result = subprocess.run(args + [path], capture_output=True, text=True)
    if result.returncode != 0 or "Pattern verification failed" in \
            result.stdout or "failed" in result.stderr:
        raise AssertionError("qemu-io %s: %s%s" % (
            commands, result.stdout, result.stderr))
    return result.stdout


def make_golden(path, fmt, size_mib=64, pattern_every_mib=8):
    """A golden image: byte ``0x10 + i`` at every ``pattern_every_mib``.

    Returns ``{offset: pattern byte}`` of the 64 KiB extents written.
    """
    subprocess.run(["qemu-img", "create", "-q", "-f", fmt, path,
                    "%dM" % size_mib], check=True)
    written = {}
    commands = []
    for i, mib in enumerate(range(0, size_mib, pattern_every_mib)):
        written[mib * MIB] = 0x10 + i
        commands.append("write -P %d %d 64k" % (0x10 + i, mib * MIB))
    qemu_io(path, *commands, fmt=fmt)
    return written


def run_spec(spec):
    """Clone ``spec["count"]`` instances of ``spec["image_id"]``.

    ``spec``: ``instances_path``, ``host``, ``glance_url``,
    ``auth_token`` (a Keystone token of the images' owner), ``gvfs``
    (options), ``image_id``, ``count``, ``root_gb``, optionally ``reads``
    (qemu-io commands each clone replays: its guest's boot),
    ``cache_mode`` (the guest's qemu cache mode) and ``sequential`` (one
    clone after another instead of all at once, as nova-compute spawns
    them).  The export is mounted first, as at
    nova-compute's start.  Returns one result per clone: uuid, disk path,
    its backing file and the seconds the clone and the reads took.
    """
    node = ComputeNode(spec["instances_path"], spec["host"],
                       spec["glance_url"], spec["auth_token"],
                       spec.get("service_auth"), **spec["gvfs"]).activate()
    node.driver.image_export.datadir()

    def clone(_):
        instance = node.instance(spec.get("root_gb", 1))
        start = time.monotonic()
        disk = node.spawn_root_disk(instance, spec["image_id"])
        cloned = time.monotonic()
        if spec.get("reads"):
            qemu_io(disk.path, *spec["reads"],
                    cache=spec.get("cache_mode"))
        return {"uuid": instance.uuid, "path": disk.path,
                "backing": qemu_img_info(disk.path).get(
                    "full-backing-filename"),
                "clone_seconds": cloned - start,
                "read_seconds": time.monotonic() - cloned}

    if spec.get("sequential"):
        return [clone(i) for i in range(spec["count"])]
    with concurrent.futures.ThreadPoolExecutor(spec["count"]) as pool:
        return list(pool.map(clone, range(spec["count"])))


def run_on_host(spec, timeout=3600):
    """``run_spec`` in a process of its own (a nova-compute of its own)."""
    result = subprocess.run(
        [sys.executable, "-m", "gvfs_lab.compute"],
        input=json.dumps(spec), capture_output=True, text=True,
        timeout=timeout, env=process.child_env())
    if result.returncode != 0:
        raise RuntimeError("compute host %s failed: %s" % (
            spec["host"], result.stderr[-3000:]))
    return json.loads(result.stdout)


def main():
    threading_mode()
    spec = json.load(sys.stdin)
    with nova_fixtures():
        json.dump(run_spec(spec), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
