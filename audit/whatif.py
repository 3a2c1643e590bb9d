"""What-if: the audited case and a copy of it under changed settings, audited on one reading of the sources.

``costaudit whatif CASE --set KEY=VALUE …`` (audit/cli/whatif.py) calls :func:`run_whatif`. Each
``--set`` is a TOML key (dotted: ``target_utilisation``, ``services.chat.min_replicas``,
``options.right_size_replicas.recoverable.expected``, ``allocation.key``) and a TOML literal (``2``,
``0.7``, ``"30m"``). The key is checked here (an unknown one names the nearest valid key); the value is
written into the case's TOML document and checked by the case's own validation
(:func:`audit.case.load_case`), ``[[options]]`` figures included (a band set alone is checked with
the bands it joins). A key that changes what is read (a source, the window, the step, the
currency) is refused: what-if changes settings, not sources. The sources are then read once and both
cases audited on them (:func:`audit.pipeline.audit_on_one_reading`); the comparison is
audit/whatif_plan.py.
"""
from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from audit.case import BAND_KEYS, CASE_KEYS, OPTION_BANDS, OPTION_KEYS, SCOPE_KEYS, SOURCE_KINDS, Case, load_case
from audit.case_services import ALLOCATION_KEYS, SERVICE_KEYS
from audit.catalogue import catalogue, catalogue_ids
from audit.errors import ConfigError
from schemas.errors import UsageError

#: [case] keys that change what the connectors read (audit/collect.py's ReadContext)
READ_KEYS = {"window", "step", "currency"}
BANDS = OPTION_BANDS
NOT_SOURCES = ("what-if changes settings, not sources: {what}; edit the case file and run "
               "`costaudit run` to audit other sources")


@dataclass(frozen=True)
class Change:
    """One ``--set``: the key as given, where it lies in the case document, its value before (None:
    not in the case file, the default applies) and after."""

    key: str
    path: tuple[str, ...]
    before: Any
    after: Any


@dataclass(frozen=True)
class WhatIf:
    """The audited case and the changed one, each as its audit.json document, and the changes."""

    changes: tuple[Change, ...]
    case: Case
    changed: Case
    before: dict
    after: dict


def run_whatif(case: Case, settings: Sequence[str], progress: Callable | None = None) -> WhatIf:
    """Apply ``settings`` (``KEY=VALUE`` texts) to ``case``, read its sources once and audit both."""
    changed, changes = changed_case(case, settings)   # every bad setting before anything is read
    from audit.audit_json import to_dict
    from audit.pipeline import audit_on_one_reading

    before, after = audit_on_one_reading([case, changed], progress, blames=[None, blamed(case, changes)])
    return WhatIf(tuple(changes), case, changed, to_dict(before), to_dict(after))


def blamed(case: Case, changes: Sequence[Change]) -> Callable:
    """Where a fit error of the changed case lies: the ``--set`` on its service (every ``--set``
    when none is), on the case file. The case file alone was named before, though the value the
    error quotes ("embedding") came from the --set and the file holds another ("embed")."""
    def where(misfit) -> str:
        named = [c.key for c in changes if len(c.path) > 1 and c.path[0] == "services"
                 and misfit.subject == f"service {c.path[1]}"] or [c.key for c in changes]
        return ", ".join(f"--set {key}" for key in dict.fromkeys(named)) + f" on {case.path}"
    return where


def changed_case(case: Case, settings: Sequence[str]) -> tuple[Case, list[Change]]:
    """The case with every setting applied and validated, and the changes; every bad setting is
    reported together (a UsageError naming each), as is every problem the case's validation finds."""
    if not settings:
        raise UsageError("give at least one --set KEY=VALUE (e.g. --set target_utilisation=0.7)")
    changes: list[Change] = []

    def edit(raw: dict) -> None:
        problems: list[str] = []
        for text in settings:
            try:
                changes.append(apply(raw, parse_setting(text)))
            except UsageError as exc:
                problems.append(str(exc))
        if problems:
            raise UsageError("\n".join(problems))

    try:
        changed = load_case(case.path, edit)
    except ConfigError as exc:
        given = ", ".join(f"--set {s}" for s in settings)
        raise ConfigError(exc.path, [f"with {given}: {p}" for p in exc.problems]) from None
    _same_reading(case, changed)
    return changed, changes


def parse_setting(text: str) -> tuple[tuple[str, ...], Any, str]:
    """``KEY=VALUE`` → (the key's path, the TOML value, the key as given)."""
    key, sep, literal = text.partition("=")
    key, literal = key.strip(), literal.strip()
    if not sep or not key or not literal:
        raise UsageError(f"--set {text!r}: expected KEY=VALUE, e.g. services.chat.min_replicas=2")
    try:
        path = _key_path(tomllib.loads(f"{key} = 0"))
    except tomllib.TOMLDecodeError:
        raise UsageError(f"--set {text!r}: {key!r} is not a TOML key (dotted, e.g. services.chat.min_replicas)") from None
    try:
        parsed = tomllib.loads(f"v = {literal}")
    except (tomllib.TOMLDecodeError, ValueError):  # ValueError: an integer of more than 4,300 digits
        parsed = {}
    if set(parsed) != {"v"}:  # nothing, or more than one value (a newline and another key or table)
        raise UsageError(f"--set {key}: {literal!r} is not a TOML value (one value: numbers as 0.7, strings in quotes: "
                         "\"30m\", lists as [\"a\"])")
    return path, parsed["v"], key


def _key_path(table: dict) -> tuple[str, ...]:
    path: list[str] = []
    node: Any = table
    while isinstance(node, dict):
        (name, node), = node.items()
        path.append(name)
    return tuple(path)


def apply(raw: dict, setting: tuple[tuple[str, ...], Any, str]) -> Change:
    """Write one setting into the case document; refuse a source or a key that changes what is read,
    and name the nearest valid key for an unknown one."""
    path, value, key = setting
    if path[0] in CASE_KEYS:
        path = ("case", *path)
    head = path[0]
    if head in SOURCE_KINDS:
        raise UsageError(f"--set {key}: " + NOT_SOURCES.format(what=f"[[{head}]] is a source"))
    if head == "case" and len(path) == 2 and path[1] in READ_KEYS:
        raise UsageError(f"--set {key}: " + NOT_SOURCES.format(
            what=f"[case].{path[1]} changes what is read from the sources"))
    if not _valid(raw, path):
        raise UsageError(f"--set {key}: unknown key{_nearest('.'.join(path), raw)}")
    if head == "options":
        return _set_option(raw, path, value, key)
    table = raw
    for name in path[:-1]:
        table = table.setdefault(name, {})
        if not isinstance(table, dict):
            raise UsageError(f"--set {key}: {name!r} is not a table in the case file")
    before = table.get(path[-1])
    table[path[-1]] = value
    return Change(key, path, before, value)


def _valid(raw: dict, path: tuple[str, ...]) -> bool:
    """Whether ``path`` names a setting --set may change (after a bare [case] key got its ``case``)."""
    head, rest = path[0], path[1:]
    services = _services(raw)
    checks = {
        "case": lambda: len(rest) == 1 and rest[0] in CASE_KEYS - READ_KEYS,
        "services": lambda: (len(rest) == 2 and rest[0] in services and rest[1] in SERVICE_KEYS)
        or (len(rest) == 3 and rest[0] in services and rest[1] == "tags"),
        "options": lambda: len(rest) >= 2 and rest[0] in catalogue_ids() and _option_key(rest[1:]),
        "allocation": lambda: rest == ("key",) or (len(rest) == 2 and rest[0] == "weights"),
        "scope": lambda: (len(rest) == 1 and rest[0] in SCOPE_KEYS - {"tags"})
        or (len(rest) == 2 and rest[0] == "tags"),
        "nodes": lambda: len(rest) == 1,
    }
    return head in checks and bool(checks[head]())


def _services(raw: dict) -> dict:
    found = raw.get("services")
    return found if isinstance(found, dict) else {}


def _option_key(rest: tuple[str, ...]) -> bool:
    if len(rest) == 1:
        return rest[0] in OPTION_KEYS - {"id"}
    return len(rest) == 2 and rest[0] in BAND_KEYS and rest[1] in BANDS


def valid_keys(raw: dict) -> list[str]:
    """Every key --set takes on this case, spelled out (``tags``, ``weights`` and ``nodes`` entries
    by their table only)."""
    services = _services(raw)
    keys = sorted(CASE_KEYS - READ_KEYS)
    keys += [f"services.{s}.{k}" for s in services for k in sorted(SERVICE_KEYS)]
    keys += [f"options.{o}.{k}" for o in catalogue_ids() for k in sorted(OPTION_KEYS - {"id"} - set(BAND_KEYS))]
    keys += [f"options.{o}.{k}.{b}" for o in catalogue_ids() for k in BAND_KEYS for b in BANDS]
    keys += [f"allocation.{k}" for k in sorted(ALLOCATION_KEYS)] + [f"scope.{k}" for k in sorted(SCOPE_KEYS)]
    return keys + ["nodes"]


def _nearest(key: str, raw: dict) -> str:
    near = difflib.get_close_matches(key, valid_keys(raw), n=1, cutoff=0.6)
    if near:
        return f"; did you mean {near[0]!r}?"
    return ("; what-if takes [case] settings (target_utilisation, loaded_rate, tolerance), "
            "services.NAME.KEY, options.ID.KEY, allocation.key, scope.KEY, nodes.NAME")


def _set_option(raw: dict, path: tuple[str, ...], value: Any, key: str) -> Change:
    """An ``[[options]]`` figure: the entry of that id (added when the case has none). A band set
    alone keeps the case's other bands; where the case gives no table of that key, it applies to
    all three (docs/case.md): the catalogue's bands are not pulled in, since a modelled option never
    applies the catalogue's recoverable share, and a check of the table then cites only values
    the case or the ``--set`` wrote (before: expected=0 on right_size_replicas was refused as
    "got {'low': 0.5, 'expected': 0, 'high': 0.9}", the catalogue's 0.5 / 0.9 shown as the case's,
    and expected=0.7 scaled the model's low and high by them). A band or band table the case does
    not give was None before (not in the case file, the default applies)."""
    option_id, name, band = path[1], path[2], (path[3] if len(path) > 3 else None)
    entries = raw.setdefault("options", [])
    if not isinstance(entries, list):
        raise UsageError(f"--set {key}: [[options]] in the case file is not an array of tables")
    entry = next((e for e in entries if isinstance(e, dict) and e.get("id") == option_id), None)
    if entry is None:
        entry = {"id": option_id}
        entries.append(entry)
    if band is None:
        # a band table the case does not give is before None: the catalogue's recoverable share is
        # not what a modelled option applied (it applies none)
        before = entry.get(name, None if name in BAND_KEYS else _shipped(option_id).get(name))
        entry[name] = value
        return Change(key, path, before, value)
    own = entry.get(name) if isinstance(entry.get(name), dict) else None
    entry[name] = dict(own, **{band: value}) if own else dict.fromkeys(BANDS, value)
    return Change(key, path, own.get(band) if own else None, value)


def _shipped(option_id: str) -> dict:
    """The catalogue's entry of an option id."""
    return next(o for o in catalogue() if o["id"] == option_id)


def _same_reading(case: Case, changed: Case) -> None:
    """The changed case reads exactly what the audited one read (the sources are read once)."""
    read = (case.sources, case.start, case.end, case.currency, case.step_seconds)
    if read != (changed.sources, changed.start, changed.end, changed.currency, changed.step_seconds):
        raise UsageError(NOT_SOURCES.format(what="the changed case would read other sources"))
