"""A case's ``re:`` patterns searched with a time bound.

Python's ``re`` has none: a pattern with a repeat inside a repeat (``(a+)+$``) can take time
exponential in the length of the text, and one such pattern over a 34-letter pod name held
`costaudit validate` for minutes. Patterns are searched with the ``regex`` module (the syntax of
``re``, its VERSION0) under :data:`PATTERN_SECONDS` a search; past it, one error names the pattern
and the value, exit 1.
"""
from __future__ import annotations

import re

import regex

from schemas.errors import CostauditError

#: the longest one search may take (a case's patterns run over pod, node and label values)
PATTERN_SECONDS = 2.0


class PatternTooSlow(CostauditError):
    """A case pattern outran :data:`PATTERN_SECONDS` on one value."""

    slug = "config"


def search(pattern: str, value: str) -> bool:
    """Whether ``pattern`` (a regular expression, without ``re:``) is found in ``value``."""
    try:
        return regex.search(pattern, value, timeout=PATTERN_SECONDS) is not None
    except TimeoutError:
        raise PatternTooSlow(
            f"re:{pattern} took more than {PATTERN_SECONDS:g} s on {value[:80]!r}: a pattern that repeats a "
            "group which repeats itself (as (a+)+) can take time exponential in the text; write the repeat "
            "once (a+)") from None
    except regex.error:  # a pattern re reads and regex does not: re's own search
        return re.search(pattern, value) is not None
