# SPDX-License-Identifier: Apache-2.0
"""The stock nova-compute finds the driver: ``nova.virt.gvfs``.

Nova's loader imports ``nova.virt.<compute_driver>``; the package
installs one module there.  These tests run the loader's own import in a
fresh interpreter (nothing of ours imported first, no alias possible),
Nova's ``load_compute_driver`` for real, and check that the package
ships that module without taking any of Nova's ``__init__.py``.
"""

import configparser
import json
import os
import subprocess
import sys

import pytest

from gvfs_lab import compute
from gvfs_lab import process

#: What nova.conf says; what load_compute_driver prefixes with nova.virt.
COMPUTE_DRIVER = "gvfs.GvfsLibvirtDriver"

_FRESH_IMPORT = r"""
import json, sys
from oslo_utils import importutils
cls = importutils.import_class("nova.virt." + %r)
shim = sys.modules["nova.virt.gvfs"]
print(json.dumps({"class": cls.__module__ + "." + cls.__qualname__,
                  "shim_name": shim.__name__, "shim_file": shim.__file__,
                  "aliased": shim is sys.modules.get(cls.__module__)}))
"""


def test_novas_import_path_finds_the_driver_in_a_fresh_process(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-c", _FRESH_IMPORT % COMPUTE_DRIVER],
        cwd=str(tmp_path), env=env, capture_output=True, text=True,
        timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["class"] == "gvfs_openstack.nova.driver.GvfsLibvirtDriver"
    # A module of its own, found on disk -- not a sys.modules alias.
    assert found["shim_name"] == "nova.virt.gvfs"
    assert not found["aliased"]
    assert found["shim_file"].endswith(os.path.join("nova", "virt",
                                                    "gvfs.py"))


def test_load_compute_driver_loads_it(tmp_path):
    with compute.nova_fixtures():
        from nova import conf as nova_conf
        from nova.virt import driver
        from nova.virt import fake

        from gvfs_openstack.conf import nova as gvfs_nova_conf
        from gvfs_openstack.nova import driver as gvfs_driver

        conf = nova_conf.CONF
        conf.set_override("instances_path", str(tmp_path))
        conf.set_override("images_type", "qcow2", group="libvirt")
        gvfs_nova_conf.register_opts(conf)
        conf.set_override("image_dir", str(tmp_path), group="gvfs")
        loaded = driver.load_compute_driver(fake.FakeVirtAPI(),
                                            COMPUTE_DRIVER)
    assert type(loaded) is gvfs_driver.GvfsLibvirtDriver
    assert isinstance(loaded, driver.ComputeDriver)


def test_an_unknown_name_still_fails_as_nova_fails():
    with compute.nova_fixtures():
        from nova.virt import driver
        from nova.virt import fake

        with pytest.raises(SystemExit):
            driver.load_compute_driver(fake.FakeVirtAPI(),
                                       "gvfs.NoSuchDriver")


def test_the_package_ships_the_module_and_none_of_novas_packages():
    """setup.cfg ships ``nova.virt.gvfs`` as a module, nothing else.

    An ``__init__.py`` of ``nova`` or ``nova.virt`` in this tree would be
    installed over Nova's own (and uninstalled with this package).
    """
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(os.path.join(process.CHECKOUT, "setup.cfg"))
    modules = parser.get("files", "modules").split()
    packages = parser.get("files", "packages").split()
    assert modules == ["nova.virt.gvfs"]
    assert not [p for p in packages if p.split(".")[0] == "nova" or
                p.startswith("nova/")]
    shim_root = os.path.join(process.CHECKOUT, "nova")
    shipped = sorted(os.path.relpath(os.path.join(top, name), shim_root)
                     for top, _, names in os.walk(shim_root)
                     for name in names if not name.endswith(".pyc"))
    assert shipped == [os.path.join("virt", "gvfs.py")]


def test_the_deprecated_program_only_checks_the_module():
    from gvfs_openstack.cmd import nova_compute

    before = dict(sys.modules)
    shim = nova_compute.register()
    assert shim.__name__ == "nova.virt.gvfs"
    assert sys.modules["nova.virt.gvfs"] is shim
    assert all(sys.modules.get(name) is module
               for name, module in before.items())
