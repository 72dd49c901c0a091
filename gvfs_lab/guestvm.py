# SPDX-License-Identifier: Apache-2.0
"""The test guest booted as a libvirt domain, as Nova would boot it.

A transient TCG domain (``<domain type='qemu'>``: nested KVM does not work
on the lab's machines) with the guest's kernel and initramfs, its disk a
qcow2 overlay on a golden image (``virtio``, the cache mode Nova picks:
``none`` where the files allow O_DIRECT), and its serial port a pty
logged to a file through virtlogd -- Nova's console.log setup.  Also the
disk-side checks a test makes afterwards, with ``qemu-img``.
"""

import errno
import json
import os
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET

from gvfs_lab import bootset
from gvfs_lab import process


def _qemu_img(*args):
    """``qemu-img ARGS``' output; LabError with its message if it fails."""
    result = subprocess.run(("qemu-img",) + args, capture_output=True,
                            text=True)
    if result.returncode != 0:
        raise process.LabError("qemu-img %s: %s" % (
            " ".join(args[:2]), result.stderr.strip()))
    return result.stdout


def make_overlay(backing, backing_fmt, overlay):
    """A qcow2 ``overlay`` whose backing file is ``backing``."""
    _qemu_img("create", "-q", "-f", "qcow2", "-F", backing_fmt, "-b",
              backing, overlay)
    return overlay


def backing_chain(disk):
    """``disk`` and the files below it, top first (``qemu-img info``)."""
    out = _qemu_img("info", "-U", "--backing-chain", "--output=json", disk)
    return [layer["filename"] for layer in json.loads(out)]


def supports_direct_io(path):
    """Whether the existing file ``path`` opens with O_DIRECT.

    With ``cache='none'`` QEMU opens the whole backing chain so; tmpfs
    and FUSE mounts without direct I/O refuse (Nova probes its instance
    directory the same way before it picks ``none``).
    """
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_DIRECT))
    except OSError as e:
        if e.errno == errno.EINVAL:
            return False
        raise
    return True


def domain_xml(name, guest, disk, console_log, memory_mib=256,
               cache="none", cmdline=None):
    """The libvirt XML of a TCG domain booting ``guest`` from ``disk``.

    ``cmdline`` defaults to the guest's own kernel command line.
    """
    domain = ET.Element("domain", type="qemu")
    ET.SubElement(domain, "name").text = name
    ET.SubElement(domain, "memory", unit="MiB").text = str(memory_mib)
    ET.SubElement(domain, "vcpu").text = "1"
    os_ = ET.SubElement(domain, "os")
    ET.SubElement(os_, "type", arch="x86_64").text = "hvm"
    ET.SubElement(os_, "kernel").text = guest.kernel
    ET.SubElement(os_, "initrd").text = guest.initrd
    ET.SubElement(os_, "cmdline").text = cmdline or guest.cmdline
    ET.SubElement(ET.SubElement(domain, "features"), "acpi")
    ET.SubElement(domain, "clock", offset="utc")
    for event in ("on_poweroff", "on_reboot", "on_crash"):
        ET.SubElement(domain, event).text = "destroy"
    devices = ET.SubElement(domain, "devices")
    disk_el = ET.SubElement(devices, "disk", type="file", device="disk")
    ET.SubElement(disk_el, "driver", name="qemu", type="qcow2", cache=cache)
    ET.SubElement(disk_el, "source", file=disk)
    ET.SubElement(disk_el, "target", dev="vda", bus="virtio")
    serial = ET.SubElement(devices, "serial", type="pty")
    ET.SubElement(serial, "log", file=console_log, append="off")
    ET.SubElement(serial, "target", port="0")
    ET.SubElement(devices, "memballoon", model="none")
    return ET.tostring(domain, encoding="unicode")


class Domain:
    """One running guest; :meth:`destroy` ends it."""

    def __init__(self, libvirt, workdir, name, guest, disk, cache=None,
                 **xml_options):
        """Start it; ``xml_options`` go to :func:`domain_xml`."""
        self.libvirt = libvirt
        self.name = name
        self.console_log = os.path.join(workdir, name + ".console.log")
        if cache is None:
            cache = "none" if all(supports_direct_io(p) for p in
                                  backing_chain(disk)) else "writeback"
        xml_path = os.path.join(workdir, name + ".xml")
        with open(xml_path, "w") as f:
            f.write(domain_xml(name, guest, disk, self.console_log,
                               cache=cache, **xml_options))
        self.started = time.monotonic()
        self.marked = None
        libvirt.virsh("create", xml_path)
        self.pid = self._qemu_pid()

    def _qemu_pid(self):
        pidfile = self.libvirt.path("/run/libvirt/qemu/%s.pid" % self.name)
        with open(pidfile) as f:
            return int(f.read().strip())

    def console(self):
        try:
            with open(self.console_log, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def running(self):
        return os.path.exists("/proc/%d" % self.pid)

    def wait_for_marker(self, timeout=90.0):
        """The guest's :class:`~gvfs_lab.bootset.Marker`.

        LabError if it says it failed, if QEMU exits, or after
        ``timeout`` seconds, with the console's tail and QEMU's log.
        """
        found = [None]

        def marked():
            found[0] = bootset.find_marker(self.console())
            if found[0] is None and not self.running():
                raise process.LabError("QEMU of %s exited" % self.name)
            return found[0] is not None

        try:
            process.wait_until(marked, "the marker of %s" % self.name,
                               timeout=timeout, interval=0.1)
        except (process.LabError, bootset.GuestFailed) as e:
            raise process.LabError("%s; console:\n%s\nQEMU log: %s" % (
                e, self.console()[-2000:], self.libvirt.path(
                    "/var/log/libvirt/qemu/%s.log" % self.name))) from e
        self.marked = time.monotonic()
        return found[0]

    def cpu_seconds(self):
        """CPU time (user + system) QEMU has used so far."""
        with open("/proc/%d/stat" % self.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf(
            "SC_CLK_TCK")

    def destroy(self):
        if self.running():
            self.libvirt.virsh("destroy", self.name, check=False)
            process.wait_until(lambda: not self.running(),
                               "QEMU of %s gone" % self.name, timeout=30)


def read_region(disk, offset, length, fmt="qcow2"):
    """``length`` bytes at ``offset`` of a disk image, as the guest sees.

    Through the backing chain: QEMU's ``raw`` driver with an offset and
    size over the image (``qemu-img dd`` miscounts when it skips); both
    in 512-byte sectors, as the guest's own I/O.
    """
    if offset < 0 or length < 1 or offset % 512 or length % 512:
        raise ValueError("bad region: %d bytes at %d (want whole 512-byte "
                         "sectors)" % (length, offset))
    opts = "driver=raw,offset=%d,size=%d,file.driver=%s,file.file.driver=" \
        "file,file.file.filename=%s" % (offset, length, fmt,
                                        disk.replace(",", ",,"))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "region.raw")
        _qemu_img("convert", "-U", "-O", "raw", "--image-opts", opts, out)
        with open(out, "rb") as f:
            return f.read()


def top_layer_covers(overlay, offset, length):
    """Whether ``overlay`` itself (not its backing file) holds the range."""
    out = _qemu_img("map", "--output=json", "-f", "qcow2",
                    "--start-offset=%d" % offset,
                    "--max-length=%d" % length, overlay)
    covered = 0
    for extent in json.loads(out):
        if extent["depth"] == 0 and extent["data"]:
            covered += extent["length"]
    return covered == length
