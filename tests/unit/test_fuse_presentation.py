# SPDX-License-Identifier: Apache-2.0
"""How a mount with ``[mount] group`` shows its files' owners and modes."""

import grp
import os
import stat

import pytest

from gvfs_openstack.fuse import presentation


def _fields(mode, uid=1000, gid=1000):
    return {"st_mode": mode, "st_uid": uid, "st_gid": gid}


@pytest.mark.parametrize("mode, shown", [
    (stat.S_IFREG | 0o644, stat.S_IFREG | 0o660),
    (stat.S_IFREG | 0o600, stat.S_IFREG | 0o660),
    (stat.S_IFREG | 0o400, stat.S_IFREG | 0o440),
    (stat.S_IFREG | 0o066, stat.S_IFREG | 0o000),   # Owner bits only.
    (stat.S_IFDIR | 0o755, stat.S_IFDIR | 0o770),
    (stat.S_IFDIR | 0o1777, stat.S_IFDIR | 0o1770),  # Sticky kept.
    (stat.S_IFREG | 0o4755, stat.S_IFREG | 0o4770),
])
def test_the_group_gets_the_owners_bits_and_others_none(mode, shown):
    fields = presentation.Presentation(uid=7, gid=2010).apply(_fields(mode))
    assert fields == {"st_mode": shown, "st_uid": 7, "st_gid": 2010}


def test_without_a_group_files_are_shown_as_the_server_has_them():
    fields = _fields(stat.S_IFREG | 0o644)
    assert presentation.Presentation().apply(dict(fields)) == fields
    assert presentation.for_group(None) == presentation.Presentation()
    assert presentation.for_group("") == presentation.Presentation()


def test_a_group_is_a_name_or_a_number_and_the_owner_is_this_account():
    name = grp.getgrgid(0).gr_name
    assert presentation.for_group(name) == presentation.Presentation(
        uid=os.geteuid(), gid=0)
    assert presentation.for_group("2010").gid == 2010


def test_a_group_that_does_not_exist_is_a_clear_error():
    with pytest.raises(presentation.PresentationError,
                       match="no-such-group-here: no such group"):
        presentation.for_group("no-such-group-here")
