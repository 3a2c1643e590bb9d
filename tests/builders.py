"""Builders for in-memory tables, so engine tests need no files."""
from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pandas as pd

from connectors.base import SourceFrame, SourceSpec

UTC = timezone.utc


def line(row: int, **over) -> dict:
    """One BillingLine row with sensible defaults."""
    base = {
        "line_id": f"inline.csv:{row}", "row": row, "provider": "AWS", "billing_account_id": "999",
        "sub_account_id": "111", "service_name": "Amazon Elastic Compute Cloud", "service_category": "Compute",
        "charge_category": "Usage", "charge_class": "", "charge_description": "", "charge_frequency": "Usage-Based",
        "start": pd.Timestamp("2026-09-01T00:00:00Z"), "end": pd.Timestamp("2026-09-01T01:00:00Z"),
        "billed_cost": Decimal("1"), "effective_cost": Decimal("1"), "list_cost": None, "contracted_cost": None,
        "list_unit_price": None, "contracted_unit_price": None, "pricing_quantity": None,
        "consumed_quantity": None, "pricing_unit": "", "consumed_unit": "", "pricing_category": "Standard",
        "commitment_discount_id": "", "commitment_discount_status": "", "commitment_discount_type": "",
        "resource_id": "", "resource_name": "", "resource_type": "", "region": "us-east-1", "sku_id": "",
        "sku_price_id": "", "currency": "USD", "tags": "{}", "extra": "{}",
    }
    base.update(over)
    return base


def lines_frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    for col in ("start", "end"):
        frame[col] = pd.to_datetime(frame[col], utc=True).astype("datetime64[ns, UTC]")
    return frame


def frame(kind: str, fmt: str, tables: dict, name: str | None = None, **options) -> SourceFrame:
    spec = SourceSpec(name or f"{kind}-inline", kind, fmt, Path(f"/nonexistent/{kind}"), options)
    return SourceFrame(spec, tables, sum(len(t) for t in tables.values()), (None, None), "0" * 64)


def activity(rows: list[dict]) -> pd.DataFrame:
    defaults = {"gpu": "0", "uuid": "", "model_name": "H100", "pod": "", "namespace": "", "container": "",
                "step_seconds": 3600, "source": "DCGM_FI_PROF_GR_ENGINE_ACTIVE"}
    out = pd.DataFrame([{**defaults, **r} for r in rows])
    out["ts"] = pd.to_datetime(out["ts"], utc=True).astype("datetime64[ns, UTC]")
    return out


def window(start="2026-09-01", end="2026-10-01"):
    return (datetime.fromisoformat(start).replace(tzinfo=UTC), datetime.fromisoformat(end).replace(tzinfo=UTC))


def billing_case(folder: Path, name: str, window: tuple[str, str], basis: str, **source) -> Path:
    """A case folder whose case.toml names one billing source (``source``: format, path or uri, …)."""
    folder.mkdir(parents=True, exist_ok=True)
    entries = "\n".join(f"{key} = {_toml(value)}" for key, value in {"name": name, **source}.items())
    (folder / "case.toml").write_text(
        f'[case]\nname = "{name}"\nwindow = ["{window[0]}", "{window[1]}"]\ncurrency = "USD"\n'
        f'cost_basis = "{basis}"\nloaded_rate = 120\n\n[[billing]]\n{entries}\n')
    return folder


def _toml(value) -> str:
    """A TOML string literal (paths and URLs, as JSON escapes them)."""
    import json
    return json.dumps(str(value))
