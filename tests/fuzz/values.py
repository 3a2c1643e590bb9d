"""JSON inputs for the fuzz suite: a seed document with some of its values replaced by hostile
JSON (wrong types, huge or non-finite numbers, deep nesting, long strings)."""
from __future__ import annotations

import json

from hypothesis import strategies as st

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e308, -1e308, 5e-324, 0.0, -0.0, 2 ** 63, -2 ** 63 - 1, 1e30]),
    st.text(max_size=16), st.sampled_from(["", "NaN", "+Inf", "-Inf", "1e400", "soon", "a" * 2000]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                      max_leaves=8)


DEEP = "\x00deep:"
"""A string standing for a list nested N levels, spelt out after serialisation (json.dumps itself
would recurse that deep)."""


def deep(depth: int) -> str:
    """The stand-in of a list nested ``depth`` levels."""
    return f"{DEEP}{depth}"


def _spell(text: str) -> str:
    """Replace every deep stand-in by its nesting."""
    marker = json.dumps(DEEP)[:-1]
    while marker in text:
        start = text.index(marker)
        end = text.index('"', start + len(marker))
        depth = int(text[start + len(marker):end])
        text = text[:start] + "[" * depth + "]" * depth + text[end + 1:]
    return text


def _paths(node, prefix=()) -> list[tuple]:
    """Every path to a value inside a JSON document."""
    out = [prefix]
    if isinstance(node, dict):
        for key, child in node.items():
            out += _paths(child, prefix + (key,))
    elif isinstance(node, list):
        for i, child in enumerate(node[:6]):
            out += _paths(child, prefix + (i,))
    return out


def _replace(node, path, value):
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(node, dict):
        return {**node, head: _replace(node[head], rest, value)}
    copy = list(node)
    copy[head] = _replace(node[head], rest, value)
    return copy


@st.composite
def json_mutated(draw, seed, max_ops: int = 4) -> bytes:
    """``seed`` with a few values (or whole subtrees) replaced, serialised as JSON bytes."""
    doc = seed
    for _ in range(draw(st.integers(1, max_ops))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        value = draw(st.one_of(VALUES, st.integers(100, 3000).map(deep)))
        doc = _replace(doc, path, value)
    return _spell(json.dumps(doc, allow_nan=draw(st.booleans()))).encode()
