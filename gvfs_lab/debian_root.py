# SPDX-License-Identifier: Apache-2.0
"""A Debian root file system from the package archive, and its boot reads.

The realistic lab guest (:mod:`gvfs_lab.debian_guest`) boots from the
root file system of a small Debian server: systemd, udev, D-Bus, SSH,
cron, ifupdown and what they depend on, resolved by ``apt-cache`` as
``apt-get install --no-install-recommends`` would (the first alternative
of each dependency), fetched by ``apt-get download`` from the machine's
own package archive (nothing from elsewhere) and unpacked with
``dpkg-deb -x``, no maintainer scripts run.

What its boot reads stands for what a Debian server's boot reads: the
programs systemd starts, every shared library of the package set,
systemd's and udev's own files, the configuration in ``/etc``, the
kernel modules a virtual machine loads and kmod's indexes.  Not the
documentation, locales, manuals, perl's library or the rest of the
module tree: those stay on the disk unread, as on a real image.
"""

import os
import subprocess

#: A small server; the order is roughly the boot's.
BOOT_PACKAGES = ("systemd", "systemd-sysv", "udev", "dbus", "kmod",
                 "util-linux", "mount", "e2fsprogs", "ifupdown",
                 "iproute2", "isc-dhcp-client", "openssh-server", "cron",
                 "procps", "login", "bash", "coreutils")
#: Programs started at boot, in boot order (those the package set holds).
BOOT_PROGRAMS = (
    "lib/systemd/systemd", "usr/lib/systemd/systemd",
    "lib/systemd/systemd-journald", "usr/lib/systemd/systemd-journald",
    "bin/udevadm", "usr/bin/udevadm", "bin/kmod", "usr/bin/kmod",
    "bin/mount", "usr/bin/mount", "sbin/e2fsck", "usr/sbin/e2fsck",
    "bin/systemctl", "usr/bin/systemctl",
    "lib/systemd/systemd-logind", "usr/lib/systemd/systemd-logind",
    "usr/bin/dbus-daemon", "sbin/ifup", "usr/sbin/ifup", "bin/ip",
    "usr/bin/ip", "sbin/dhclient", "usr/sbin/dhclient", "usr/sbin/sshd",
    "usr/sbin/cron", "sbin/agetty", "usr/sbin/agetty", "bin/login",
    "usr/bin/login", "bin/bash", "usr/bin/bash", "bin/journalctl",
    "usr/bin/journalctl")
#: Directories whose files a boot reads, after the programs.
BOOT_DIRECTORIES = ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu",
                    "lib/systemd", "usr/lib/systemd", "lib/udev",
                    "usr/lib/udev", "etc")
#: Not read at boot, though under a boot directory.
SKIPPED_DIRECTORIES = ("perl", "perl-base", "perl5", "gconv", "hwdb.d")
#: Modules a virtual machine's udev loads (those of the kernel's tree;
#: their dependencies come along).
VM_MODULES = ("virtio_net", "virtio_balloon", "virtio_console",
              "virtio_rng", "virtio_scsi", "ext4", "crc32c_generic",
              "autofs4", "ip_tables", "evdev", "serio_raw", "button",
              "qemu_fw_cfg", "bochs", "ata_piix", "ata_generic", "sd_mod",
              "sg", "i2c_piix4", "psmouse", "joydev", "pcspkr",
              "configfs", "loop", "dm_mod", "fuse", "binfmt_misc",
              "efi_pstore", "nls_utf8", "nls_ascii")
#: kmod's indexes, read by every module load.
MODULE_INDEXES = ("modules.dep.bin", "modules.alias.bin",
                  "modules.symbols.bin", "modules.builtin.bin",
                  "modules.builtin.alias.bin", "modules.softdep",
                  "modules.devname")
#: ``apt-cache depends`` without what ``--no-install-recommends`` skips.
_DEPENDS = ["apt-cache", "depends", "--no-recommends", "--no-suggests",
            "--no-conflicts", "--no-breaks", "--no-replaces",
            "--no-enhances"]


class PackageError(Exception):
    """The package set cannot be resolved, fetched or unpacked here."""


def _run(argv, cwd=None):
    """Run an apt or dpkg tool; its output, or a clear PackageError."""
    try:
        return subprocess.run(argv, check=True, capture_output=True,
                              text=True, cwd=cwd).stdout
    except FileNotFoundError as e:
        raise PackageError("%s not found: this needs Debian's or Ubuntu's "
                           "apt and dpkg" % argv[0]) from e
    except subprocess.CalledProcessError as e:
        raise PackageError("%s failed (is the package archive reachable? "
                           "run apt-get update?): %s" % (
                               " ".join(argv[:2]),
                               e.stderr.strip()[-2000:])) from e


def parse_depends(text):
    """Each package's dependencies in ``apt-cache depends`` output.

    ``{package: [[(name, providers), ...], ...]}``: groups of
    alternatives; ``<name>`` is a virtual package and ``providers`` the
    real ones apt lists under it.
    """
    found = {}
    groups = group = last = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            groups = found.setdefault(line.strip(), [])
            group, last = [], None
            continue
        if groups is None:
            raise PackageError("apt-cache depends: %r before a package"
                               % line)
        if line.startswith("    "):
            if last is not None:
                last[1].append(line.strip())
            continue
        _, sep, name = line.strip().lstrip("|").partition(": ")
        if not sep or not name:
            raise PackageError("apt-cache depends: cannot parse %r" % line)
        last = (name, [])
        group.append(last)
        if not line.startswith(" |"):  # The group's last alternative.
            groups.append(group)
            group = []
    return found


def choose(group):
    """The package apt would install for a group of alternatives.

    The first real one; else the first provider of a virtual one; None
    if no alternative can be installed.
    """
    for name, _ in group:
        if not name.startswith("<"):
            return name
    for _, providers in group:
        if providers:
            return providers[0]
    return None


def closure(packages, depends=None):
    """``packages`` and everything they depend on, first seen first.

    ``depends(names)`` returns :func:`parse_depends`'s mapping; by
    default it runs ``apt-cache depends``.
    """
    depends = depends or (lambda names: parse_depends(_run(
        _DEPENDS + list(names))))
    seen = []
    wanted = list(packages)
    while wanted:
        batch = [name for name in dict.fromkeys(wanted) if name not in seen]
        if not batch:
            break
        seen.extend(batch)
        found = depends(batch)
        missing = [name for name in batch if name not in found]
        if missing:
            raise PackageError("apt knows no package %s" % ", ".join(
                missing))
        wanted = []
        for name in batch:
            for group in found[name]:
                chosen = choose(group)
                if chosen is not None and chosen not in seen:
                    wanted.append(chosen)
    return seen


def versions(packages):
    """``[[name, version, architecture], ...]`` apt would fetch now."""
    text = _run(["apt-cache", "show", "--no-all-versions"] + list(packages))
    found, fields = [], {}
    for line in text.splitlines() + [""]:
        if not line.strip():
            if fields:
                found.append([fields.get("Package"), fields.get("Version"),
                              fields.get("Architecture")])
            fields = {}
            continue
        key, sep, value = line.partition(": ")
        if sep and not line.startswith(" "):
            fields[key] = value.strip()
    return sorted(found)


def download(packages, directory):
    """The ``.deb`` files of ``packages``, fetched into ``directory``."""
    os.makedirs(directory, exist_ok=True)
    _run(["apt-get", "download", "-q", "-o", "APT::Sandbox::User=root"]
         + list(packages), cwd=directory)
    debs = sorted(name for name in os.listdir(directory)
                  if name.endswith(".deb"))
    if len(debs) != len(packages):
        raise PackageError("apt-get download gave %d files for %d "
                           "packages" % (len(debs), len(packages)))
    return [os.path.join(directory, name) for name in debs]


def unpack(debs, tree):
    """Each ``.deb``'s files into ``tree`` (no maintainer scripts)."""
    os.makedirs(tree, exist_ok=True)
    for deb in debs:
        _run(["dpkg-deb", "-x", deb, tree])


def _regular(tree, path):
    full = os.path.join(tree, path)
    return os.path.isfile(full) and not os.path.islink(full)


def _readable_name(path):
    # The guest reads its lists with the shell's read: one path a line.
    return not any(c.isspace() or c == "\\" for c in path)


def boot_files(tree, modules=()):
    """Paths (relative to ``tree``) a boot reads, in the boot's order.

    The programs, then ``modules`` (paths in the tree, load order) with
    kmod's indexes beside them, then the files of the boot directories,
    each directory sorted; every regular file once, symbolic links left
    out (a reader opens their targets, which are listed).
    """
    found = []
    for path in BOOT_PROGRAMS:
        if _regular(tree, path):
            found.append(path)
    module_dirs = []
    for path in modules:
        if _regular(tree, path):
            found.append(path)
            top = os.path.join(*path.split("/")[:3])
            if top not in module_dirs:
                module_dirs.append(top)
    for top in module_dirs:
        found.extend(os.path.join(top, name) for name in MODULE_INDEXES
                     if _regular(tree, os.path.join(top, name)))
    for directory in BOOT_DIRECTORIES:
        start = os.path.join(tree, directory)
        if os.path.islink(start):
            continue  # A merged /usr: the target is listed too.
        for top, dirs, files in os.walk(start):
            dirs[:] = sorted(d for d in dirs
                             if d not in SKIPPED_DIRECTORIES)
            for name in sorted(files):
                path = os.path.relpath(os.path.join(top, name), tree)
                if _regular(tree, path):
                    found.append(path)
    return [path for path in dict.fromkeys(found) if _readable_name(path)]


def split(paths, sizes, readers):
    """``paths`` in ``readers`` contiguous runs of about equal bytes."""
    if readers < 1:
        raise ValueError("readers must be at least 1, not %r" % (readers,))
    total = sum(sizes[path] for path in paths)
    runs = [[] for _ in range(readers)]
    done = 0
    for path in paths:
        index = min(readers - 1, done * readers // max(total, 1))
        runs[index].append(path)
        done += sizes[path]
    return runs
