"""Chunk columns merged into a trace's columns (connectors/profiles/columns.py decodes the chunks).

A trace is read in chunks of decoded events; every ``BLOCK`` chunks are merged into one block
whose integer columns are narrowed to the smallest type that holds them, so a 50-million-event
trace is held as a few hundred compact blocks rather than thousands of wide chunks.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from connectors.profiles.columns import COLUMNS, EXTRA_TYPES, EXTRAS


def concatenate(parts: list[dict[str, np.ndarray]]) -> dict[str, Any]:
    """Join the chunk columns into the trace's (see :func:`merge_parts`), grouping the extras."""
    out: dict[str, Any] = merge_parts(parts)
    for group, fields in EXTRAS.items():
        out[group] = {field: out.pop(f"{group}.{field}") for field in fields}
    return out


FIXED = {"role", "ts", "dur", "kernel.occupancy"}
"""Columns kept in their own type (the others are integers, narrowed by :func:`compact`)."""
NARROW = (np.int8, np.int16, np.int32, np.int64)
BLOCK = 64
"""Chunks merged into one block while a trace is read (few arrays alive, each of them compact)."""


def compact(values: np.ndarray) -> np.ndarray:
    """An integer column in the narrowest signed type that holds its values (ids, streams,
    correlations, row numbers): the same numbers in a quarter or an eighth of the memory."""
    if values.size == 0:
        return values.astype(np.int8)
    low, high = int(values.min()), int(values.max())
    for dtype in NARROW:
        limits = np.iinfo(dtype)
        if limits.min <= low and high <= limits.max:
            return values.astype(dtype, copy=False)
    return values


def merge_parts(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """One part from many (``parts`` is emptied): each column concatenated, one column at a time
    (each chunk's copy is freed as it goes), integer columns narrowed by :func:`compact`."""
    out: dict[str, np.ndarray] = {}
    names = list(COLUMNS) + [f"{group}.{field}" for group, fields in EXTRAS.items() for field in fields]
    for name in names:
        pieces = [part.pop(name) for part in parts]
        dtype = COLUMNS.get(name) or EXTRA_TYPES[name.split(".")[1]]
        if name in FIXED:
            out[name] = np.concatenate(pieces).astype(dtype, copy=False) if pieces else np.zeros(0, dtype)
        else:
            out[name] = compact(np.concatenate(pieces) if pieces else np.zeros(0, dtype))
        del pieces
    parts.clear()
    return out


def accumulate(chunks) -> list[dict[str, np.ndarray]]:
    """The chunk columns of an iterable, merged every BLOCK chunks (chunked accumulation: a
    50-million-event trace is a few hundred compact blocks, not thousands of wide chunks)."""
    blocks: list[dict[str, np.ndarray]] = []
    pending: list[dict[str, np.ndarray]] = []
    for chunk in chunks:
        pending.append(chunk)
        if len(pending) == BLOCK:
            blocks.append(merge_parts(pending))
    if pending:
        blocks.append(merge_parts(pending))
    return blocks
