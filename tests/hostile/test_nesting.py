"""JSON nested past what a decoder recurses into: a Kineto event's args 1,000 levels deep, a FOCUS
Tags cell 5,000 levels deep.

Before: RecursionError with a traceback in `run`, `trace` and `validate`. Now a named error.
"""
from __future__ import annotations

import json

import pytest

from connectors.billing.focus_lines import canonical_object, canonical_tags
from connectors.bounds import MAX_DEPTH, deeper_than
from connectors.errors import InputError
from tests.hostile.harness import (
    assert_named_error,
    costaudit,
    focus_row,
    profile,
    write_case,
    write_focus,
)


def deep_trace(path, depth: int = 1000):
    args = "[" * depth + "]" * depth
    path.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, '
                    '"dur": 2, "args": {"device": 0, "deep": ' + args + '}}]}')
    return path


@pytest.mark.parametrize("command", ["validate", "run", "trace"])
def test_kineto_args_nested_1000_deep(tmp_path, command):
    deep_trace(tmp_path / "deep.json")
    if command == "trace":
        outcome = costaudit("trace", "deep.json", cwd=tmp_path)
        assert_named_error(outcome, "deep.json", "nested too deeply")
        return
    case = write_case(tmp_path / "case", extra=profile("kineto", "../deep.json"))
    outcome = costaudit(command, case, *(["--out", tmp_path / "out"] if command == "run" else []), cwd=tmp_path)
    assert_named_error(outcome, tmp_path / "deep.json", "nested too deeply")


def test_kineto_nesting_within_the_limit_is_read(tmp_path):
    from connectors.profiles.events import read_trace

    trace = read_trace(deep_trace(tmp_path / "ok.json", depth=100))
    assert trace.rows == 1


def nested(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


@pytest.mark.parametrize("command", ["validate", "run"])
def test_tags_nested_5000_deep(tmp_path, command):
    write_focus(tmp_path / "tags.csv", focus_row(tags='"' + nested(5000).replace('"', '""') + '"'))
    case = write_case(tmp_path / "case", billing="../tags.csv")
    outcome = costaudit(command, case, *(["--out", tmp_path / "out"] if command == "run" else []), cwd=tmp_path)
    assert_named_error(outcome, tmp_path / "tags.csv", "row 1", "column Tags", "nested too deeply")
    assert len(outcome.stderr) < 600


def test_tags_depth_bound():
    assert canonical_object(nested(MAX_DEPTH)) is not None
    assert canonical_object(nested(MAX_DEPTH + 1)) is None
    with pytest.raises(InputError, match="more than 64 levels"):
        canonical_tags([nested(MAX_DEPTH + 1)], [3], "x.csv")
    assert not deeper_than(json.loads(nested(MAX_DEPTH)))
