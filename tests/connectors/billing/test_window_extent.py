"""A window that no billing line falls in is named with where the lines do lie (rule 5).

The audit refused such a case with "no billing line falls in the window …" and nothing more: the user
was left to find out that the export covers another month. Every local billing reader now notes, for a
source with lines but none in the window, the first and last moment of its charge periods, and the
audit's refusal quotes it per source.
"""
from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from connectors.base import ReadContext, SourceSpec
from connectors.registry import resolve
from tests.audit.cli.test_cli import costaudit
from tests.connectors.billing.test_focus import SAMPLE
from tests.paths import DATA, FIXTURES
from tests.servers.gcp_export import row

FAR = (datetime(1990, 1, 1, tzinfo=timezone.utc), datetime(1990, 2, 1, tzinfo=timezone.utc))
SOURCES = {
    "focus": ("focus", SAMPLE),
    "cur-csv": ("cur", FIXTURES / "wa_labs_efficiency" / "data" / "workload_efficiency_step5_cur_2019-11-29_savingsplans.csv.gz"),
    "cur-parquet": ("cur", DATA / "billing" / "aws_wa_labs" / "Dec2018-WorkshopCUR-00001.snappy.parquet"),
    "azure": ("azure", FIXTURES / "azure_synthetic" / "mca_amortized_gpu.csv"),
}


def tables(fmt: str, path: Path, window=FAR) -> dict:
    """The tables of ``path`` read as ``fmt`` over ``window``."""
    spec = SourceSpec(name="bill", kind="billing", format=fmt, path=path, options={})
    ctx = ReadContext(start=window[0], end=window[1], currency="USD")
    return resolve(fmt)(spec, ctx).read().tables


def extent(found: dict) -> list[str]:
    """The source's notes that say where its charge periods lie."""
    notes = found.get("notes")
    return [] if notes is None else [n for n in notes["note"] if n.startswith("no line in the window")]


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_a_source_with_no_line_in_the_window_says_where_its_lines_lie(name):
    fmt, path = SOURCES[name]
    everything = tables(fmt, path, (datetime(1970, 1, 1, tzinfo=timezone.utc), datetime(2200, 1, 1, tzinfo=timezone.utc)))
    assert len(everything["lines"]) and not extent(everything)  # a window with lines: no such note
    found = tables(fmt, path)
    assert found["lines"].empty
    (note,) = extent(found)
    first = everything["lines"]["start"].min()
    last = everything["lines"]["end"].max()
    assert note == (f"no line in the window: its charge periods run from {first:%Y-%m-%d %H:%M} "
                    f"to {last:%Y-%m-%d %H:%M} UTC")


def test_a_gcp_export_with_no_line_in_the_window_says_where_its_lines_lie(tmp_path):
    path = tmp_path / "export.jsonl"
    hours = [datetime(2026, 9, 1, h, tzinfo=timezone.utc) for h in (3, 7)]
    path.write_text("".join(json.dumps(dict(row(h, "Compute Engine", "N2 Instance Core", "1.5"), currency="USD")) + "\n"
                            for h in hours))
    assert extent(tables("gcp_billing", path)) == [
        "no line in the window: its charge periods run from 2026-09-01 03:00 to 2026-09-01 08:00 UTC"]


def test_the_audit_refusal_quotes_each_source(tmp_path):
    case = tmp_path / "demo"
    shutil.copytree(FIXTURES / "demo", case)
    text = (case / "case.toml").read_text()
    (case / "case.toml").write_text(text.replace('window = ["2026-09-01", "2026-10-01"]',
                                                 'window = ["2026-11-01", "2026-12-01"]'))
    done = costaudit("validate", case)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert ("no billing line falls in the window 2026-11-01 – 2026-12-01; aws-focus: no line in the window: "
            "its charge periods run from 2026-09-01 00:00 to 2026-10-01 00:00 UTC") in done.stderr


def test_a_source_with_no_line_in_the_window_beside_one_with_lines_is_refused(tmp_path):
    """Before: a traceback (TypeError comparing the empty source's dates); without it the source's lines
    would have been dropped unnamed. Now the source is refused with where its lines lie."""
    case = tmp_path / "demo"
    shutil.copytree(FIXTURES / "demo", case)
    toml = case / "case.toml"
    toml.write_text(toml.read_text() + f'\n[[billing]]\nname = "sample"\nformat = "focus"\npath = "{SAMPLE}"\n')
    done = costaudit("validate", case)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert (f"costaudit: error: {SAMPLE}: column ChargePeriodStart: no line of billing source 'sample' falls in the "
            "window 2026-09-01 – 2026-10-01; sample: no line in the window: its charge periods run from "
            "2024-09-01 00:00 to 2024-10-01 00:00 UTC (expected lines whose charge period overlaps the window, else "
            "the source left out of the case)") in " ".join(done.stderr.split())
