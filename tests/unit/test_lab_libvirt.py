# SPDX-License-Identifier: Apache-2.0
"""The lab hypervisor's pure parts: where libvirt's fixed paths land, and
the domain XML (checked against libvirt's own schema)."""

import os
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from gvfs_lab import guest
from gvfs_lab import guestvm
from gvfs_lab import libvirt


@pytest.mark.parametrize("system,local", [
    ("/run/libvirt/qemu/vm.pid", "run/libvirt/qemu/vm.pid"),
    ("/run/libvirt/virtlogd-sock", "run/libvirt/virtlogd-sock"),
    ("/var/log/libvirt/qemu/vm.log", "log/qemu/vm.log"),
    ("/etc/libvirt/qemu.conf", "etc/qemu.conf"),
    ("/var/lib/libvirt", "lib/.")])
def test_fixed_paths_land_in_the_lab(system, local):
    assert libvirt.lab_path("/lab", system) == \
        os.path.join("/lab", local)


@pytest.mark.parametrize("system", ["/etc/libvirtd.conf", "/var/lib/nova",
                                    "/runner", "run/libvirt"])
def test_other_paths_are_not_the_labs(system):
    with pytest.raises(ValueError, match="not a path libvirt keeps"):
        libvirt.lab_path("/lab", system)


def _golden(tmp_path):
    return guest.Golden(
        directory=str(tmp_path), kernel_release="6.1.0-56-amd64",
        disk_bytes=1 << 30, boot_set=(3, 1), expected_digest="0" * 64,
        scratch_offset=1008 << 20, write_bytes=4 << 20,
        qcow2_sha256="1" * 64, build_seconds=1.0)


def test_domain_is_a_tcg_kernel_boot_with_a_logged_serial_port(tmp_path):
    golden = _golden(tmp_path)
    text = guestvm.domain_xml("vm-1", golden, "/i/disk<1>.qcow2",
                              "/i/console.log", memory_mib=192)
    domain = ET.fromstring(text)
    assert domain.get("type") == "qemu"
    assert domain.findtext("os/kernel") == golden.kernel
    assert domain.findtext("os/initrd") == golden.initrd
    assert "console=ttyS0" in domain.findtext("os/cmdline").split()
    assert domain.find("memory").text == "192"
    disk = domain.find("devices/disk")
    assert disk.find("source").get("file") == "/i/disk<1>.qcow2"
    assert disk.find("driver").get("type") == "qcow2"
    assert disk.find("target").attrib == {"dev": "vda", "bus": "virtio"}
    serial = domain.find("devices/serial")
    assert serial.get("type") == "pty"
    assert serial.find("log").get("file") == "/i/console.log"


def test_domain_xml_is_valid_for_libvirt(tmp_path):
    validate = shutil.which("virt-xml-validate")
    if validate is None or shutil.which("xmllint") is None:
        pytest.skip("virt-xml-validate and xmllint (libvirt-clients, "
                    "libxml2-utils: bindep.txt) are not installed")
    path = tmp_path / "domain.xml"
    path.write_text(guestvm.domain_xml("vm-1", _golden(tmp_path),
                                       "/i/disk.qcow2", "/i/console.log"))
    result = subprocess.run([validate, str(path), "domain"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    # The validator does fail: a domain without a name is not one.
    broken = ET.fromstring(path.read_text())
    broken.remove(broken.find("name"))
    path.write_text(ET.tostring(broken, encoding="unicode"))
    assert subprocess.run([validate, str(path), "domain"],
                          capture_output=True).returncode != 0


def test_direct_io_probe_of_a_missing_file_is_an_error_not_a_no(tmp_path):
    # Else a wrong path would quietly give the guest cache='writeback'.
    with pytest.raises(FileNotFoundError):
        guestvm.supports_direct_io(str(tmp_path / "missing"))


def test_regions_are_read_through_the_backing_chain(tmp_path):
    if shutil.which("qemu-img") is None or shutil.which("qemu-io") is None:
        pytest.skip("qemu-img and qemu-io (qemu-utils, bindep.txt) are not "
                    "installed")
    raw = tmp_path / "golden,1.raw"
    raw.write_bytes(bytes(range(256)) * 4096)  # 1 MiB.
    golden = str(tmp_path / "golden,1.qcow2")
    subprocess.run(["qemu-img", "convert", "-f", "raw", "-O", "qcow2",
                    str(raw), golden], check=True)
    overlay = guestvm.make_overlay(golden, "qcow2",
                                   str(tmp_path / "overlay.qcow2"))
    assert guestvm.backing_chain(overlay) == [overlay, golden]
    subprocess.run(["qemu-io", "-f", "qcow2", "-c",
                    "write -P 0xab 65536 65536", overlay], check=True,
                   capture_output=True)
    got = guestvm.read_region(overlay, 65536 - 512, 65536 + 1024)
    assert got == raw.read_bytes()[65024:65536] + b"\xab" * 65536 + \
        raw.read_bytes()[131072:131584]
    assert guestvm.top_layer_covers(overlay, 65536, 65536)
    assert not guestvm.top_layer_covers(overlay, 0, 131072)
    assert guestvm.read_region(golden, 65536, 512) == bytes(range(256)) * 2
    for offset, length in ((0, 0), (10, 512), (0, 100)):
        with pytest.raises(ValueError, match="bad region"):
            guestvm.read_region(overlay, offset, length)
