"""The case's ``[[options]]`` entries (docs/case.md): each entry's figures (bands, run cost) and its
model inputs checked, an id given once, and a traffic file per service for the generation cap
(``traffic``: the Azure LLM inference trace format, collector/trace_file.py) resolved against the
case folder. Split from audit/case.py, which reads the rest of the case."""
from __future__ import annotations

from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Callable, Mapping

from audit.case_services import unknown_keys
from connectors.bounds import check_source_path, finite_number, resolved, shown
from connectors.errors import InputError

OPTION_KEYS = {"id", "recoverable", "effort_hours", "run_cost_per_month", "reason", "title",
               # the option models' own inputs (audit/pricing): the autoscaling policy, the batching bound
               "scale_reaction", "target_utilisation", "latency_bound_ms", "latency_percentile",
               "hit_rate", "cap_tokens"}  # the prefix-cache h1 and the generation cap (audit/pricing)
#: keys a case's entry may hold besides OPTION_KEYS (files, not figures: ``costaudit whatif`` sets none)
FILE_KEYS = {"traffic"}
LATENCY_PERCENTILES = ("p50", "p95", "p99")


def parse_options(raw, services: Mapping, folder: Path, duration: Callable, problems: list[str]) -> dict[str, dict]:
    """The case's option entries by id; an id given twice is a problem naming both (else the last won).
    ``duration`` reads a duration key (audit/case.py ``_duration``)."""
    out: dict[str, dict] = {}
    first: dict[str, int] = {}
    for i, entry in raw:
        where = f"[[options]] #{i}"
        unknown_keys(entry, OPTION_KEYS | FILE_KEYS, where, problems)
        if "id" not in entry:
            problems.append(f"{where}: needs 'id' (a catalogue option id)")
            continue
        _option_figures(entry, where, problems)
        if (option := first.setdefault(str(entry["id"]), i)) != i:
            problems.append(f"{where}: id {shown(entry['id'])} is also [[options]] #{option}; give each "
                            "option once (which entry's figures hold is not known)")
        out[str(entry["id"])] = dict(entry, **_model_inputs(entry, where, problems, duration),
                                     **_traffic(entry, services, folder, where, problems))
    return out


def _traffic(entry: dict, services: Mapping, folder: Path, where: str, problems: list[str]) -> dict:
    """``traffic = { SERVICE = "path" }`` (generation_cap only): each declared service's per-request
    trace, resolved against the case folder; {} when not given."""
    if "traffic" not in entry:
        return {}
    value = entry["traffic"]
    if entry.get("id") != "generation_cap":
        problems.append(f"{where}.traffic: only the generation_cap option reads a traffic file, not "
                        f"{shown(entry.get('id'))}")
        return {}
    if not isinstance(value, dict) or not value or not all(isinstance(v, str) and v for v in value.values()):
        problems.append(f"{where}.traffic: expected {{ SERVICE = \"path\" }}: a traffic file (the Azure LLM "
                        f"inference trace CSV: TIMESTAMP,ContextTokens,GeneratedTokens) per service, got {shown(value)}")
        return {}
    unknown = [name for name in value if name not in services]
    if unknown:
        problems.append(f"{where}.traffic: {', '.join(map(shown, unknown))} is no [services] entry (declared: "
                        f"{', '.join(map(shown, services)) or 'none'})")
        return {}
    paths = {}
    for name, relative in value.items():
        try:
            path = resolved(folder / relative)
            check_source_path(path, expected="an Azure LLM inference trace CSV (TIMESTAMP,ContextTokens,GeneratedTokens)")
        except OSError as exc:
            problems.append(f"{where}.traffic.{name}: {shown(relative)} cannot be resolved: {exc}")
        except InputError as exc:
            problems.append(f"{where}.traffic.{name}: {exc}")
        else:
            paths[name] = str(path)
    return {"traffic": paths}


#: an option's bands and each one's range; the largest loaded rate (an hour) and run cost (a month)
OPTION_BANDS, BAND_KEYS = ("low", "expected", "high"), {"recoverable": (0, 1), "effort_hours": (0, 1e6)}
MAX_RATE, MAX_RUN_COST = Decimal(10) ** 9, 1e12


def _option_figures(entry: dict, where: str, problems: list[str]) -> None:
    """An option's band tables (three numbers in their range, low ≤ expected ≤ high: a recoverable
    share above 1 would save more than the part, bands out of order give a payback.low above the
    expected), its run cost (a number ≥ 0), its title and reason (strings)."""
    for key, (low, high) in BAND_KEYS.items():
        if key not in entry:
            continue
        value = entry[key]
        given = [value[b] for b in OPTION_BANDS] if isinstance(value, dict) and set(value) == set(OPTION_BANDS) else []
        bands = [float(v) for v in given if finite_number(v)]
        if len(bands) != len(OPTION_BANDS) or not all(low <= v <= high for v in bands) or bands != sorted(bands):
            bound = f"from {low} to {high:,.0f}"
            problems.append(f"{where}.{key}: expected {{ low, expected, high }} of numbers {bound}, "
                            f"low ≤ expected ≤ high, got {shown(value)}")
    run = entry.get("run_cost_per_month", 0)
    if not (finite_number(run) and 0 <= run < MAX_RUN_COST):
        problems.append(f"{where}.run_cost_per_month: expected a number from 0 to {MAX_RUN_COST:g} (money a "
                        f"month, in the case currency), got {shown(run)}")
    for key in ("title", "reason"):
        if key in entry and not isinstance(entry[key], str):
            problems.append(f"{where}.{key}: expected a string, got {shown(entry[key])}")


def _model_inputs(entry: dict, where: str, problems: list[str], duration: Callable) -> dict:
    """An option's model inputs, checked: scale_reaction (a duration, as seconds), target_utilisation
    (0.01–1), latency_bound_ms (> 0), latency_percentile (p50, p95 or p99)."""
    out: dict = {}
    if "scale_reaction" in entry:
        seconds = duration(entry, "scale_reaction", None, where, problems)
        if seconds is not None:
            out["scale_reaction"] = seconds
    for key, low, high in (("target_utilisation", Decimal("0.01"), Decimal(1)),
                           ("latency_bound_ms", Decimal("0.001"), Decimal(10) ** 9)):
        if key in entry:
            value = entry[key]
            try:
                number = Decimal(str(value)) if isinstance(value, (int, float, str)) and not isinstance(value, bool) \
                    else None
            except InvalidOperation:
                number = None
            if number is None or not number.is_finite() or not low <= number <= high:
                problems.append(f"{where}.{key}: expected a number from {low} to {high:,}, got {shown(value)}")
            else:
                out[key] = number
    for key, value in (("hit_rate", entry.get("hit_rate")), ("cap_tokens", entry.get("cap_tokens"))):
        values = list(value.values()) if key == "hit_rate" and isinstance(value, dict) else [value]
        ok = (value is None or (key == "cap_tokens" and isinstance(value, int) and not isinstance(value, bool) and value >= 1)
              or (key == "hit_rate" and (not isinstance(value, dict) or set(value) == {"low", "expected", "high"})
                  and all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1 for v in values)))
        if not ok:
            problems.append(f"{where}.{key}: expected " + ("a whole number of tokens >= 1" if key == "cap_tokens" else
                            "a number from 0 to 1, or { low, expected, high } of them") + f", got {shown(value)}")
    percentile = entry.get("latency_percentile")
    if percentile is not None and percentile not in LATENCY_PERCENTILES:
        problems.append(f"{where}.latency_percentile: expected one of {', '.join(LATENCY_PERCENTILES)}, "
                        f"got {shown(percentile)}")
    return out
