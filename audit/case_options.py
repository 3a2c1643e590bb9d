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


#: an option's bands and each band table's range (``costaudit whatif`` sets each band of these); the
#: band-valued model inputs, where one number may also stand for all three bands; the largest loaded
#: rate (an hour) and run cost (a month)
OPTION_BANDS, BAND_KEYS = ("low", "expected", "high"), {"recoverable": (0, 1), "effort_hours": (0, 1e6)}
BAND_INPUTS = {"hit_rate": (0, 1)}
MAX_RATE, MAX_RUN_COST = Decimal(10) ** 9, 1e12


def _bands_fit(value, low: float, high: float, single: bool) -> bool:
    """``value`` is ``{ low, expected, high }`` of numbers from ``low`` to ``high`` with
    low ≤ expected ≤ high (or, where ``single``, one such number): bands out of order would give a
    payback.low above the expected, a share above 1 a saving above its part."""
    if single and finite_number(value):
        return low <= value <= high
    if not isinstance(value, dict) or set(value) != set(OPTION_BANDS):
        return False
    bands = [value[b] for b in OPTION_BANDS]
    return all(finite_number(v) and low <= v <= high for v in bands) and bands == sorted(bands)


def _band_problem(entry: dict, key: str, bounds: tuple[float, float], where: str, single: bool = False) -> list[str]:
    """The case error of a band-valued key that does not fit (:func:`_bands_fit`), naming the option's
    id, the key and the order expected; [] where it fits or is not given."""
    low, high = bounds
    if key not in entry or _bands_fit(entry[key], low, high, single):
        return []
    bound = f"from {low} to {high:,.0f}"
    expected = (f"a number {bound}, or {{ low, expected, high }} of them" if single
                else f"{{ low, expected, high }} of numbers {bound}")
    return [f"{where}.{key} (option {shown(entry.get('id'))}): expected {expected}, low ≤ expected ≤ high, "
            f"got {shown(entry[key])}"]


def _option_figures(entry: dict, where: str, problems: list[str]) -> None:
    """An option's band tables (:func:`_band_problem`), its run cost (a number ≥ 0), its title and
    reason (strings)."""
    for key, bounds in BAND_KEYS.items():
        problems += _band_problem(entry, key, bounds, where)
    run = entry.get("run_cost_per_month", 0)
    if not (finite_number(run) and 0 <= run < MAX_RUN_COST):
        problems.append(f"{where}.run_cost_per_month: expected a number from 0 to {MAX_RUN_COST:g} (money a "
                        f"month, in the case currency), got {shown(run)}")
    for key in ("title", "reason"):
        if key in entry and not isinstance(entry[key], str):
            problems.append(f"{where}.{key}: expected a string, got {shown(entry[key])}")


def _model_inputs(entry: dict, where: str, problems: list[str], duration: Callable) -> dict:
    """An option's model inputs, checked: scale_reaction (a duration, as seconds), target_utilisation
    (0.01–1), latency_bound_ms (> 0), hit_rate (a number 0–1 or a band table of them,
    :func:`_band_problem`), cap_tokens (a whole number ≥ 1), latency_percentile (p50, p95 or p99)."""
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
    for key, bounds in BAND_INPUTS.items():
        problems += _band_problem(entry, key, bounds, where, single=True)
    cap = entry.get("cap_tokens")
    if cap is not None and not (isinstance(cap, int) and not isinstance(cap, bool) and cap >= 1):
        problems.append(f"{where}.cap_tokens: expected a whole number of tokens >= 1, got {shown(cap)}")
    percentile = entry.get("latency_percentile")
    if percentile is not None and percentile not in LATENCY_PERCENTILES:
        problems.append(f"{where}.latency_percentile: expected one of {', '.join(LATENCY_PERCENTILES)}, "
                        f"got {shown(percentile)}")
    return out
