# SPDX-License-Identifier: Apache-2.0
"""The OSC plugin's parsers and its progress display."""

import io
import re

import pytest
import requests

from gvfs_openstack.migration import states
from gvfs_openstack.osc import client
from gvfs_openstack.osc import progress
from gvfs_openstack.osc.v1 import migration
from gvfs_openstack.osc.v1 import replication
from gvfs_openstack.osc.v1 import site

MIB = 1024 * 1024


def _parse(command_class, argv):
    return command_class(None, None).get_parser("openstack").parse_args(argv)


def test_migrate_takes_images_a_site_and_options():
    args = _parse(migration.Migrate, ["a", "b", "--to", "west",
                                      "--parallel", "2", "--wait"])
    assert (args.images, args.site, args.parallel, args.wait) == \
        (["a", "b"], "west", 2, True)


def test_migrate_can_name_the_base_of_its_deltas():
    assert _parse(migration.Migrate, ["a", "--to", "west"]).base is None
    assert _parse(migration.Migrate, ["a", "--to", "west", "--base",
                                      "golden-1"]).base == "golden-1"


def test_migrate_can_pack_the_images():
    assert _parse(migration.Migrate, ["a", "--to", "west"]).pack is None
    assert _parse(migration.Migrate, ["a", "b", "--to", "west", "--pack",
                                      "tar"]).pack == "tar"


@pytest.mark.parametrize("argv", [["a"], ["a", "--to"],
                                  ["a", "--to", "w", "--parallel", "x"],
                                  ["a", "--to", "w", "--pack", "zip"]])
def test_migrate_refuses_what_it_cannot_run(argv, capsys):
    with pytest.raises(SystemExit):
        _parse(migration.Migrate, argv)


def test_the_commands_log_in_with_keystone():
    # osc_lib's shell makes True the default of every command.
    for command_class in (migration.Migrate, migration.ShowMigration,
                          migration.CancelMigration,
                          migration.ListMigrations, site.ListSites,
                          site.ShowSite):
        assert getattr(command_class, "auth_required", True) is True


def test_list_takes_filters_and_a_page():
    args = _parse(migration.ListMigrations, [
        "--long", "--project", "p1", "--status", "done", "--limit", "5",
        "--marker", "j1"])
    assert (args.long, args.project, args.status, args.limit,
            args.marker, args.all_projects) == (
        True, "p1", "done", 5, "j1", False)
    with pytest.raises(SystemExit):
        _parse(migration.ListMigrations, ["--status", "lost"])


def test_json_output_keeps_the_images_structure():
    job = _job(states.RUNNING, states.TRANSFER, 10 * MIB)
    columns, values = migration._job_row(job)
    images = values[columns.index("images")]
    assert images.machine_readable() == job["images"]
    assert images.human_readable() == "i1 transfer running"


def _reply(status, body):
    reply = requests.Response()
    reply.status_code, reply.reason = status, "Forbidden"
    reply._content = body
    return reply


def test_api_faults_become_their_message():
    assert client._message(_reply(403, b'{"forbidden": {"code": 403, '
                                       b'"message": "Policy says no"}}')) \
        == "Policy says no"
    assert client._message(_reply(403, b"<html>")) == \
        "gvfs-api answered 403 Forbidden"


def _job(state, stage, done, size=100 * MIB, image_state=states.RUNNING,
         error=None):
    return {"id": "j1", "state": state, "images": [{
        "position": 0, "image_id": "i1", "name": "golden", "size": size,
        "stage": stage, "state": image_state, "stage_bytes": done,
        "error": error}]}


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_plain_lines_give_rate_and_eta_and_only_on_change():
    out, clock = io.StringIO(), _Clock()
    view = progress.view(out, tty=False, plain_every=10, clock=clock)
    view.show(_job(states.RUNNING, states.TRANSFER, 10 * MIB))
    clock.now += 2
    view.show(_job(states.RUNNING, states.TRANSFER, 30 * MIB))  # Same stage.
    assert out.getvalue().count("\n") == 2                  # Not printed.
    clock.now += 10
    view.show(_job(states.RUNNING, states.TRANSFER, 50 * MIB))
    lines = out.getvalue().splitlines()
    assert lines[-2].split() == [
        "golden", "DTN->DTN", "50.0%", "50.0/100.0", "MiB", "2.0",
        "MiB/s", "ETA", "0:25"]
    assert lines[-1] == "job j1: running"
    clock.now += 1
    view.show(_job(states.RUNNING, states.REMOTE_COPY, 0))     # New stage.
    assert "remote copy" in out.getvalue().splitlines()[-2]
    assert "[" not in out.getvalue()                       # No bar.


def _visible(text):
    """The terminal's text without its escape sequences."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def test_a_terminal_gets_bars_that_fit_80_columns_and_errors_spelled_out():
    out = io.StringIO()
    view = progress.view(out, tty=True, width=80)
    view.show(_job(states.RUNNING, states.LOCAL_COPY, 25 * MIB))
    view.show(_job(states.RUNNING, states.TRANSFER, 50 * MIB))
    view.show(_job(states.FAILED, states.REMOTE_COPY, 0,
                   image_state=states.FAILED, error="remote copy: checksum"))
    text = out.getvalue()
    assert "\x1b[" in text                       # Redrawn in place.
    shown = _visible(text)
    assert "local copy" in shown and "DTN->DTN" in shown
    assert "25%" in shown and "50%" in shown
    lines = shown.replace("\r", "\n").splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "golden: remote copy: checksum" in lines
    assert lines[-1] == "job j1: failed"


@pytest.mark.parametrize("command_class", [migration.ShowMigration,
                                           migration.CancelMigration])
def test_a_job_command_needs_the_job(command_class):
    assert _parse(command_class, ["j1"]).job == "j1"
    with pytest.raises(SystemExit):
        _parse(command_class, [])


def test_replication_create_takes_one_selector():
    args = _parse(replication.CreateReplication, [
        "--to", "west", "--image", "a", "--image", "b", "--delete-follows",
        "--name", "dr"])
    assert (args.site, args.images, args.tag, args.property,
            args.delete_follows, args.name) == (
        "west", ["a", "b"], None, None, True, "dr")
    args = _parse(replication.CreateReplication,
                  ["--to", "west", "--property", "os_distro=debian"])
    assert (args.property, args.delete_follows) == ("os_distro=debian",
                                                    False)
    for argv in (["--to", "west"], ["--tag", "t"],
                 ["--to", "west", "--tag", "t", "--image", "i"]):
        with pytest.raises(SystemExit):
            _parse(replication.CreateReplication, argv)


@pytest.mark.parametrize("command_class", [
    replication.ShowReplication, replication.PauseReplication,
    replication.ResumeReplication, replication.DeleteReplication])
def test_a_replication_command_names_its_policy(command_class):
    assert _parse(command_class, ["r1"]).policy == "r1"
    with pytest.raises(SystemExit):
        _parse(command_class, [])


def test_a_replication_selector_reads_as_it_was_given():
    assert replication.SelectorColumn(
        {"tag": "golden"}).human_readable() == "tag=golden"
    assert replication.SelectorColumn(
        {"key": "os_distro", "value": "debian"}).human_readable() == \
        "os_distro=debian"
    assert replication.SelectorColumn(
        {"images": ["a", "b"]}).machine_readable() == {"images": ["a", "b"]}
