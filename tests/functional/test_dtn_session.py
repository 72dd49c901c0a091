# SPDX-License-Identifier: Apache-2.0
"""The conductor's SSH session to a DTN, against a real sshd.

What the remote copy and the delta transfer rely on: commands run and
report failures, a socket that does not sit on small messages, a job
directory made as GridFTP would make it, and clear errors for a DTN
that does not answer or whose host key is not known.
"""

import os
import pwd
import socket
import types

import pytest

from gvfs_lab import process
from gvfs_lab import sshd as sshd_lab
from gvfs_openstack import exceptions
from gvfs_openstack.migration import dtnssh


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    server = sshd_lab.Sshd(str(tmp_path_factory.mktemp("sshd")))
    yield server
    server.stop()


def _site(sshd, **changes):
    return types.SimpleNamespace(**dict({
        "name": "west", "ssh_host": "127.0.0.1", "ssh_port": sshd.port,
        "ssh_user": sshd.user, "ssh_key_file": sshd.key,
        "ssh_known_hosts": sshd.known_hosts, "dtn_export": "/"},
        **changes))


def test_a_session_runs_commands_on_a_socket_without_nagle(sshd):
    with dtnssh.connect(_site(sshd), "image", "a stage") as session:
        sock = session.client.get_transport().sock
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        assert session.run(["echo", "made", "here"]) == "made here\n"
        with pytest.raises(OSError, match="sh on the DTN failed "
                           r"\(3\): to stderr"):
            session.run(["sh", "-c", "echo to stderr >&2; exit 3"])


def test_a_job_directory_is_made_as_its_parent(sshd, tmp_path):
    parent = tmp_path / "staging"
    parent.mkdir()
    os.chmod(parent, 0o750)
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(parent, nobody.pw_uid, nobody.pw_gid)
    job = parent / "job"
    with dtnssh.connect(_site(sshd), "image", "a stage") as session:
        session.make_dir_as_parent(str(job))
        session.make_dir_as_parent(str(job))    # There: nothing to do.
    made, like = os.stat(job), os.stat(parent)
    assert (made.st_uid, made.st_gid, made.st_mode) == (
        like.st_uid, like.st_gid, like.st_mode)


def test_a_dtn_that_does_not_answer_is_a_transient_failure(sshd):
    with pytest.raises(exceptions.StageFailed,
                       match="cannot reach the DTN of site west") as e:
        dtnssh.open_session(_site(sshd, ssh_port=process.free_port()),
                            "image", "a stage")
    assert e.value.transient


def test_an_unknown_host_key_is_refused_for_good(sshd, tmp_path):
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    with pytest.raises(exceptions.StageFailed,
                       match="is not in the known hosts file") as e:
        dtnssh.open_session(_site(sshd, ssh_known_hosts=str(known_hosts)),
                            "image", "a stage")
    assert not e.value.transient


def test_a_command_is_talked_to_as_it_runs(sshd):
    with dtnssh.connect(_site(sshd), "image", "a stage") as session:
        command = session.start(["sh", "-c", "echo ready; read x; "
                                 "echo got $x"])
        assert command.readline() == "ready\n"
        assert command.finish("the line") == "got the line\n"
        # Told nothing more is coming, a command reading on ends.
        command = session.start(["sh", "-c", "echo ready; read x || "
                                 "echo no line > /dev/stderr; exit 0"])
        assert command.readline() == "ready\n"
        command.abandon()
        command.abandon()                   # Ended: nothing to do.
        # The session is still good for the next command.
        assert session.run(["echo", "still"]) == "still\n"


def test_a_command_that_ends_without_a_word_fails_with_its_status(sshd):
    with dtnssh.connect(_site(sshd), "image", "a stage") as session:
        command = session.start(["sh", "-c", "echo no base >&2; exit 4"])
        with pytest.raises(dtnssh.CommandFailed,
                           match=r"sh on the DTN failed \(4\): no base") \
                as e:
            command.readline()
        assert e.value.status == 4
        command.abandon()                   # Ended already: no EOF sent.
        assert session.run(["echo", "still"]) == "still\n"
