"""The four buckets of two audits side by side: amounts, shares, the change and its main driver
(the part that moved most, by name and service)."""
from __future__ import annotations

from decimal import Decimal

from audit.money import ZERO, cents
from audit.review.load import Audit, decimal_of
from audit.review.words import part_driver

BUCKETS = ("model_compute", "serving_path", "platform_overhead", "unattributed")


def parts_of(audit: Audit, bucket: str) -> dict[tuple[str, str | None], Decimal]:
    """A bucket's parts by (name, service), amounts in cents."""
    out: dict[tuple[str, str | None], Decimal] = {}
    for i, part in enumerate(audit.get("buckets", bucket).get("parts") or []):
        key = (str(part.get("name")), part.get("service"))
        out[key] = out.get(key, ZERO) + decimal_of(audit, part.get("amount"), f"buckets.{bucket}.parts[{i}].amount")
    return out


def bucket_rows(earlier: Audit, later: Audit, compare: bool = True) -> list[dict]:
    """One row per bucket; with ``compare`` False (the currencies differ) no change and no driver."""
    rows = []
    for bucket in BUCKETS:
        a0, a1 = _amount(earlier, bucket), _amount(later, bucket)
        row = {"bucket": bucket, "amount_from": _text(a0), "amount_to": _text(a1),
               "share_from": _share(earlier, bucket), "share_to": _share(later, bucket), "change": None,
               "driver": "not compared: the currencies differ"}
        if compare and a0 is not None and a1 is not None:
            p0, p1 = parts_of(earlier, bucket), parts_of(later, bucket)
            changes = {k: (p0.get(k, ZERO), p1.get(k, ZERO)) for k in set(p0) | set(p1)}
            row["change"] = str(cents(a1 - a0))
            row["driver"] = part_driver(changes)
        rows.append(row)
    return rows


def _amount(audit: Audit, bucket: str) -> Decimal | None:
    entry = audit.get("buckets", bucket, default=None)
    return None if entry is None else decimal_of(audit, entry.get("amount"), f"buckets.{bucket}.amount")


def _share(audit: Audit, bucket: str) -> str | None:
    entry = audit.get("buckets", bucket, default=None)
    return None if entry is None else entry.get("share")


def _text(value: Decimal | None) -> str | None:
    return None if value is None else str(cents(value))
