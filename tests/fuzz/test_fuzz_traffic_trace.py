"""Fuzz the collector's Azure LLM trace reader (collector/trace_file.py), seeded from the shared
real traces' first rows, and the replay that slices and scales what it reads.

Property: the reader returns rows sorted by arrival with counts in range, or raises one
``TraceFileError`` naming the file, a row (≥ 1) and a column of the format (or none), in a message
of readable length; never another exception, and memory stays under the harness bound. The
collector may not import ``connectors`` (tests/test_floors.py), so its error is its own class with
the same shape as ``InputError``, and this test checks it rather than the harness's ``check``.
"""
from __future__ import annotations

import psutil
from hypothesis import given
from hypothesis import strategies as st

from collector.replay import TraceReplay
from collector.trace_file import COLUMNS, MAX_TOKENS, TraceFileError, read_azure_trace
from schemas.errors import UsageError
from tests.fuzz.harness import FUZZ, MESSAGE_LIMIT, RSS_BOUND_MB, mutated, mutated_cells, scratch
from tests.paths import DATA

TRAFFIC = DATA / "traffic"
SEEDS = {name: (TRAFFIC / f"AzureLLMInferenceTrace_{name}.csv").read_bytes().splitlines(keepends=True)[:16]
         for name in ("code", "conv")}
TEXTS = {name: b"".join(lines) for name, lines in SEEDS.items()}
HEADER = list(COLUMNS)
ROWS = {name: [line.decode().strip().split(",") for line in lines[1:]] for name, lines in SEEDS.items()}


def holds(path) -> None:
    """The property, on one file."""
    try:
        rows = read_azure_trace(path)
    except TraceFileError as error:
        assert error.path == str(path) and str(error).startswith(str(path))
        assert error.row is None or error.row >= 1
        assert error.column is None or error.column in COLUMNS
        assert len(str(error)) < MESSAGE_LIMIT, f"message of {len(str(error))} characters: {error!s:.300}"
    else:
        assert rows and rows[0].offset == 0.0
        assert all(a.offset <= b.offset for a, b in zip(rows, rows[1:]))
        assert all(1 <= r.prompt_tokens <= MAX_TOKENS and 0 <= r.generated_tokens <= MAX_TOKENS for r in rows)
    rss = psutil.Process().memory_info().rss >> 20
    assert rss < RSS_BOUND_MB, f"{rss} MB resident"


@FUZZ
@given(data=st.one_of(mutated(TEXTS["code"]), mutated(TEXTS["conv"]),
                      mutated_cells(HEADER, ROWS["code"]), mutated_cells(HEADER, ROWS["conv"])))
def test_trace_reader(data):
    with scratch() as folder:
        path = folder / "trace.csv"
        path.write_bytes(data)
        holds(path)


@FUZZ
@given(data=mutated_cells(HEADER, ROWS["conv"]), start=st.floats(-1, 40, allow_nan=False),
       duration=st.one_of(st.none(), st.floats(-1, 40, allow_nan=False)),
       scale=st.floats(-1, 10, allow_nan=False))
def test_replay_slice(data, start, duration, scale):
    """Slicing and scaling a (damaged) trace: rows inside the slice, or a UsageError / TraceFileError."""
    with scratch() as folder:
        path = folder / "trace.csv"
        path.write_bytes(data)
        try:
            rows = TraceReplay(path, start, duration, scale).rows()
        except (UsageError, TraceFileError) as error:
            assert len(str(error)) < MESSAGE_LIMIT
            return
        end = float("inf") if duration is None else duration * scale
        assert rows and all(0 <= r.offset <= end for r in rows)
