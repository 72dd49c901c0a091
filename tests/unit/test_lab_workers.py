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


def test_the_longest_modules_go_first_in_the_order_given():
    items = _collected()
    workers.longest_first(items, ("test_c", "test_b"))
    assert _names(items) == ["c1", "c2", "b1", "a1", "a2", "d1"]


def test_without_longest_modules_the_collection_order_stays():
    items = _collected()
    workers.longest_first(items, ())
    assert _names(items) == ["a1", "a2", "b1", "c1", "c2", "d1"]


def test_a_longest_module_not_collected_changes_nothing():
    items = _collected()
    workers.longest_first(items, ("test_gone", "test_d"))
    assert _names(items) == ["d1", "a1", "a2", "b1", "c1", "c2"]


def test_the_module_is_the_last_part_of_its_dotted_name():
    assert workers.module_of(_Item("test_x", "x1")) == "test_x"
