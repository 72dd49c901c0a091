# SPDX-License-Identifier: Apache-2.0
"""The order in which pytest-xdist workers get the functional modules."""

import types

from gvfs_lab import workers


class _Item:
    """What longest_first reads of a collected test."""

    def __init__(self, module, name):
        self.module = types.SimpleNamespace(
            __name__="tests.functional." + module)
        self.name = name


def _collected():
    return [_Item("test_a", "a1"), _Item("test_a", "a2"),
            _Item("test_b", "b1"),
            _Item("test_c", "c1"), _Item("test_c", "c2"),
            _Item("test_d", "d1")]


def _names(items):
    return [item.name for item in items]


def _schedule(items, seconds, shared=None):
    groups = workers.schedule(items, seconds, shared or {})
    return _names(items), [groups[item] for item in items]


def test_the_longest_modules_go_first_by_their_seconds():
    items = _collected()
    names, groups = _schedule(items, {"test_c": 90, "test_b": 60,
                                      "test_a": 40, "test_d": 35})
    assert names == ["c1", "c2", "b1", "a1", "a2", "d1"]
    assert groups == ["test_c", "test_c", "test_b", "test_a", "test_a",
                      "test_d"]


def test_unmeasured_modules_keep_the_collection_order_among_equals():
    items = _collected()
    names, _ = _schedule(items, {})
    assert names == ["a1", "a2", "b1", "c1", "c2", "d1"]
    # A measured module shorter than an unmeasured one goes after it.
    items = _collected()
    names, _ = _schedule(items, {"test_d": workers.UNMEASURED + 1,
                                 "test_a": 1})
    assert names == ["d1", "b1", "c1", "c2", "a1", "a2"]


def test_modules_sharing_a_session_fixture_are_one_unit():
    """One group, one worker: the DR lab is built once.

    The group's length is the sum of its modules', and its modules stay
    whole.
    """
    items = _collected()
    names, groups = _schedule(items, {"test_c": 90, "test_a": 50,
                                      "test_d": 50, "test_b": 10},
                              {"dr": ("test_a", "test_d")})
    assert names == ["a1", "a2", "d1", "c1", "c2", "b1"]
    assert groups == ["dr", "dr", "dr", "test_c", "test_c", "test_b"]


def test_the_module_is_the_last_part_of_its_dotted_name():
    assert workers.module_of(_Item("test_x", "x1")) == "test_x"
