"""Every FOCUS file the project ships or its tests write, linted against the FOCUS column model.

The linter is focus-data-toolkit's (``focus-toolkit validate FILE``'s checks, run in its own
environment, offline: :mod:`tests.connectors.billing.focus_toolkit`). What it finds must be one of
the accepted deviations of ``tests/data/focus_deviations.toml``, each named with its reason; an
entry that no longer explains anything fails too, so the list stays exact.

Shipped: every Cost and Usage and Contract Commitment file under ``fixtures/`` and ``tests/data/``
(the demo's billing, which ``fixtures/make_demo.py`` writes, included). Written by tests: the
hostile-input harness's FOCUS writer and the toolkit's own generated 1.2 and 1.3 files.
"""
from __future__ import annotations

import csv
import gzip
import io
import re
import tomllib
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

from tests.connectors.billing.focus_toolkit import VERSION, generate, lint
from tests.hostile.harness import focus_row, write_focus
from tests.paths import FIXTURES, ROOT, TEST_DATA

DEVIATIONS = TEST_DATA / "focus_deviations.toml"
SUFFIXES = (".csv", ".csv.gz", ".parquet")
#: folders of FOCUS files broken on purpose: linted whatever their header says
BROKEN = FIXTURES / "bad_focus"


def header(path: Path) -> list[str]:
    """The first record of a CSV / CSV.gz file, lower case ([] when unreadable)."""
    try:
        raw = gzip.open(path, "rb").read(1 << 16) if path.name.endswith(".gz") else path.read_bytes()[:1 << 16]
        first = next(csv.reader(io.StringIO(raw.decode("utf-8-sig", errors="replace"))), [])
    except (OSError, EOFError, csv.Error, StopIteration):
        return []
    return [name.strip().lower() for name in first]


def dataset_of(path: Path) -> str | None:
    """``cost-and-usage``, ``contract-commitment`` or None (not a FOCUS file) from the header."""
    names = header(path)
    if "contractcommitmentid" in names:
        return "contract-commitment"
    if "billedcost" in names or path.parent == BROKEN:
        return "cost-and-usage"
    return None


def shipped() -> dict[str, list[Path]]:
    """The FOCUS files under fixtures/ and tests/data, by dataset."""
    found: dict[str, list[Path]] = {"cost-and-usage": [], "contract-commitment": []}
    for root in (FIXTURES, TEST_DATA):
        for path in sorted(root.rglob("*")):
            if path.is_file() and path.name.endswith(SUFFIXES) and (kind := dataset_of(path)):
                found[kind].append(path)
    return found


def written(tmp: Path) -> dict[str, Path]:
    """The FOCUS files tests write, by the name the deviations give them."""
    files = {"written:hostile-harness.csv": write_focus(tmp / "harness.csv", focus_row(), focus_row("2.00", row=2))}
    for provider in ("aws", "gcp", "azure"):
        for version in ("1.2", "1.3"):
            made = generate(provider, version, tmp / f"{provider}-{version}", rows=200)
            files[f"written:toolkit-{version}-{provider}.csv"] = made["cost_and_usage"]
    return files


def load_deviations() -> list[dict]:
    entries = tomllib.loads(DEVIATIONS.read_text())["deviation"]
    for entry in entries:
        assert set(entry) == {"file", "rule", "why"} and entry["why"].strip(), f"malformed deviation {entry}"
        entry["rules"] = [entry["rule"]] if isinstance(entry["rule"], str) else list(entry["rule"])
    return entries


def explained(name: str, violation: str, entries: list[dict], used: set[int]) -> bool:
    """Whether an entry accepts this violation of this file (and note which)."""
    hit = False
    for i, entry in enumerate(entries):
        if fnmatchcase(name, entry["file"]) and any(fnmatchcase(violation, r) for r in entry["rules"]):
            used.add(i)
            hit = True
    return hit


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, dict]:
    """The lint of every file: name -> {"rows", "violations"} or {"error"}."""
    out: dict[str, dict] = {}
    for dataset, paths in shipped().items():
        linted = lint(dataset, paths)
        out.update({str(path.relative_to(ROOT)): linted[str(path)] for path in paths})
    files = written(tmp_path_factory.mktemp("focus-written"))
    linted = lint("cost-and-usage", list(files.values()))
    out.update({name: linted[str(path)] for name, path in files.items()})
    return out


def test_every_focus_file_conforms_or_its_deviation_is_named(results):
    entries, used = load_deviations(), set()
    unexplained = []
    for name, found in sorted(results.items()):
        violations = [f"unreadable:{found['error']}"] if "error" in found else list(found["violations"])
        unexplained += [f"{name}: {v}" for v in violations if not explained(name, v, entries, used)]
    assert not unexplained, "FOCUS deviations not in tests/data/focus_deviations.toml:\n" + "\n".join(unexplained)
    stale = [f"{e['file']} / {e['rule']}" for i, e in enumerate(entries) if i not in used]
    assert not stale, "deviations that explain nothing any more:\n" + "\n".join(stale)


def test_the_lint_covers_the_project_files(results):
    names = set(results)
    assert "fixtures/demo/billing/focus_2026-09.csv.gz" in names
    assert {"tests/data/focus13/cost_and_usage.csv", "tests/data/focus13/contract_commitment.csv"} <= names
    assert "fixtures/bad_focus/ragged.csv" in names and "fixtures/azure_synthetic/mca_amortized_gpu.csv" not in names
    assert results["fixtures/demo/billing/focus_2026-09.csv.gz"]["rows"] > 10_000


def test_the_project_13_fixture_and_the_toolkit_13_files_are_clean(results):
    assert results["tests/data/focus13/cost_and_usage.csv"]["violations"] == {}
    for provider in ("aws", "gcp", "azure"):
        assert set(results[f"written:toolkit-1.3-{provider}.csv"]["violations"]) == {
            "unknown_column:ProviderName", "unknown_column:PublisherName"}


def test_the_makefile_pins_the_same_toolkit():
    pinned = re.search(r"^FOCUS_TOOLKIT_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert pinned and pinned.group(1) == VERSION
    assert re.search(r"^test: .*\$\(FOCUS_VENV\)/\.ok-\$\(FOCUS_TOOLKIT_VERSION\)", (ROOT / "Makefile").read_text(), re.M)
