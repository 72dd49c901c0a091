# SPDX-License-Identifier: Apache-2.0
"""SIGHUP of ``gvfs-proxy mount``: the log re-opened after logrotate.

logrotate moves the log away and sends SIGHUP (``postrotate``); the
mount must write its next line to a new file at the log's path, not to
the moved one, and go on serving (the functional test sends the signal
to a real mount).
"""

import logging

from gvfs_openstack.cmd import proxy as proxy_cmd


def test_the_next_line_goes_to_a_new_file_at_the_logs_path(tmp_path):
    path = tmp_path / "gvfs-mount.log"
    handler = logging.FileHandler(str(path))
    root = logging.getLogger()
    root.addHandler(handler)
    log = logging.getLogger("gvfs-test-mount")
    log.setLevel(logging.INFO)
    try:
        log.info("before the rotation")
        handler.flush()
        path.rename(tmp_path / "gvfs-mount.log.1")
        proxy_cmd.reopen_log_files()
        log.info("after the rotation")
        handler.flush()
    finally:
        root.removeHandler(handler)
        handler.close()
    assert "before the rotation" in (tmp_path / "gvfs-mount.log.1").read_text()
    assert "after the rotation" not in \
        (tmp_path / "gvfs-mount.log.1").read_text()
    assert "after the rotation" in path.read_text()
