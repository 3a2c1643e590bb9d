"""The case tables about who owns what: ``[services.NAME]``, ``[[rules]]`` and ``[allocation]``.

A service is recognised in telemetry by label matchers and may claim billing lines by tags or
resource ids (METHOD §4); a rule classes lines and may name the service that owns them; the
allocation key splits what no service owns; :func:`case_path` resolves a path the case names.
:mod:`audit.case` reads the rest of the case and re-exports the types defined here.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from connectors.bounds import resolved, shown
from connectors.errors import InputError

SERVICE_MATCH_KEYS = {"namespace", "pod", "model_name", "container"}
SERVICE_CLAIM_KEYS = {"tags", "resource_ids"}
SERVICE_KEYS = SERVICE_MATCH_KEYS | SERVICE_CLAIM_KEYS | {"gpus_per_replica", "min_replicas", "scale_reaction",
                                                                  "owner"}
RULE_KEYS = {"when", "class", "reason", "service"}
ALLOCATION_KEYS = {"key", "weights"}
SHIPPED_KEYS = {"option", "service", "date", "note"}
#: METHOD §4's allocation keys for shared cost
ALLOCATION_BASES = ("gpu_cost", "requests", "owned_cost", "weights")
CLASSES = {"gpu_compute", "serving_compute", "serving_network", "egress", "observability",
           "orchestration", "commitment_unused", "unmatched"}
LIMITS = {"gpus_per_replica": 1024, "min_replicas": 1_000_000}
MAX_CLAIMS = 10_000


@dataclass(frozen=True)
class Service:
    """How a service is recognised in telemetry, what billing lines it claims, how it may be right-sized.

    ``match``: label matchers over pods (all must hold); ``tags``: tag key → value (exact or
    ``re:``), every one must hold for a line to be claimed; ``resource_ids``: ResourceIds (exact or
    ``re:``), any one claims a line. A service may have matchers, claims, or both.
    """

    name: str
    match: Mapping[str, str]
    gpus_per_replica: int = 1
    min_replicas: int = 1
    scale_reaction_seconds: int = 3600
    tags: Mapping[str, str] = field(default_factory=dict)
    resource_ids: tuple[str, ...] = ()
    #: who can act on the service's options (METHOD §7); None: not named
    owner: str | None = None

    @property
    def claims_lines(self) -> bool:
        return bool(self.tags or self.resource_ids)


@dataclass(frozen=True)
class Rule:
    """A classification rule: all conditions ANDed, first match wins; ``service`` owns what it classes."""

    when: Mapping[str, str]
    resource_class: str
    reason: str
    origin: str = "case"
    service: str | None = None


@dataclass(frozen=True)
class Allocation:
    """How shared cost is split over services (METHOD §4): a key, and fixed weights for ``weights``."""

    key: str = "gpu_cost"
    weights: Mapping[str, Decimal] = field(default_factory=dict)


def unknown_keys(keys, valid, where: str, problems: list[str]) -> None:
    """A problem for every key not in ``valid``, naming the nearest valid one."""
    for key in keys:
        if key not in valid:
            near = difflib.get_close_matches(key, sorted(valid), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else f"; valid keys: {', '.join(sorted(valid))}"
            problems.append(f"unknown key {shown(key)} in {where}{hint}")


def case_path(folder: Path, value: str, where: str, problems: list[str]) -> Path:
    """A path the case names, resolved against its folder; a symlink loop is a problem (and the
    path is kept as written, for the message)."""
    try:
        return resolved(folder / value)
    except InputError as exc:
        problems.append(f"{where}: {exc}")
        return folder / value


def check_pattern(pattern: str, where: str, problems: list[str]) -> None:
    """A ``re:`` pattern must compile."""
    if pattern.startswith("re:"):
        try:
            re.compile(pattern[3:])
        except (re.error, RecursionError, OverflowError) as exc:
            problems.append(f"{where}: bad regular expression: {shown(str(exc))}")


def matchers(table: Mapping[str, Any], where: str, problems: list[str]) -> dict[str, str]:
    """A table of matchers (column or label = "value" or "re:regex"), the file's order. A TOML
    whole number is read as its digits (a tag "3"); any other kind (true, 1.5, a list, a table)
    matched nothing as Python's text of it ("True", "['a']"): it is a problem, by key."""
    out = {}
    for key, value in table.items():
        if isinstance(value, str):
            out[str(key)] = value
        elif isinstance(value, int) and not isinstance(value, bool):
            out[str(key)] = str(value)
        else:
            problems.append(f"{where}.{key}: expected a string (or \"re:regex\"), got {shown(value)}")
    return out


def parse_services(raw: Mapping[str, Any], duration, problems: list[str]) -> dict[str, Service]:
    """``[services.NAME]`` tables; ``duration(table, key, default, where, problems)`` reads durations."""
    out = {}
    for name, entry in raw.items():
        where = f"[services.{name}]"
        if not isinstance(entry, dict):
            problems.append(f"{where}: expected a table")
            continue
        unknown_keys(entry, SERVICE_KEYS, where, problems)
        match = matchers({k: v for k, v in entry.items() if k in SERVICE_MATCH_KEYS}, where, problems)
        tags, resource_ids = _claims(entry, where, problems)
        if not match and not tags and not resource_ids:
            problems.append(f"{where}: needs at least one of {', '.join(sorted(SERVICE_MATCH_KEYS))} "
                            "(pods in telemetry) or tags / resource_ids (billing lines it owns)")
        for key, pattern in match.items():
            check_pattern(pattern, f"{where}.{key}", problems)
        ints = _replica_ints(entry, where, problems)
        reaction = duration(entry, "scale_reaction", "1h", where, problems) or 3600
        out[name] = Service(name, MappingProxyType(match), ints["gpus_per_replica"], ints["min_replicas"], reaction,
                            MappingProxyType(tags), tuple(resource_ids), _owner(entry, where, problems))
    return out


def _owner(entry: Mapping[str, Any], where: str, problems: list[str]) -> str | None:
    owner = entry.get("owner")
    if owner is not None and (not isinstance(owner, str) or not owner.strip()):
        problems.append(f"{where}.owner: expected a name (a string), got {shown(owner)}")
        return None
    return owner


def _claims(entry: Mapping[str, Any], where: str, problems: list[str]) -> tuple[dict[str, str], list[str]]:
    """A service's ``tags`` table and ``resource_ids`` list, checked."""
    tags: dict[str, str] = {}
    raw_tags = entry.get("tags", {})
    if not isinstance(raw_tags, dict) or any(isinstance(v, (dict, list)) for v in raw_tags.values()):
        problems.append(f"{where}.tags: expected a table of tag = \"value\" (or \"re:regex\"), got {shown(raw_tags)}")
    else:
        tags = matchers(raw_tags, f"{where}.tags", problems)
        for key, pattern in tags.items():
            check_pattern(pattern, f"{where}.tags.{key}", problems)
    ids: list[str] = []
    raw_ids = entry.get("resource_ids", [])
    if not isinstance(raw_ids, list) or any(not isinstance(v, str) or not v for v in raw_ids):
        problems.append(f"{where}.resource_ids: expected a list of ResourceIds (or \"re:regex\"), got {shown(raw_ids)}")
    elif len(raw_ids) > MAX_CLAIMS:
        problems.append(f"{where}.resource_ids: at most {MAX_CLAIMS:,} ids (use a \"re:\" pattern)")
    else:
        ids = list(raw_ids)
        for i, pattern in enumerate(ids, 1):
            check_pattern(pattern, f"{where}.resource_ids #{i}", problems)
    return tags, ids


def _replica_ints(entry: Mapping[str, Any], where: str, problems: list[str]) -> dict[str, int]:
    ints = {}
    for key, default in (("gpus_per_replica", 1), ("min_replicas", 1)):
        value = entry.get(key, default)
        low = 1 if key == "gpus_per_replica" else 0
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= LIMITS[key]:
            problems.append(f"{where}.{key}: expected a whole number from {low} to {LIMITS[key]:,}")
            value = default
        ints[key] = value
    return ints


def parse_rules(raw: list[tuple[int, dict]], services: Mapping[str, Service], problems: list[str]) -> list[Rule]:
    """``[[rules]]`` in file order; a rule's ``service`` must be a declared service."""
    out = []
    for i, entry in raw:
        where = f"[[rules]] #{i}"
        unknown_keys(entry, RULE_KEYS, where, problems)
        klass, reason, when = entry.get("class"), entry.get("reason"), entry.get("when")
        if not isinstance(klass, str) or klass not in CLASSES:
            near = difflib.get_close_matches(str(klass), sorted(CLASSES), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            problems.append(f"{where}.class: {shown(klass)} is not a class ({', '.join(sorted(CLASSES))}){hint}")
        if not reason:
            problems.append(f"{where}: needs a 'reason'")
        service = _rule_service(entry, services, where, problems)
        if not isinstance(when, dict) or not when:
            problems.append(f"{where}: needs 'when' = {{ Column = \"value\" or \"re:regex\" }}")
            continue
        out.append(Rule(MappingProxyType(matchers(when, f"{where}.when", problems)), str(klass), str(reason),
                        service=service))
    return out


def _rule_service(entry: Mapping[str, Any], services: Mapping[str, Service], where: str,
                  problems: list[str]) -> str | None:
    if "service" not in entry:
        return None
    name = entry["service"]
    if not isinstance(name, str) or name not in services:
        problems.append(f"{where}.service: {shown(name)} is not a declared [services] entry{service_hint(name, services)}")
        return None
    return name


def service_hint(name, services: Mapping[str, Any]) -> str:
    """"; did you mean 'chat'?" for a service name written nearly right, else the declared names."""
    near = difflib.get_close_matches(str(name), sorted(services), n=1)
    return f"; did you mean {near[0]!r}?" if near else f"; declared: {', '.join(sorted(services)) or 'none'}"


def parse_allocation(raw: Mapping[str, Any], services: Mapping[str, Service], problems: list[str]) -> Allocation:
    """``[allocation]``: ``key`` (gpu_cost, requests, owned_cost, weights) and, for weights, ``weights``."""
    unknown_keys(raw, ALLOCATION_KEYS, "[allocation]", problems)
    key = raw.get("key", "gpu_cost")
    if not isinstance(key, str) or key not in ALLOCATION_BASES:
        near = difflib.get_close_matches(str(key), ALLOCATION_BASES, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        problems.append(f"[allocation].key: expected one of {', '.join(ALLOCATION_BASES)}, got {shown(key)}{hint}")
        return Allocation()
    weights = _weights(raw.get("weights"), services, problems) if "weights" in raw else {}
    if key == "weights" and not weights:
        problems.append("[allocation].weights: key = \"weights\" needs a table of service = weight (numbers ≥ 0)")
    elif key != "weights" and "weights" in raw:
        problems.append(f"[allocation].weights: only read with key = \"weights\" (key is {key!r})")
    return Allocation(key, MappingProxyType(weights))


def _weights(raw, services: Mapping[str, Service], problems: list[str]) -> dict[str, Decimal]:
    if not isinstance(raw, dict):
        problems.append(f"[allocation].weights: expected a table of service = weight, got {shown(raw)}")
        return {}
    out = {}
    for name, value in raw.items():
        where = f"[allocation].weights.{name}"
        if name not in services:
            near = difflib.get_close_matches(str(name), sorted(services), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            problems.append(f"{where}: not a declared [services] entry{hint}")
            continue
        try:
            weight = Decimal(str(value)) if isinstance(value, (int, float, str)) and not isinstance(value, bool) else None
        except InvalidOperation:
            weight = None
        if weight is None or not weight.is_finite() or weight < 0:
            problems.append(f"{where}: expected a number ≥ 0, got {shown(value)}")
            continue
        out[str(name)] = weight
    return out


@dataclass(frozen=True)
class Shipped:
    """An option that shipped (``[[shipped]]``, METHOD §10): its catalogue id, the service it acted on and
    when it shipped (UTC); a later review measures its realised saving against the earlier projection."""

    option: str
    service: str
    date: datetime
    note: str | None = None


def parse_shipped(raw: list[tuple[int, dict]], services: Mapping[str, Service], utc,
                  problems: list[str]) -> list[Shipped]:
    """``[[shipped]]`` entries in file order; ``utc(value)`` reads an ISO date or datetime as UTC (a
    ValueError names what it expected). The option id is not checked here: only the review knows the
    earlier audit's options."""
    out = []
    for i, entry in raw:
        where = f"[[shipped]] #{i}"
        unknown_keys(entry, SHIPPED_KEYS, where, problems)
        option, note = entry.get("option"), entry.get("note")
        if not isinstance(option, str) or not option.strip():
            problems.append(f"{where}.option: expected an option id such as 'right_size_replicas', got {shown(option)}")
        if note is not None and not isinstance(note, str):
            problems.append(f"{where}.note: expected a string, got {shown(note)}")
        service = _shipped_service(entry.get("service"), services, where, problems)
        date = None
        if "date" not in entry:
            problems.append(f"{where}: needs 'date' (when it shipped: an ISO date such as 2026-08-15, UTC)")
        else:
            try:
                date = utc(entry["date"])
            except ValueError as exc:
                problems.append(f"{where}.date: {exc}")
        if isinstance(option, str) and option.strip() and service and date is not None:
            out.append(Shipped(option.strip(), service, date, note if isinstance(note, str) else None))
    return out


def _shipped_service(name, services: Mapping[str, Service], where: str, problems: list[str]) -> str | None:
    if isinstance(name, str) and name in services:
        return name
    problems.append(f"{where}.service: {shown(name)} is not a declared [services] entry{service_hint(name, services)}")
    return None
