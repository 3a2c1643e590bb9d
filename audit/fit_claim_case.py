"""Tag keys a claim names in another case than the lines carry them (rule 5: no silent misfit).

A tags claim matches its keys case-sensitively (docs/case.md), as AWS reads tag keys (lines whose
keys differ in case are tagged differently there), but Azure treats tag names case-insensitively:
one scale set's lines may carry ``AKS-Managed-PoolName`` where the others carry
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

#: the ProviderNames (FOCUS; the Azure readers' Microsoft) of a provider that reads tag names case-insensitively
INSENSITIVE = ("Microsoft", "Azure")


def case_rule(providers) -> str:
    """Why a key in another case is named, by the providers of the lines: Azure reads tag names
    case-insensitively (its lines carry one tag, written two ways); AWS and the others read tag keys
    case-sensitively (their lines are simply tagged differently); a provider unknown, neither said."""
    names = sorted({str(p) for p in providers if str(p)})
    azure = any(a.lower() in p.lower() for p in names for a in INSENSITIVE)
    others = [p for p in names if not any(a.lower() in p.lower() for a in INSENSITIVE)]
    said = ["tag keys match case-sensitively"]
    if azure:
        said.append("Azure reads them case-insensitively, so its lines carry one tag written two ways")
    if others:
        said.append(f"{' and '.join(others)} read{'s' if len(others) < 2 else ''} them case-sensitively too, so "
                    f"{'their' if azure else 'the'} lines are tagged differently")
    return "; ".join(said)


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


def cased_hint(key: str, pattern: str, tags: Sequence[Mapping], rule: str) -> tuple[str, list[str]]:
    """For one claimed key: the keys in another case that the tag sets carry with a value the
    pattern matches, as a clause of the warning (``rule``: :func:`case_rule` of the lines), and as
    nearest values (``KEY = value``)."""
    found: dict[str, set[str]] = {}
    for t in tags:
        for other in _other_cases(key, t):
            if matches(pattern, str(t[other])):
                found.setdefault(other, set()).add(str(t[other]))
    if not found:
        return "", []
    pairs = [(k, v) for k in sorted(found) for v in sorted(found[k])]
    written = ", ".join(f'{text(k)} = "{text(v)}"' for k, v in pairs[:LISTED])
    return (f"; the lines carry {written}, the key in another case ({rule}): claim it as the lines write it",
            [f"{k} = {v}" for k, v in pairs])
