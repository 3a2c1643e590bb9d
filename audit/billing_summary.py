"""The totals behind `costaudit billing`: the quick look at invoices a user takes before an audit.

Totals by ChargeCategory, ServiceName and currency (billed and effective), and GPU-hours by
instance type, for each source named on the command line. Money is never added across currencies:
every category and service total is kept per BillingCurrency; over sources in several currencies
each of their rows names its currency (one row per name and currency, no grand total across them).
The format is sniffed from the file's header unless given; a folder is sniffed by its first
billing data file (a README or PROVENANCE.md beside the exports is not one). A case folder
(one holding case.toml) stands for its ``[[billing]]`` sources, each read in the format it names.
FOCUS and CUR sources are totalled in DuckDB, where they lie (no line reaches pandas); Azure and
GCP exports still go through their connectors.

Notes say what a total lacks: a connector's own notes for its source (split cost allocation rows
set apart, lines clipped to the window, repeated line ids: table ``notes``), each as its source's
``notes`` (row, column, note) and as a line of the summary's notes; a pushed-down source says
which of its connector's checks the totals did not run (:data:`NOT_CHECKED`).
"""
from __future__ import annotations

import gzip
import json
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from audit.money import ZERO, cents, fmt, largest_remainder
from schemas.secrets import mask_url


def sniff_format(path: Path) -> str:
    """The billing format of a file, from its header (or first JSON record)."""
    import csv

    from connectors.bounds import EITHER, check_source_path
    from connectors.errors import InputError
    from connectors.header_hint import billing_format_of, header_hint

    check_source_path(path, EITHER, expected="a billing export file or folder")
    try:
        header = _header(path)
    except (OSError, ValueError, EOFError, csv.Error, RecursionError) as exc:
        raise InputError(path, f"unreadable header: {exc}",
                         expected="a billing export (CSV, CSV.gz, Parquet)") from None
    found = billing_format_of(header)
    if found:
        return found
    raise InputError(path, "cannot tell the billing format from its columns" + header_hint(header, ()),
                     expected="the columns of a FOCUS, CUR, Azure or GCP billing export, or --format "
                     "(focus, cur, azure, gcp_billing)")


#: the names a billing export's data files end in (CUR and FOCUS CSV or Parquet, Azure CSV, GCP JSON lines or Avro)
DATA_SUFFIXES = (".csv", ".csv.gz", ".parquet", ".avro", ".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz", ".json.gz")


def _header(path: Path) -> list[str]:
    name = path.name.lower()
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.name.lower().endswith(DATA_SUFFIXES))
        if not files:
            from connectors.billing.focus_load import folder_held
            from connectors.errors import InputError
            raise InputError(path, f"no billing data file in the folder; {folder_held(path)}",
                             expected=f"billing export files ({', '.join(DATA_SUFFIXES)}), or a case folder")
        return _header(files[0])
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq
        return pq.read_schema(path).names
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8-sig", errors="replace") as handle:
        first = handle.readline(1 << 20)
    if "\0" in first:
        from connectors.header_hint import utf16_hint
        with opener(path, "rb") as raw:
            head = raw.read(64)
        raise ValueError("NUL bytes in the first line: not CSV text" + utf16_hint(head))
    if first.lstrip().startswith("{"):
        return list(json.loads(first))
    import csv
    return next(csv.reader([first]), [])


def summarise(sources: list[str], fmt_name: str | None, window: tuple[datetime, datetime] | None,
              currency: str = "USD") -> dict:
    """Total every source; returns a JSON-able dict.

    FOCUS and CUR sources are aggregated in DuckDB (:mod:`connectors.billing.totals`): only the
    totals come back to Python. Azure and GCP exports go through their connectors (line-level);
    an ``s3://`` uri is downloaded into the cache first and then read like a local path.
    """
    from connectors.bounds import EITHER, check_source_path

    start, end = window or (datetime(1970, 1, 1, tzinfo=timezone.utc), datetime(2200, 1, 1, tzinfo=timezone.utc))
    notes: list[str] = []
    out: dict[str, Any] = {"sources": [], "by_category": defaultdict(_pair), "by_service": defaultdict(_pair),
                           "by_currency": defaultdict(_pair), "gpu_hours": defaultdict(lambda: ZERO), "notes": notes}
    for source, path, kind in _expanded(sources, fmt_name, notes):
        check_source_path(path, EITHER, expected="a billing export file or folder")  # a FIFO would block the read
        kind = kind or sniff_format(path)
        if kind == "focus" and path.is_dir():  # each FOCUS file a source of its own (no FOCUS reader takes a folder)
            from connectors.billing.focus_load import focus_files

            for file in focus_files(path):
                _total(out, f"{source.rstrip('/')}/{file.relative_to(path).as_posix()}", file, kind, (start, end),
                       currency)
            continue
        _total(out, source, path, kind, (start, end), currency)
    return _finish(out)


def _total(out: dict, source: str, path: Path, kind: str, window: tuple[datetime, datetime], currency: str) -> None:
    """Add one source file's (or CUR / GCP folder's) totals and its entry in ``sources``."""
    shown = mask_url(source)
    if kind in PUSHDOWN:
        rows, lines, found = _pushdown(out, path, kind, window, currency)
        out["notes"].append(f"{shown}: {NOT_CHECKED[kind]}")
    else:
        rows, lines, found = _connector(out, path, kind, window, currency)
    out["notes"] += [f"{shown}: row {n['row']}{', ' + n['column'] if n['column'] else ''}: {n['note']}"
                     for n in found or []]
    out["sources"].append({"source": shown, "format": kind, "rows": rows, "lines": lines,
                           **({"notes": found} if found else {})})


PUSHDOWN = ("focus", "cur")
#: what the totals pushed down to DuckDB do not check of what the source's connector notes
NOT_CHECKED = {
    "cur": "totalled in DuckDB where it lies: split cost allocation rows (EKS pod / ECS task shares) are left "
           "out of the totals but not counted here, and money on split rows, repeated line ids and lines "
           "straddling the window (clipped pro rata) are not noted; `costaudit run` reads the source through "
           "its connector, which notes them",
    "focus": "totalled in DuckDB where it lies: repeated lines are not looked for and lines straddling the "
             "window (clipped pro rata) are not noted; `costaudit run` reads the source through its connector, "
             "which checks and notes them",
}


def _expanded(sources: list[str], fmt_name: str | None, notes: list[str]) -> list[tuple[str, Path, str | None]]:
    """(name, local path, format or None to sniff) of each source; a case folder (holding
    case.toml) gives its ``[[billing]]`` sources in the formats it names, and a note saying so (its
    window is not applied: ``--window`` is)."""
    from audit.case import load_case
    from schemas.errors import UsageError

    out: list[tuple[str, Path, str | None]] = []
    for source in sources:
        path = _local(source)
        if not (path.is_dir() and (path / "case.toml").is_file()):
            out.append((source, path, fmt_name))
            continue
        case = load_case(path)
        billing = [s for s in case.sources if s.kind == "billing"]
        remote = [s.name for s in billing if s.path is None]
        if remote or not billing:
            raise UsageError(f"{source}: a case folder whose billing is not a local path "
                             f"({', '.join(remote) or 'no [[billing]] source'}): pass its billing file, folder or uri")
        out += [(str(s.path), s.path, s.format) for s in billing if s.path is not None]
        notes.append(f"{source}: the case's [[billing]] sources ({', '.join(s.name for s in billing)}), each in "
                     "the format it names; the case's window is not applied (--window is)")
    return out


def _local(source: str) -> Path:
    """A local path for a source: itself, or the cached copy of an ``s3://`` uri."""
    if source.startswith("s3://"):
        from connectors.objectstore import materialise  # boto3 only when a uri is given
        return materialise(source, {})
    from connectors.bounds import resolved

    return resolved(source)


def _pushdown(out: dict, path: Path, kind: str, window: tuple[datetime, datetime],
              currency: str) -> tuple[int, int, list[dict]]:
    """Add one source's totals, aggregated in DuckDB; returns (rows read, lines in the window, the
    connector's notes on the period cells whose hour past 23 the totals carried into the next day)."""
    from connectors.billing.totals import read_totals

    totals = read_totals(path, kind, window, currency)
    source_currency = next(iter(totals.by_currency), currency)  # one per source (DuckDB checks it)
    for key, table in (("by_category", totals.by_category), ("by_service", totals.by_service),
                       ("by_currency", totals.by_currency)):
        for name, (billed, effective) in table.items():
            name = (name or "(none)") if key == "by_service" else name
            slot = out[key][name] if key == "by_currency" else out[key][(source_currency, name)]
            slot[0] += billed
            slot[1] += effective
    for name, hours in totals.gpu_hours.items():
        out["gpu_hours"][name] += hours
    if totals.unamortised:
        _unamortised_note(out, path, kind, window, currency)
    return totals.rows, totals.lines, _carried_notes(path, kind, window, currency) if totals.carried_hours else []


def _unamortised_note(out: dict, path: Path, kind: str, window: tuple[datetime, datetime], currency: str) -> None:
    """The note a line-level source gets (:func:`_connector`) where a commitment purchase's cost is in no
    line of the effective total: the source read through its connector, only where the totals saw a purchase
    billed but not effective and no commitment usage carrying amortisation (before: a FOCUS file of a
    purchase alone, billed 8760.00, effective 0.00, said nothing)."""
    from audit.bridge import unamortised_reason
    from audit.classify import classify
    from connectors.base import ReadContext, SourceSpec
    from connectors.registry import resolve

    frame = resolve(kind)(SourceSpec(path.name, "billing", kind, path, {}), ReadContext(window[0], window[1], currency)).read()
    unamortised = unamortised_reason(classify(frame.tables["lines"], (), set(), set()))
    if unamortised:
        out["notes"].append(f"{path.name}: effective total: {unamortised}")


def _carried_notes(path: Path, kind: str, window: tuple[datetime, datetime], currency: str) -> list[dict]:
    """The connector's notes on the period cells whose hour ran past 23 (``…T30:00:00Z`` read as the
    next day at 06:00), as `costaudit run` shows them: the source is read through its connector, only
    where the totals found such a cell (before: read so without a word)."""
    from connectors.base import ReadContext, SourceSpec
    from connectors.billing.focus_checks import HOUR_PAST_23
    from connectors.registry import resolve

    frame = resolve(kind)(SourceSpec(path.name, "billing", kind, path, {}), ReadContext(window[0], window[1], currency)).read()
    return [n for n in _notes_of(frame.tables.get("notes")) if n["note"].startswith(HOUR_PAST_23)]


def _connector(out: dict, path: Path, kind: str, window: tuple[datetime, datetime],
               currency: str) -> tuple[int, int, list[dict]]:
    """Add one source's totals through its connector (line-level); returns (rows, lines, the
    connector's notes as ``{row, column, note}``)."""
    from audit.bridge import unamortised_reason
    from audit.classify import classify
    from connectors.base import ReadContext, SourceSpec
    from connectors.registry import resolve
    from schemas.billing import line_total

    spec = SourceSpec(path.name, "billing", kind, path, {})
    frame = resolve(kind)(spec, ReadContext(window[0], window[1], currency)).read()
    lines = classify(frame.tables["lines"], (), set(), set())
    _accumulate(out, lines)
    unamortised = unamortised_reason(lines)  # an actual-cost export's purchase leaves the effective total
    if unamortised:
        out["notes"].append(f"{path.name}: effective total: {unamortised}")
    return frame.rows, line_total(lines), _notes_of(frame.tables.get("notes"))


def _notes_of(table) -> list[dict]:
    """A connector's table ``notes`` as ``{row, column, note}`` (column None where it names none)."""
    if table is None:
        return []
    return [{"row": int(n.row), "column": n.column or None, "note": n.note} for n in table.itertuples()]


def _pair():
    return [ZERO, ZERO]


def _accumulate(out: dict, lines) -> None:
    """Add classified lines' totals, and the GPU-hours of their gpu_compute lines and of the Core
    lines that bill their machine's GPUs (no GPU meter of the resource bills them:
    :func:`audit.lines.bundled_machines`, counted under the machine type, as the audit counts them)."""
    from audit.lines import as_machine, gpu_hours_of, gpu_sku_model
    records = lines.to_dict("records")
    for line, kind in zip(records, bundled_lines(records)):
        money = line["currency"]
        for key, value in (("by_category", (money, line["charge_category"])),
                           ("by_service", (money, line["service_name"] or "(none)")), ("by_currency", money)):
            out[key][value][0] += line["billed_cost"]
            out[key][value][1] += line["effective_cost"]
        if kind is not None:
            gpus, priced, consumed = as_machine(kind, line["pricing_quantity"], line["consumed_quantity"])
            out["gpu_hours"][line["machine_type"]] += gpu_hours_of(
                {"pricing_quantity": priced, "consumed_quantity": consumed, "gpus_per_instance": gpus})
        elif line["resource_class"] == "gpu_compute" and (line["gpus_per_instance"] or gpu_sku_model(line)):
            # a GPU meter or a GPU instance; a machine's vCPU / RAM part bills none of its GPU-hours
            out["gpu_hours"][line["instance_type"] or line["gpu_model"] or "(unknown)"] += gpu_hours_of(line)


def bundled_lines(records: list[dict]) -> list:
    """Each line's GPU machine type where it is a usage Core line billing that machine's GPUs, else None
    (also ``costaudit init --from``'s billing facts, audit/discover/billing.py)."""
    from audit.classify import is_hourly_usage
    from audit.lines import bundled_machines, resource_key

    hourly = [is_hourly_usage(line) for line in records]
    usage = [line for line, flag in zip(records, hourly) if flag]
    kinds = iter(bundled_machines([resource_key(line["resource_id"] or "") or line["line_id"] for line in usage],
                                  [line["machine_type"] for line in usage],
                                  [line["charge_description"] or "" for line in usage],
                                  [line["gpus_per_instance"] for line in usage]))
    return [next(kinds) if flag else None for flag in hourly]


def _finish(out: dict) -> dict:
    """The JSON-able summary. Category and service rows are keyed by (currency, name): with one
    currency they are ``{name, billed, effective}``; with several, ``{name, currency, billed,
    effective}``, one row per name and currency, ordered by currency."""
    several = len(out["by_currency"]) > 1

    def amounts(v) -> dict:
        return {"billed": str(cents(v[0])), "effective": str(cents(v[1]))}

    def per_currency(rows) -> list[dict]:
        """Rows rounded together per currency (largest remainder), so that they add up to its total."""
        ordered = sorted(rows.items(), key=lambda kv: (kv[0][0], -kv[1][0], kv[0][1]) if several
                         else (-kv[1][0], kv[0][1]))
        rounded: dict = {}  # (currency, name) -> [billed, effective]
        for column in (0, 1):
            for money in {money for money, _ in rows}:
                mine = {key: v[column] for key, v in rows.items() if key[0] == money}
                for key, value in largest_remainder(mine).items():
                    rounded.setdefault(key, [None, None])[column] = value
        return [{"name": name, **({"currency": money} if several else {}),
                 "billed": str(rounded[(money, name)][0]), "effective": str(rounded[(money, name)][1])}
                for (money, name), _ in ordered]

    currencies = [{"name": k, **amounts(v)}
                  for k, v in sorted(out["by_currency"].items(), key=lambda kv: (-kv[1][0], kv[0]))]
    return {"sources": out["sources"], "by_charge_category": per_currency(out["by_category"]),
            "by_service": per_currency(out["by_service"]), "by_currency": currencies,
            "gpu_hours_by_instance_type": [{"instance_type": k, "gpu_hours": fmt(v, 2)}
                                           for k, v in sorted(out["gpu_hours"].items())],
            "notes": out["notes"]}


__all__ = ["sniff_format", "summarise"]
