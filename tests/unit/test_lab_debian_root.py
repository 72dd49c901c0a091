# SPDX-License-Identifier: Apache-2.0
"""The Debian guest's package set and what its boot reads."""

import hashlib
import os

import pytest

from gvfs_lab import debian_guest
from gvfs_lab import debian_root

DEPENDS = """\
systemd
  PreDepends: libc6
  Depends: libsystemd-shared
 |Depends: default-dbus-system-bus
  Depends: <dbus-system-bus>
    dbus-broker
    dbus
  Depends: lsb-base
    sysvinit-utils
openssh-server
  Depends: <debconf-2.0>
    cdebconf
    debconf
  Depends: <nothing-provides-this>
  Depends: libc6
"""


def test_depends_are_groups_of_alternatives_with_providers():
    found = debian_root.parse_depends(DEPENDS)
    assert found["systemd"] == [
        [("libc6", [])],
        [("libsystemd-shared", [])],
        [("default-dbus-system-bus", []),
         ("<dbus-system-bus>", ["dbus-broker", "dbus"])],
        [("lsb-base", ["sysvinit-utils"])],
    ]
    assert [debian_root.choose(g) for g in found["openssh-server"]] == [
        "cdebconf", None, "libc6"]


def test_a_real_alternative_goes_before_a_virtual_ones_provider():
    group = [("<virtual>", ["provider"]), ("real", [])]
    assert debian_root.choose(group) == "real"
    assert debian_root.choose([("<virtual>", ["provider"])]) == "provider"


@pytest.mark.parametrize("text", ["  Depends: libc6\n", "pkg\n  Depends\n",
                                  "pkg\n  Depends: \n"])
def test_unparsable_depends_output_is_an_error(text):
    with pytest.raises(debian_root.PackageError):
        debian_root.parse_depends(text)


def test_closure_follows_dependencies_once_in_first_seen_order():
    graph = {"a": [[("b", [])], [("c", [])]], "b": [[("c", [])]],
             "c": [[("a", [])], [("<v>", ["d"])]], "d": []}
    asked = []

    def depends(names):
        asked.append(list(names))
        return {name: graph[name] for name in names}

    assert debian_root.closure(["a"], depends) == ["a", "b", "c", "d"]
    assert asked == [["a"], ["b", "c"], ["d"]]  # One call per level.


def test_an_unknown_package_is_a_clear_error():
    with pytest.raises(debian_root.PackageError, match="no package nope"):
        debian_root.closure(["nope"], lambda names: {})


def _tree(tmp_path, files):
    for path, data in files.items():
        full = tmp_path / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(data)
    return str(tmp_path)


def test_boot_files_are_programs_modules_then_boot_directories(tmp_path):
    tree = _tree(tmp_path, {
        "usr/sbin/sshd": b"sshd", "lib/systemd/systemd": b"init",
        "lib/modules/R/kernel/fs/ext4.ko": b"ext4",
        "lib/modules/R/kernel/other.ko": b"unread",
        "lib/modules/R/modules.dep.bin": b"index",
        "lib/x86_64-linux-gnu/libc.so.6": b"libc",
        "lib/x86_64-linux-gnu/perl-base/strict.pm": b"perl",
        "usr/share/doc/systemd/README": b"doc",
        "etc/ssh/sshd_config": b"conf", "etc/with space": b"odd",
        "lib/systemd/system/ssh.service": b"unit"})
    os.symlink("libc.so.6",
               os.path.join(tree, "lib/x86_64-linux-gnu/libc.so"))
    assert debian_root.boot_files(tree, [
        "lib/modules/R/kernel/fs/ext4.ko", "lib/modules/R/gone.ko"]) == [
        "lib/systemd/systemd", "usr/sbin/sshd",
        "lib/modules/R/kernel/fs/ext4.ko", "lib/modules/R/modules.dep.bin",
        "lib/x86_64-linux-gnu/libc.so.6",
        "lib/systemd/system/ssh.service", "etc/ssh/sshd_config"]


def test_readers_get_contiguous_runs_of_about_equal_bytes():
    sizes = {"a": 50, "b": 50, "c": 25, "d": 25, "e": 50}
    runs = debian_root.split(list(sizes), sizes, 2)
    assert runs == [["a", "b"], ["c", "d", "e"]]
    assert debian_root.split(["a"], {"a": 0}, 3) == [["a"], [], []]
    with pytest.raises(ValueError):
        debian_root.split(["a"], sizes, 0)


def test_the_digest_is_what_busybox_prints_for_each_reader():
    files = {"a": b"1", "b": b"22", "c": b"333"}
    lines = "%s  -\n%s  -\n" % (hashlib.sha256(b"122").hexdigest(),
                                hashlib.sha256(b"333").hexdigest())
    assert debian_guest.digest(files.__getitem__, [["a", "b"], ["c"]]) == \
        hashlib.sha256(lines.encode()).hexdigest()
    # Another reader order, another digest.
    assert debian_guest.digest(files.__getitem__, [["c"], ["a", "b"]]) != \
        debian_guest.digest(files.__getitem__, [["a", "b"], ["c"]])


@pytest.mark.parametrize("fields", [{"readers": 0}, {"write_mib": 0},
                                    {"disk_mib": 256}])
def test_bad_debian_specs_are_refused(fields):
    with pytest.raises(debian_guest.guest.GuestBuildError):
        debian_guest.Spec(**fields)
