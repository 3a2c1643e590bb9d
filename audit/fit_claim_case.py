"""Tag keys a claim names in another case than the lines carry them (rule 5: no silent misfit).

A tags claim matches its keys case-sensitively (docs/case.md), but Azure treats tag names
case-insensitively: one scale set's lines may carry ``AKS-Managed-PoolName`` where the others carry
``aks-managed-poolName``. A claim of the one key then leaves the lines of the other to no service
without a word (each VM of a scale set is its own ResourceId, so no resource is claimed in part).
These helpers find such keys: :func:`cased_match` (a tag set the claim would match if its keys were
read in any case) and :func:`cased_hint` (the keys in another case, with the claimed values, for a
claim that matches no line); audit/fit_claims.py words the warnings.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from audit.case import Service
from audit.misfit import LISTED, text
from audit.services import matches

#: why a key in another case is named
CASE_RULE = "tag keys match case-sensitively; Azure reads them case-insensitively"


def _other_cases(key: str, tags: Mapping) -> list[str]:
    """The keys of ``tags`` that differ from ``key`` in case alone."""
    low = key.lower()
    return [str(k) for k in tags if str(k) != key and str(k).lower() == low]


def cased_match(service: Service, tags: Mapping) -> dict[str, str] | None:
    """Where the service's tags claim does not match ``tags`` as written but matches them with some
    claimed keys read in another case: those keys, claimed → carried; else None."""
    swapped = {}
    for key, pattern in service.tags.items():
        if key in tags and matches(pattern, str(tags[key])):
            continue
        carried = next((k for k in _other_cases(key, tags) if matches(pattern, str(tags[k]))), None)
        if carried is None:
            return None
        swapped[key] = carried
    return swapped or None


def cased_hint(key: str, pattern: str, tags: Sequence[Mapping]) -> tuple[str, list[str]]:
    """For one claimed key: the keys in another case that the tag sets carry with a value the
    pattern matches, as a clause of the warning, and as nearest values (``KEY = value``)."""
    found: dict[str, set[str]] = {}
    for t in tags:
        for other in _other_cases(key, t):
            if matches(pattern, str(t[other])):
                found.setdefault(other, set()).add(str(t[other]))
    if not found:
        return "", []
    pairs = [(k, v) for k in sorted(found) for v in sorted(found[k])]
    written = ", ".join(f'{text(k)} = "{text(v)}"' for k, v in pairs[:LISTED])
    return (f"; the lines carry {written}, the key in another case ({CASE_RULE}): claim it as the lines write it",
            [f"{k} = {v}" for k, v in pairs])
