"""A case pattern that takes time exponential in the text is stopped and named, never left to run.

Before (found by a read-only check): ``pod = "re:(a+)+$"`` over a pod named with 34 letters held
`costaudit validate` past two minutes, killed with no result. Now every ``re:`` search of a case runs
under audit.patterns.PATTERN_SECONDS and one that outruns it is one error naming the pattern.
"""
from __future__ import annotations

import time

import pytest

from audit import patterns
from audit.services import matches


def test_the_pattern_that_held_validate_now_answers_at_once():
    started = time.monotonic()
    assert matches("re:(a+)+$", "a" * 34 + "-") is False   # the regex module does not backtrack on it
    assert time.monotonic() - started < 1


def test_a_catastrophic_pattern_is_stopped_and_named(monkeypatch):
    monkeypatch.setattr(patterns, "PATTERN_SECONDS", 0.2)
    started = time.monotonic()
    with pytest.raises(patterns.PatternTooSlow) as slow:
        matches("re:(a|aa)+$", "a" * 34 + "-")   # exponential in the regex module too
    assert time.monotonic() - started < 10
    assert "re:(a|aa)+$ took more than 0.2 s on 'aaaa" in str(slow.value) and slow.value.slug == "config"


@pytest.mark.parametrize(("pattern", "value", "found"), [
    ("re:^chat-", "chat-7f9c", True), ("re:^(chat|embed)-[a-z0-9]+$", "embed-x1", True),
    ("re:[a-z]+(-[a-z0-9]+)*$", "vllm-chat-0", True), ("re:^a+-$", "a" * 34 + "-", True),
    ("re:^chat-", "embed-1", False), ("chat-1", "chat-1", True), ("chat-1", "chat-10", False),
])
def test_patterns_still_match_as_re_does(pattern, value, found):
    assert matches(pattern, value) is found
