"""JsonReporter: audit.json, keys sorted, the same bytes for the same dict."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path


def _default(value):
    if isinstance(value, Decimal):  # money stays a decimal string (METHOD §9)
        return str(value)
    raise TypeError(f"audit.json cannot hold a {type(value).__name__}: {value!r}")


def dumps(audit: dict) -> str:
    """The audit.json text: sorted keys, 2-space indent, UTF-8 characters kept, final newline."""
    return json.dumps(audit, sort_keys=True, indent=2, ensure_ascii=False, default=_default) + "\n"


class JsonReporter:
    """Writes the audit dict as it is; its ``meta.format`` versions the file (docs/audit-json.md)."""

    report_type = "json"
    output = "audit.json"
    takes = "audit"
    is_dir = False

    def report(self, audit: dict, path: Path) -> None:
        Path(path).write_bytes(dumps(audit).encode("utf-8"))
