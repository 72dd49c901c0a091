# SPDX-License-Identifier: Apache-2.0
"""The conductor's verified callers: what a token says, kept briefly.

Keystone's validation itself (the request and its answers) runs against
the lab's real Keystone in tests/functional/test_gvfs_api.py; here the
answers are given, to show what is believed and for how long.
"""

import pytest

from gvfs_openstack.conductor import callers
from gvfs_openstack import exceptions

ALPHA = {"user_id": "u1", "project_id": "p1", "auth_token": "tok-alpha"}


class Clock:
    now = 1000.0

    def __call__(self):
        return self.now


def keystone(tokens):
    """A validator answering from ``tokens``; counts its questions."""
    asked = []

    def validate(token):
        asked.append(token)
        if token not in tokens:
            raise exceptions.CallerRefused(reason="its token is not valid")
        return tokens[token]
    return validate, asked


def test_a_context_is_believed_only_as_far_as_its_token():
    clock = Clock()
    validate, asked = keystone({"tok-alpha": (callers.Caller(
        "u1", "p1", frozenset({"member"})), clock.now + 3600)})
    check = callers.Callers(validate, keep=60, clock=clock)
    caller = check.of(ALPHA)
    assert (caller.user_id, caller.project_id, caller.admin) == \
        ("u1", "p1", False)
    # Another project or user named beside alpha's token: refused.
    for forged in (dict(ALPHA, project_id="p2"), dict(ALPHA, user_id="u2"),
                   dict(ALPHA, user_id=None, user="u2")):
        with pytest.raises(exceptions.CallerRefused,
                           match="another user's or project's"):
            check.of(forged)
    for tokenless in ({"user_id": "u1", "project_id": "p1"},
                      dict(ALPHA, auth_token=""),
                      dict(ALPHA, auth_token=["tok-alpha"])):
        with pytest.raises(exceptions.CallerRefused, match="no token"):
            check.of(tokenless)
    with pytest.raises(exceptions.CallerRefused, match="not valid"):
        check.of(dict(ALPHA, auth_token="made-up"))
    assert asked == ["tok-alpha", "made-up"]


def test_a_token_is_asked_again_after_a_minute_or_its_expiry():
    clock = Clock()
    tokens = {"tok-alpha": (callers.Caller("u1", "p1", frozenset()),
                            clock.now + 90)}
    validate, asked = keystone(tokens)
    check = callers.Callers(validate, keep=60, clock=clock)
    check.of(ALPHA)
    clock.now += 59
    check.of(ALPHA)
    assert len(asked) == 1
    clock.now += 2      # Past the minute: asked again, and believed.
    check.of(ALPHA)
    assert len(asked) == 2
    del tokens["tok-alpha"]      # Revoked meanwhile.
    clock.now += 31     # Past its expiry (90 s), before another minute.
    with pytest.raises(exceptions.CallerRefused):
        check.of(ALPHA)


def test_the_remembered_tokens_are_bounded():
    clock = Clock()
    validate, asked = keystone({"t%d" % i: (callers.Caller(
        "u", "p", frozenset()), clock.now + 3600) for i in range(10)})
    check = callers.Callers(validate, size=4, clock=clock)
    for i in range(10):
        check.of({"user_id": "u", "project_id": "p", "auth_token": "t%d" % i})
    assert len(check._known) == 4


def test_a_keystone_token_body_names_the_caller():
    caller, expiry = callers.from_token({
        "user": {"id": "u1"}, "project": {"id": "p1"},
        "roles": [{"id": "r1", "name": "member"},
                  {"id": "r2", "name": "admin"}],
        "expires_at": "2026-11-28T10:00:00.000000Z"})
    assert caller == callers.Caller("u1", "p1",
                                    frozenset({"member", "admin"}))
    assert caller.admin and caller.may_see("p9")
    assert expiry == 1795860000.0
    for body in ({"user": {"id": "u1"}, "expires_at": "2026-11-28T10:00Z"},
                 {"user": {"id": "u1"}, "project": {"id": "p1"}},
                 {"user": {"id": "u1"}, "project": {"id": "p1"},
                  "expires_at": "soon"}):
        with pytest.raises(exceptions.CallerRefused):
            callers.from_token(body)
