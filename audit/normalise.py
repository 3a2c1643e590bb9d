"""Stage 2: source frames -> checked tables at the audit grain (billing, telemetry, profiles)."""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import pandas as pd

from audit.case import Case
from audit.collect import Collected
from connectors.errors import InputError, InputErrors

ACTIVITY_COLUMNS = ["node", "gpu", "uuid", "model_name", "pod", "namespace", "container", "ts",
                    "step_seconds", "busy_fraction", "source"]
REQUEST_COLUMNS = ["ts", "namespace", "pod", "node", "gpus"]
TRAFFIC_COLUMNS = ["ts", "model_name", "namespace", "pod", "requests", "prompt_tokens", "generated_tokens"]
QUEUE_COLUMNS = ["ts", "model_name", "namespace", "pod", "running", "waiting"]
NODE_COLUMNS = ["node", "provider_id", "resource_id", "instance_type"]


@dataclass(frozen=True)
class ProfileSummary:
    """A service's kernel profile reduced to what the split and reconciliation need."""

    name: str
    service: str
    path: str
    gap_ratio: Decimal | None
    gap_basis: str
    kernel_active_us: Decimal
    gpu_window_us: Decimal
    requests: int | None
    prompt_tokens: int | None
    generated_tokens: int | None
    summary: dict
    kernels: pd.DataFrame
    categories: pd.DataFrame

    @property
    def kernel_seconds_per_request(self) -> Decimal | None:
        if not self.requests:
            return None
        return self.kernel_active_us / Decimal(1_000_000) / Decimal(self.requests)


@dataclass
class Telemetry:
    """Telemetry tables concatenated over sources (empty frames when absent)."""

    activity: pd.DataFrame
    nodes: pd.DataFrame
    requests: pd.DataFrame
    traffic: pd.DataFrame
    queue: pd.DataFrame
    step: int


def billing_lines(case: Case, collected: Collected) -> pd.DataFrame:
    """Every billing line read, with its source name; currency and window checked."""
    frames = []
    for frame in collected.of("billing"):
        lines = frame.tables["lines"].copy()
        lines["source"] = frame.spec.name
        lines["source_path"] = frame.spec.where
        frames.append(lines)
    lines = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    _check_currency(case, lines)
    if lines.empty:
        paths = ", ".join(f.spec.where for f in collected.of("billing")) or str(case.path)
        raise InputError(paths, f"no billing line falls in the window {case.start:%Y-%m-%d} – {case.end:%Y-%m-%d}",
                         column="ChargePeriodStart", expected="lines whose charge period overlaps the window")
    return lines


def _check_currency(case: Case, lines: pd.DataFrame) -> None:
    if lines.empty:
        return
    bad = lines[lines["currency"] != case.currency]
    errors = [InputError(r.source_path, f"currency {r.currency!r} differs from the case's (line {r.line_id})",
                         row=int(r.row), column="BillingCurrency", expected=case.currency)
              for r in bad.head(20).itertuples()]
    if errors:
        raise InputErrors(errors)


def telemetry(case: Case, collected: Collected) -> Telemetry:
    """Telemetry tables, empty with the right columns where no source has them."""
    def table(name, columns):
        found = collected.table("telemetry", name)
        return found if found is not None else pd.DataFrame({c: [] for c in columns})
    activity = table("gpu_activity", ACTIVITY_COLUMNS)
    step = case.step_seconds or (int(activity["step_seconds"].iloc[0]) if len(activity) else 3600)
    nodes = table("node_info", NODE_COLUMNS).drop_duplicates("node", keep="last")
    return Telemetry(activity, nodes, table("gpu_requests", REQUEST_COLUMNS), _traffic(collected),
                     table("queue", QUEUE_COLUMNS), step)


def _traffic(collected: Collected) -> pd.DataFrame:
    """Request counts of every telemetry source, each row naming the source that counted it."""
    parts = []
    for frame in collected.of("telemetry"):
        table = frame.tables.get("traffic")
        if table is not None and len(table):
            parts.append(table.assign(source=f"{frame.spec.name} ({frame.spec.format})"))
    if not parts:
        return pd.DataFrame({c: [] for c in TRAFFIC_COLUMNS + ["source"]})
    return pd.concat(parts, ignore_index=True)


def profiles(collected: Collected) -> dict[str, ProfileSummary]:
    """One profile per service (the first declared wins; others are kept as evidence only)."""
    out: dict[str, ProfileSummary] = {}
    for frame in collected.of("profiles"):
        row = frame.tables["profile"].iloc[0].to_dict()
        opts = frame.spec.options
        gap = row.get("gap_ratio")
        summary = ProfileSummary(
            name=frame.spec.name, service=str(opts.get("service")), path=frame.spec.where,
            gap_ratio=None if gap is None or pd.isna(gap) else Decimal(repr(float(gap))),
            gap_basis=str(row.get("gap_basis", "gpu_window")),
            kernel_active_us=Decimal(repr(float(row["kernel_active_us"]))),
            gpu_window_us=Decimal(repr(float(row["gpu_window_us"]))),
            requests=opts.get("requests"), prompt_tokens=opts.get("prompt_tokens"),
            generated_tokens=opts.get("generated_tokens"), summary=row,
            kernels=_with_columns(frame.tables.get("kernels"), ["name", "category", "count", "total_us"]),
            categories=_with_columns(frame.tables.get("categories"), ["category", "total_us"]))
        out.setdefault(summary.service, summary)
    return out


def _with_columns(table: pd.DataFrame | None, columns: list[str]) -> pd.DataFrame:
    """The table, or an empty one with the expected columns."""
    if table is None or not set(columns) <= set(table.columns):
        return pd.DataFrame({c: [] for c in columns})
    return table
