"""The case: one frozen object read from case.toml, every problem reported at once."""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping

from audit.case_options import (  # noqa: F401  (re-exported: whatif reads the option keys here)
    BAND_KEYS,
    MAX_RATE,
    OPTION_BANDS,
    OPTION_KEYS,
    parse_options,
)
from audit.case_services import (  # noqa: F401  (re-exported: the case's types live together)
    CLASSES,
    Allocation,
    Rule,
    Service,
    Shipped,
    case_path,
    matchers,
    parse_allocation,
    parse_rules,
    parse_services,
    parse_shipped,
    service_hint,
    unknown_keys,
)
from audit.errors import ConfigError
from connectors.base import url_credential_problems
from connectors.bounds import check_source_path, resolved, shown
from connectors.errors import InputError
from schemas.secrets import remember_env

#: the cost bases of METHOD §1: FOCUS EffectiveCost, BilledCost, ListCost, ContractedCost
COST_BASES = ("effective", "billed", "list", "contracted")
CASE_KEYS = {"name", "window", "currency", "cost_basis", "tolerance", "step",
             "target_utilisation", "loaded_rate"} | {"horizon_months", "loaded_rate_range",
                                                     "target_utilisation_range", "owner_tag"}
TOP_KEYS = {"case", "billing", "telemetry", "profiles", "services", "scope", "rules", "nodes", "options",
            "allocation", "shipped"}
SOURCE_KEYS = {"name", "format", "path", "uri", "table", "url",
               # connector options: object stores, warehouses, export views, request logs
               "endpoint_url", "profile", "region", "project", "location", "maximum_bytes_billed",
               "workgroup", "database", "output_location", "catalog", "view", "service", "health_path", "path_filter",
               "token_env", "username_env", "password_env", "ca_file", "insecure_skip_verify",
               "grain", "partition_slack_days", "api_endpoint", "timeout_s", "parallel_queries",
               "node", "utc_offset", "start", "interval_ms", "contract_commitment", "results",
               # the GPU split run in the bill's engine (audit/split_remote.py)
               "split_in_place", "scratch_dataset", "scratch_location", "scratch_database"}
PROFILE_KEYS = SOURCE_KEYS | {"service", "requests", "prompt_tokens", "generated_tokens"}
SCOPE_KEYS = {"accounts", "services", "tags"}
SOURCE_KINDS = ("billing", "telemetry", "profiles")
MAX_CASE_BYTES = 4 << 20
"""Largest case.toml read (a case is a page of settings; 4 MiB is far beyond any)."""
YEARS = (1970, 2200)
"""Window years accepted: every table keeps nanosecond timestamps (pandas' range ends in 2262)."""
MAX_STEP = 366 * 86400
CREDENTIAL_ENV = ("token_env", "username_env", "password_env")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")


@dataclass(frozen=True)
class Source:
    """One source table of the case."""

    kind: str
    name: str
    format: str
    path: Path | None
    options: Mapping[str, Any]


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
    allocation: Allocation = field(default_factory=Allocation)
    #: the plan's settings (METHOD §7, audit/plan.py): horizon, sensitivity ranges, the owner tag
    horizon_months: Decimal = Decimal(12)
    loaded_rate_range: tuple[Decimal, Decimal] | None = None
    target_utilisation_range: tuple[Decimal, Decimal] | None = None
    owner_tag: str | None = None
    #: options that shipped ([[shipped]], METHOD §10), for a later review
    shipped: tuple[Shipped, ...] = ()

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
    if isinstance(value, int) and 0 < value <= MAX_STEP:
        return value
    match = re.fullmatch(r"\s*(\d{1,12})\s*([smhd]?)\s*", str(value)) if isinstance(value, (int, str)) else None
    if not match or int(match.group(1)) <= 0:
        raise ValueError(f"expected a duration such as 30s, 5m, 1h; got {shown(value)}")
    unit = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]
    seconds = int(match.group(1)) * unit
    if seconds > MAX_STEP:
        raise ValueError(f"expected a duration of at most 366 days; got {shown(value)}")
    return seconds


def load_case(path: str | Path, edit: Callable[[dict], None] | None = None) -> Case:
    """Read and validate a case file (a folder holding case.toml, or the file itself); ``edit``
    changes the TOML document in place before it is validated (``costaudit whatif``'s ``--set``)."""
    path = Path(path)
    if path.is_dir():
        path = path / "case.toml"
    if not path.exists():
        raise ConfigError(path, ["case file not found (expected a folder with case.toml)"])
    raw = _read_toml(path)
    if edit is not None:
        edit(raw)
    problems: list[str] = []
    case = _build(resolved(path), raw, problems)
    if problems:
        raise ConfigError(path, problems)
    return case


def _read_toml(path: Path) -> dict:
    """The case file's TOML: a regular file of at most MAX_CASE_BYTES, else a ConfigError."""
    try:
        check_source_path(path, expected="a case.toml file")
    except InputError as exc:
        raise ConfigError(path, [exc.message]) from None
    if path.stat().st_size > MAX_CASE_BYTES:
        raise ConfigError(path, [f"larger than {MAX_CASE_BYTES >> 20} MiB: not a case file"])
    data = path.read_bytes().removeprefix(b"\xef\xbb\xbf")  # a BOM (Notepad writes one) is no statement
    try:
        text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # as read_text's newlines
        return tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise ConfigError(path, [not_utf8(data, exc.start)]) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(path, [f"not valid TOML: {exc}"]) from None
    except RecursionError:
        raise ConfigError(path, ["not valid TOML: nested too deeply"]) from None


def not_utf8(data: bytes, at: int) -> str:
    """The problem of a byte that is not UTF-8 at offset ``at`` of ``data``: its line and column
    (characters, from 1), where the decoder named only the offset ("in position 606")."""
    before = data[:at]
    line = before.count(b"\n") + 1
    column = len(before[before.rfind(b"\n") + 1:].decode("utf-8", errors="replace")) + 1
    return (f"not UTF-8: byte 0x{data[at]:02x} at line {line}, column {column}; "
            "a case file must be saved as UTF-8")


def _table(value, where: str, problems: list[str]) -> dict:
    """``value`` when it is a TOML table, else {} and a problem."""
    if isinstance(value, dict):
        return value
    problems.append(f"{where}: expected a table, got {shown(value)}")
    return {}


def _tables(value, where: str, problems: list[str]) -> list[tuple[int, dict]]:
    """(position, entry) of an array of tables; anything else is a problem."""
    if not isinstance(value, list):
        problems.append(f"{where}: expected an array of tables, got {shown(value)}")
        return []
    out = []
    for i, entry in enumerate(value, 1):
        if isinstance(entry, dict):
            out.append((i, entry))
        else:
            problems.append(f"{where} #{i}: expected a table, got {shown(entry)}")
    return out


def _texts(value, where: str, problems: list[str]) -> list[str]:
    """A list of strings (numbers are read as their text); anything else is a problem."""
    if not isinstance(value, list) or any(isinstance(v, (dict, list)) for v in value):
        problems.append(f"{where}: expected a list of strings, got {shown(value)}")
        return []
    return [str(v) for v in value]


def _build(path: Path, raw: dict, problems: list[str]) -> Case | None:
    unknown_keys(raw, TOP_KEYS, "the top level", problems)
    head = raw.get("case")
    if not isinstance(head, dict):
        problems.append("missing [case] table")
        return None
    unknown_keys(head, CASE_KEYS, "[case]", problems)
    start, end = _window(head.get("window"), problems)
    currency = str(head.get("currency", "")).upper()
    if not isinstance(head.get("currency", ""), str) or not re.fullmatch(r"[A-Z]{3}", currency):
        problems.append("[case].currency: expected an ISO 4217 code such as 'USD'")
    basis = head.get("cost_basis", "effective")
    if not isinstance(basis, str) or basis not in COST_BASES:
        problems.append(f"[case].cost_basis: expected one of {', '.join(map(repr, COST_BASES))}, got {shown(basis)}")
    tolerance = _decimal(head, "tolerance", "0.02", problems, lo=Decimal(0), hi=Decimal(1))
    target = _decimal(head, "target_utilisation", "0.8", problems, lo=Decimal("0.01"), hi=Decimal(1))
    rate = _decimal(head, "loaded_rate", None, problems, lo=Decimal("0.01"), hi=MAX_RATE)
    step = _duration(head, "step", None, "[case]", problems)
    name = head.get("name", path.parent.name)
    if isinstance(name, (dict, list)):
        problems.append(f"[case].name: expected a string, got {shown(name)}")
    sources = _sources(raw, path.parent, problems)
    services = parse_services(_table(raw.get("services", {}), "[services]", problems), _duration, problems)
    _check_profiles(sources, services, problems)
    scope = _scope(_table(raw.get("scope", {}), "[scope]", problems), problems)
    rules = parse_rules(_tables(raw.get("rules", []), "[[rules]]", problems), services, problems)
    allocation = parse_allocation(_table(raw.get("allocation", {}), "[allocation]", problems), services, problems)
    nodes = _nodes(raw.get("nodes", {}), problems)
    overrides = parse_options(_tables(raw.get("options", []), "[[options]]", problems), services, path.parent,
                              _duration, problems)
    planning = _plan_keys(head, target, problems)
    shipped = parse_shipped(_tables(raw.get("shipped", []), "[[shipped]]", problems), services, _utc, problems)
    if problems:
        return None
    return Case(path=path, name=str(name), start=start, end=end,
                currency=currency, cost_basis=basis, tolerance=tolerance, step_seconds=step,
                target_utilisation=target, loaded_rate=rate, sources=tuple(sources),
                services=MappingProxyType(services), scope=MappingProxyType(scope), rules=tuple(rules),
                nodes=MappingProxyType(nodes), option_overrides=MappingProxyType(overrides),
                allocation=allocation, shipped=tuple(shipped), **planning)


def _plan_keys(head: Mapping[str, Any], target: Decimal | None, problems: list[str]) -> dict[str, Any]:
    """``horizon_months``, ``loaded_rate_range``, ``target_utilisation_range`` (around ``target``), ``owner_tag``."""
    out: dict[str, Any] = {"horizon_months": _decimal(head, "horizon_months", "12", problems, lo=Decimal(1),
                                                      hi=Decimal(600)) or Decimal(12)}
    for key, hi, centre in (("loaded_rate_range", MAX_RATE, None), ("target_utilisation_range", Decimal(1), target)):
        value = head.get(key)
        if value is None:
            continue
        pair = [_decimal({key: v}, key, None, problems, lo=Decimal("0.01"), hi=hi) for v in value] \
            if isinstance(value, list) and len(value) == 2 else []
        low, high = (pair[0], pair[1]) if len(pair) == 2 else (None, None)
        if low is None or high is None or low > high:
            problems.append(f"[case].{key}: expected [low, high], two numbers, low ≤ high")
        elif centre is not None and not low <= centre <= high:
            problems.append(f"[case].{key}: [{low}, {high}] must contain target_utilisation ({centre}): "
                            "its ends are the low / high tried either side of the expected")
        else:
            out[key] = (low, high)
    tag = head.get("owner_tag")
    if tag is not None and (not isinstance(tag, str) or not tag):
        problems.append(f"[case].owner_tag: expected a tag key (a string), got {shown(tag)}")
    elif tag is not None:
        out["owner_tag"] = tag
    return out


def _window(value, problems: list[str]):
    if not (isinstance(value, list) and len(value) == 2):
        problems.append('[case].window: expected ["YYYY-MM-DD", "YYYY-MM-DD"] (UTC, end exclusive)')
        return None, None
    try:
        start, end = (_utc(v) for v in value)
    except ValueError as exc:
        problems.append(f"[case].window: {exc}")
        return None, None
    if not all(YEARS[0] <= moment.year < YEARS[1] for moment in (start, end)):
        problems.append(f"[case].window: expected dates from {YEARS[0]} to {YEARS[1] - 1}")
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
            raise ValueError(f"expected an ISO date such as 2026-09-01, got {shown(value)}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        return moment.astimezone(timezone.utc)
    except OverflowError:
        raise ValueError(f"expected an ISO date such as 2026-09-01, got {shown(value)}") from None


def _decimal(table, key, default, problems, lo=None, hi=None) -> Decimal | None:
    value = table.get(key, default)
    if value is None:
        problems.append(f"[case].{key}: required (a number)")
        return None
    try:
        number = Decimal(str(value)) if isinstance(value, (int, float, str)) and not isinstance(value, bool) else None
    except InvalidOperation:
        number = None
    if number is None or not number.is_finite():
        problems.append(f"[case].{key}: expected a number, got {shown(value)}")
        return None
    if (lo is not None and number < lo) or (hi is not None and number > hi):
        problems.append(f"[case].{key}: expected a number between {lo} and {f'{hi:,}' if hi is not None else '∞'}")
    return number


def _duration(table, key, default, where, problems) -> int | None:
    value = table.get(key, default)
    try:
        return None if value is None else parse_duration(value)
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
        for i, entry in _tables(entries, f"[[{kind}]]", problems):
            where = f"[[{kind}]] #{i}"
            unknown_keys(entry, PROFILE_KEYS if kind == "profiles" else SOURCE_KEYS, where, problems)
            locations = [k for k in ("path", "uri", "table", "url") if entry.get(k)]
            if "format" not in entry or len(locations) != 1:
                problems.append(f"{where}: needs 'format' and exactly one of 'path', 'uri', 'table', 'url'")
                continue
            wrong = [k for k in ("name", "format", *locations)
                     if k in entry and (not isinstance(entry[k], str) or "\0" in entry[k])]
            if wrong:
                problems.append(f"{where}.{wrong[0]}: expected a string, got {shown(entry[wrong[0]])}")
                continue
            name = str(entry.get("name", f"{kind}-{i}"))
            if name in names:
                problems.append(f"{where}: duplicate source name {shown(name)}")
            names.add(name)
            options = {k: v for k, v in entry.items() if k not in ("name", "format", "path")}
            options.update(_contract_commitment(entry, folder, where, problems))
            _credentials(options, f"[[{kind}]] {shown(name)}", problems)
            path = case_path(folder, entry["path"], f"{where}.path", problems) if "path" in entry else None
            out.append(Source(kind, name, str(entry["format"]), path, MappingProxyType(options)))
    if not any(s.kind == "billing" for s in out):
        problems.append("no [[billing]] source: an audit needs an invoice")
    _split_in_place(out, problems)
    return out


def _split_in_place(sources: list[Source], problems) -> None:
    """``split_in_place = true``: one billing source, a table read where it lives (Athena, BigQuery)."""
    asking = []
    for s in sources:
        value = s.options.get("split_in_place")
        if value is None:
            continue
        where = f"[[{s.kind}]] {shown(s.name)}.split_in_place"
        if not isinstance(value, bool):
            problems.append(f"{where}: expected true or false, got {shown(value)}")
        elif value and not (s.kind == "billing" and s.format in ("athena", "gcp_billing") and s.options.get("table")):
            problems.append(f"{where}: only a billing table read where it lives (format \"athena\", or "
                            f"\"gcp_billing\" with a table) runs the GPU split in its engine; this is a {s.format} "
                            f"{'table' if s.options.get('table') else 'file'}")
        elif value:
            asking.append(s.name)
    if len(asking) > 1:
        problems.append(f"split_in_place = true on {len(asking)} billing sources ({', '.join(map(shown, asking))}): "
                        "the GPU split runs in one engine")


def _credentials(options, where: str, problems) -> None:
    """No url carries credentials; token_env / username_env / password_env name environment
    variables, whose values are masked in every message from now on."""
    for key, problem in url_credential_problems(options):
        problems.append(f"{where}.{key}: {problem}")
    named = {k: options[k] for k in CREDENTIAL_ENV if k in options}
    for key, value in named.items():
        if not isinstance(value, str) or not ENV_NAME.fullmatch(value):
            problems.append(f"{where}.{key}: expected the name of an environment variable, got {shown(value)}")
    if "token_env" in named and ("username_env" in named or "password_env" in named):
        problems.append(f"{where}: name token_env (a bearer token) or username_env / password_env "
                        "(basic auth), not both")
    remember_env(str(v) for k, v in named.items() if k != "username_env")


def _contract_commitment(entry: dict, folder: Path, where: str, problems: list[str]) -> dict:
    """Option ``contract_commitment`` of a FOCUS billing source: the FOCUS 1.3 Contract Commitment
    file, resolved against the case folder as ``path`` is ({} when not given)."""
    if "contract_commitment" not in entry:
        return {}
    value = entry["contract_commitment"]
    if entry.get("format") != "focus" or "path" not in entry:
        problems.append(f"{where}.contract_commitment: read by a 'focus' source with a 'path' only")
        return {}
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        problems.append(f"{where}.contract_commitment: expected the path of a FOCUS 1.3 Contract Commitment "
                        f"file, got {shown(value)}")
        return {}
    return {"contract_commitment": str(case_path(folder, value, f"{where}.contract_commitment", problems))}



def _check_profiles(sources, services, problems) -> None:
    for s in sources:
        if s.kind != "profiles":
            continue
        service = s.options.get("service")
        if service is None:
            problems.append(f"[[profiles]] {shown(s.name)}: needs 'service' (the service it represents)")
        elif not isinstance(service, str):
            problems.append(f"[[profiles]] {shown(s.name)}.service: expected a service name, got {shown(service)}")
        elif service not in services:
            problems.append(f"[[profiles]] {shown(s.name)}: service {shown(service)} is not declared in [services]"
                            + service_hint(service, services))
        for key in ("requests", "prompt_tokens", "generated_tokens"):
            value = s.options.get(key)
            least = 1 if key == "requests" else 0  # kernel-seconds per request divides by it
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < least):
                problems.append(f"[[profiles]] {shown(s.name)}.{key}: expected a whole number ≥ {least}"
                                + (f", got {shown(value)} (leave it out where the requests were not counted)"
                                   if key == "requests" else ""))


def _scope(raw, problems) -> dict:
    unknown_keys(raw, SCOPE_KEYS, "[scope]", problems)
    tags = _table(raw.get("tags", {}), "[scope].tags", problems)
    scope = {"accounts": _texts(raw.get("accounts", []), "[scope].accounts", problems),
             "services": _texts(raw.get("services", []), "[scope].services", problems),
             "tags": matchers(tags, "[scope].tags", problems)}
    return scope



def _nodes(raw, problems) -> dict[str, str]:
    if not isinstance(raw, dict):
        problems.append("[nodes]: expected node name = \"ResourceId\" pairs")
        return {}
    return {str(k): str(v) for k, v in raw.items()}
