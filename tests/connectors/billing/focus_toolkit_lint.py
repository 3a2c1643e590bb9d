"""Run by the FOCUS toolkit's own interpreter (``.venv-focus``), never imported by the tests.

usage: .venv-focus/bin/python focus_toolkit_lint.py DATASET FILE...

Lints each file against the FOCUS column model of focus-data-toolkit (the checks of
``focus-toolkit validate FILE``, with every violation counted instead of the first 50 printed) and
prints one JSON object: file -> {"rows": N, "violations": {"rule:column": count}}.
"""
from __future__ import annotations

import json
import sys
from collections import Counter

from focus_data_toolkit.io.row_source import read_source_rows  # type: ignore[import-not-found]
from focus_data_toolkit.model.validator import (  # type: ignore[import-not-found]
    lint_focus_1_4_structure,
    resolve_dataset,
)


def lint(dataset: str, path: str) -> dict:
    """The distinct violations of one file, with how many rows (or cells) each was found on; a file
    the toolkit cannot read gives {"error": its message}."""
    name = resolve_dataset(dataset.replace("-", " "))
    try:
        rows = read_source_rows(path, dataset=name)
    except Exception as exc:  # noqa: BLE001 - any refusal of the file is its result
        return {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    report = lint_focus_1_4_structure(name, rows)
    found = Counter(f"{v.rule}:{v.column or '-'}" for v in report.violations)
    return {"rows": report.row_count, "violations": dict(sorted(found.items()))}


if __name__ == "__main__":
    print(json.dumps({path: lint(sys.argv[1], path) for path in sys.argv[2:]}, sort_keys=True))
