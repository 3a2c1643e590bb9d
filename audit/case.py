"""The case: one frozen object read from case.toml, every problem reported at once."""
from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from audit.errors import ConfigError

CASE_KEYS = {"name", "window", "currency", "cost_basis", "tolerance", "step",
             "target_utilisation", "loaded_rate"}
TOP_KEYS = {"case", "billing", "telemetry", "profiles", "services", "scope", "rules", "nodes", "options"}
SOURCE_KEYS = {"name", "format", "path", "uri", "table", "url",
               # connector options: object stores, warehouses, export views, request logs
               "endpoint_url", "profile", "region", "project", "location", "maximum_bytes_billed",
               "workgroup", "database", "output_location", "catalog", "view", "service", "health_path",
               "token_env", "ca_file", "insecure_skip_verify",
               "grain", "partition_slack_days", "api_endpoint", "timeout_s",
               "node", "utc_offset", "start", "interval_ms"}
PROFILE_KEYS = SOURCE_KEYS | {"service", "requests", "prompt_tokens", "generated_tokens"}
SERVICE_MATCH_KEYS = {"namespace", "pod", "model_name", "container"}
SERVICE_KEYS = SERVICE_MATCH_KEYS | {"gpus_per_replica", "min_replicas", "scale_reaction"}
SCOPE_KEYS = {"accounts", "services", "tags"}
RULE_KEYS = {"when", "class", "reason"}
OPTION_KEYS = {"id", "recoverable", "effort_hours", "run_cost_per_month", "reason", "title"}
CLASSES = {"gpu_compute", "serving_compute", "serving_network", "egress", "observability",
           "orchestration", "commitment_unused", "unmatched"}
SOURCE_KINDS = ("billing", "telemetry", "profiles")


@dataclass(frozen=True)
class Source:
    """One source table of the case."""

    kind: str
    name: str
    format: str
    path: Path | None
    options: Mapping[str, Any]


@dataclass(frozen=True)
class Service:
    """How a service is recognised in telemetry, and how it may be right-sized."""

    name: str
    match: Mapping[str, str]
    gpus_per_replica: int = 1
    min_replicas: int = 1
    scale_reaction_seconds: int = 3600


@dataclass(frozen=True)
class Rule:
    """A classification rule: all conditions ANDed, first match wins."""

    when: Mapping[str, str]
    resource_class: str
    reason: str
    origin: str = "case"


@dataclass(frozen=True)
class Case:
    """Everything an audit needs to know, validated once."""

    path: Path
    name: str
    start: datetime
    end: datetime
    currency: str
    cost_basis: str
    tolerance: Decimal
    step_seconds: int | None
    target_utilisation: Decimal
    loaded_rate: Decimal
    sources: tuple[Source, ...]
    services: Mapping[str, Service]
    scope: Mapping[str, Any]
    rules: tuple[Rule, ...]
    nodes: Mapping[str, str]
    option_overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def days(self) -> Decimal:
        return Decimal((self.end - self.start).total_seconds()) / Decimal(86400)


def parse_duration(value: Any) -> int:
    """Seconds from 30, "30s", "5m", "1h" or "1d"."""
    if isinstance(value, bool):
        raise ValueError("expected a duration")
    if isinstance(value, int) and value > 0:
        return value
    match = re.fullmatch(r"\s*(\d+)\s*([smhd]?)\s*", str(value))
    if not match or int(match.group(1)) <= 0:
        raise ValueError(f"expected a duration such as 30s, 5m, 1h; got {value!r}")
    unit = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]
    return int(match.group(1)) * unit


def load_case(path: str | Path) -> Case:
    """Read and validate a case file (a folder holding case.toml, or the file itself)."""
    path = Path(path)
    if path.is_dir():
        path = path / "case.toml"
    if not path.exists():
        raise ConfigError(path, ["case file not found (expected a folder with case.toml)"])
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(path, [f"not valid TOML: {exc}"]) from None
    problems: list[str] = []
    case = _build(path.resolve(), raw, problems)
    if problems:
        raise ConfigError(path, problems)
    return case


def _unknown(keys, valid, where: str, problems: list[str]) -> None:
    for key in keys:
        if key not in valid:
            near = difflib.get_close_matches(key, sorted(valid), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else f"; valid keys: {', '.join(sorted(valid))}"
            problems.append(f"unknown key {key!r} in {where}{hint}")


def _build(path: Path, raw: dict, problems: list[str]) -> Case | None:
    _unknown(raw, TOP_KEYS, "the top level", problems)
    head = raw.get("case")
    if not isinstance(head, dict):
        problems.append("missing [case] table")
        return None
    _unknown(head, CASE_KEYS, "[case]", problems)
    start, end = _window(head.get("window"), problems)
    currency = str(head.get("currency", "")).upper()
    if not re.fullmatch(r"[A-Z]{3}", currency):
        problems.append("[case].currency: expected an ISO 4217 code such as 'USD'")
    basis = head.get("cost_basis", "effective")
    if basis not in ("effective", "billed"):
        problems.append(f"[case].cost_basis: expected 'effective' or 'billed', got {basis!r}")
    tolerance = _decimal(head, "tolerance", "0.02", problems, lo=Decimal(0), hi=Decimal(1))
    target = _decimal(head, "target_utilisation", "0.8", problems, lo=Decimal("0.01"), hi=Decimal(1))
    rate = _decimal(head, "loaded_rate", None, problems, lo=Decimal(0))
    step = _duration(head, "step", None, "[case]", problems)
    sources = _sources(raw, path.parent, problems)
    services = _services(raw.get("services", {}), problems)
    _check_profiles(sources, services, problems)
    scope = _scope(raw.get("scope", {}), problems)
    rules = _rules(raw.get("rules", []), problems)
    nodes = _nodes(raw.get("nodes", {}), problems)
    overrides = _options(raw.get("options", []), problems)
    if problems:
        return None
    return Case(path=path, name=str(head.get("name", path.parent.name)), start=start, end=end,
                currency=currency, cost_basis=basis, tolerance=tolerance, step_seconds=step,
                target_utilisation=target, loaded_rate=rate, sources=tuple(sources),
                services=MappingProxyType(services), scope=MappingProxyType(scope), rules=tuple(rules),
                nodes=MappingProxyType(nodes), option_overrides=MappingProxyType(overrides))


def _window(value, problems: list[str]):
    if not (isinstance(value, list) and len(value) == 2):
        problems.append('[case].window: expected ["YYYY-MM-DD", "YYYY-MM-DD"] (UTC, end exclusive)')
        return None, None
    try:
        start, end = (_utc(v) for v in value)
    except ValueError as exc:
        problems.append(f"[case].window: {exc}")
        return None, None
    if end <= start:
        problems.append("[case].window: the end must come after the start")
    return start, end


def _utc(value) -> datetime:
    if isinstance(value, datetime):
        moment = value
    else:
        try:
            moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"expected an ISO date such as 2026-09-01, got {value!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def _decimal(table, key, default, problems, lo=None, hi=None) -> Decimal | None:
    value = table.get(key, default)
    if value is None:
        problems.append(f"[case].{key}: required (a number)")
        return None
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        problems.append(f"[case].{key}: expected a number, got {value!r}")
        return None
    if (lo is not None and number < lo) or (hi is not None and number > hi):
        problems.append(f"[case].{key}: expected a number between {lo} and {hi if hi is not None else '∞'}")
    return number


def _duration(table, key, default, where, problems) -> int | None:
    value = table.get(key, default)
    if value is None:
        return None
    try:
        return parse_duration(value)
    except ValueError as exc:
        problems.append(f"{where}.{key}: {exc}")
        return None


def _sources(raw, folder: Path, problems) -> list[Source]:
    out, names = [], set()
    for kind in SOURCE_KINDS:
        entries = raw.get(kind, [])
        if not isinstance(entries, list):
            problems.append(f"[[{kind}]]: expected an array of tables")
            continue
        for i, entry in enumerate(entries, 1):
            where = f"[[{kind}]] #{i}"
            _unknown(entry, PROFILE_KEYS if kind == "profiles" else SOURCE_KEYS, where, problems)
            locations = [k for k in ("path", "uri", "table", "url") if entry.get(k)]
            if "format" not in entry or len(locations) != 1:
                problems.append(f"{where}: needs 'format' and exactly one of 'path', 'uri', 'table', 'url'")
                continue
            name = str(entry.get("name", f"{kind}-{i}"))
            if name in names:
                problems.append(f"{where}: duplicate source name {name!r}")
            names.add(name)
            options = {k: v for k, v in entry.items() if k not in ("name", "format", "path")}
            path = (folder / entry["path"]).resolve() if "path" in entry else None
            out.append(Source(kind, name, str(entry["format"]), path, MappingProxyType(options)))
    if not any(s.kind == "billing" for s in out):
        problems.append("no [[billing]] source: an audit needs an invoice")
    return out


def _services(raw, problems) -> dict[str, Service]:
    out = {}
    for name, entry in raw.items():
        where = f"[services.{name}]"
        if not isinstance(entry, dict):
            problems.append(f"{where}: expected a table")
            continue
        _unknown(entry, SERVICE_KEYS, where, problems)
        match = {k: str(entry[k]) for k in SERVICE_MATCH_KEYS if k in entry}
        if not match:
            problems.append(f"{where}: needs at least one of {', '.join(sorted(SERVICE_MATCH_KEYS))}")
        for key, pattern in match.items():
            if pattern.startswith("re:"):
                try:
                    re.compile(pattern[3:])
                except re.error as exc:
                    problems.append(f"{where}.{key}: bad regular expression: {exc}")
        ints = {}
        for key, default in (("gpus_per_replica", 1), ("min_replicas", 1)):
            value = entry.get(key, default)
            if not isinstance(value, int) or isinstance(value, bool) or value < (1 if key == "gpus_per_replica" else 0):
                problems.append(f"{where}.{key}: expected a whole number ≥ {1 if key == 'gpus_per_replica' else 0}")
                value = default
            ints[key] = value
        reaction = _duration(entry, "scale_reaction", "1h", where, problems) or 3600
        out[name] = Service(name, MappingProxyType(match), ints["gpus_per_replica"], ints["min_replicas"], reaction)
    return out


def _check_profiles(sources, services, problems) -> None:
    for s in sources:
        if s.kind != "profiles":
            continue
        service = s.options.get("service")
        if service is None:
            problems.append(f"[[profiles]] {s.name!r}: needs 'service' (the service it represents)")
        elif service not in services:
            problems.append(f"[[profiles]] {s.name!r}: service {service!r} is not declared in [services]")
        for key in ("requests", "prompt_tokens", "generated_tokens"):
            value = s.options.get(key)
            if value is not None and (not isinstance(value, int) or value < 0):
                problems.append(f"[[profiles]] {s.name!r}.{key}: expected a whole number ≥ 0")


def _scope(raw, problems) -> dict:
    _unknown(raw, SCOPE_KEYS, "[scope]", problems)
    scope = {"accounts": [str(a) for a in raw.get("accounts", [])],
             "services": [str(s) for s in raw.get("services", [])],
             "tags": {str(k): str(v) for k, v in dict(raw.get("tags", {})).items()}}
    return scope


def _rules(raw, problems) -> list[Rule]:
    out = []
    for i, entry in enumerate(raw, 1):
        where = f"[[rules]] #{i}"
        _unknown(entry, RULE_KEYS, where, problems)
        klass, reason, when = entry.get("class"), entry.get("reason"), entry.get("when")
        if klass not in CLASSES:
            near = difflib.get_close_matches(str(klass), sorted(CLASSES), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            problems.append(f"{where}.class: {klass!r} is not a class ({', '.join(sorted(CLASSES))}){hint}")
        if not reason:
            problems.append(f"{where}: needs a 'reason'")
        if not isinstance(when, dict) or not when:
            problems.append(f"{where}: needs 'when' = {{ Column = \"value\" or \"re:regex\" }}")
            continue
        out.append(Rule(MappingProxyType({str(k): str(v) for k, v in when.items()}), str(klass), str(reason)))
    return out


def _nodes(raw, problems) -> dict[str, str]:
    if not isinstance(raw, dict):
        problems.append("[nodes]: expected node name = \"ResourceId\" pairs")
        return {}
    return {str(k): str(v) for k, v in raw.items()}


def _options(raw, problems) -> dict[str, dict]:
    out = {}
    for i, entry in enumerate(raw, 1):
        where = f"[[options]] #{i}"
        _unknown(entry, OPTION_KEYS, where, problems)
        if "id" not in entry:
            problems.append(f"{where}: needs 'id' (a catalogue option id)")
            continue
        out[str(entry["id"])] = dict(entry)
    return out
