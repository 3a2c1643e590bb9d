"""What a misfit is, and the words misfits are written in (audit/fit.py, audit/fit_claims.py).

A :class:`Misfit` names one piece of the case that matches nothing in the data, with the nearest
values the data does contain; a :class:`Fit` holds them all. Values from the data are untrusted:
each is cut to a readable length with control characters escaped (the value's repr, its quotes off).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Iterable

from audit.patterns import search

#: values listed after "present:" (nearest first), then how many more
LISTED = 5
#: characters a value may show
VALUE_CHARS = 60
#: characters that make a plain matcher value look like a regular expression written without ``re:``
REGEX_CHARACTERS = set(".*+?[](){}|^$\\")
PLURAL = {"namespace": "namespaces", "pod": "pods", "container": "containers", "model_name": "model names"}
MATCH_KEYS = ("namespace", "pod", "container", "model_name")


@dataclass(frozen=True)
class Misfit:
    """One piece of the case that matches nothing in the data."""

    kind: str
    subject: str                 # what in the case: "service ranker", "[scope] tag app", "[nodes] n1"
    message: str                 # the whole sentence, with the nearest values and a suggestion
    nearest: tuple[str, ...]     # the nearest values the data does contain, nearest first
    severity: str = "warning"    # "warning" (the audit runs, the note says so) or "error" (exit 1)


@dataclass(frozen=True)
class Fit:
    """Every misfit of a case, in the order the case declares its pieces."""

    misfits: tuple[Misfit, ...] = ()
    undeclared: tuple[str, ...] = ()  # the pods no service matches (namespace/pod), by name

    @property
    def errors(self) -> tuple[Misfit, ...]:
        return tuple(m for m in self.misfits if m.severity == "error")

    @property
    def warnings(self) -> tuple[Misfit, ...]:
        return tuple(m for m in self.misfits if m.severity == "warning")


# ---- values and suggestions ---------------------------------------------------------------------

def text(value: object, limit: int = VALUE_CHARS) -> str:
    """A value from the data or the case, control characters escaped and cut to ``limit``: a long one
    keeps its start and its end around an ellipsis, since ids differ at the end (an ARM id's
    ``…/virtualMachines/7``, an ARN's resource)."""
    escaped = repr(str(value))[1:-1]  # a str's repr is always quoted: its inside, control characters escaped
    if len(escaped) <= limit:
        return escaped
    head = limit * 2 // 5
    return escaped[:head] + "…" + escaped[len(escaped) - (limit - head - 1):]


def nearest(wanted: str, values: Iterable[str]) -> list[str]:
    """Distinct values, nearest to ``wanted`` first (difflib ratio), then by name."""
    distinct = sorted({str(v) for v in values if str(v) != ""})
    probe = wanted[3:] if wanted.startswith("re:") else wanted
    ratio = {v: difflib.SequenceMatcher(None, probe.lower(), v.lower()).ratio() for v in distinct}
    return sorted(distinct, key=lambda v: (-ratio[v], v))


def listing(values: list[str]) -> str:
    """The first values, cut to readable length, with how many more."""
    shown_values = ", ".join(text(v) for v in values[:LISTED])
    more = len(values) - LISTED
    return shown_values + (f" … ({more} more)" if more > 0 else "") if values else "none"


def suggestion(pattern: str, values: list[str]) -> str | None:
    """A matcher value that would match some of ``values``: the ``re:`` form of a plain value written
    with regular-expression characters (``ranker-.*`` → ``re:^ranker-``), else the nearest value."""
    if not pattern.startswith("re:") and REGEX_CHARACTERS & set(pattern):
        for candidate in _regex_forms(pattern):
            if any(_search(candidate[3:], v) for v in values):
                return candidate
    close = difflib.get_close_matches(pattern[3:] if pattern.startswith("re:") else pattern, values, n=1,
                                      cutoff=0.6)
    return close[0] if close else None


def _regex_forms(pattern: str) -> list[str]:
    literal = re.split(r"[.*+?\[\](){}|^$\\]", pattern.lstrip("^"), maxsplit=1)[0]
    forms = [f"re:^{literal}"] if literal else []
    return forms + [f"re:{pattern}"]


def _search(regex: str, value: str) -> bool:
    try:
        return search(regex, value)
    except (re.error, RecursionError, OverflowError):
        return False


def _matches(pattern: str, value: str) -> bool:
    return _search(pattern[3:], value) if pattern.startswith("re:") else pattern == value


def _written(key: str, pattern: str) -> str:
    return f'{key} = "{text(pattern)}"'


