"""The command line: start-up imports, exit codes, bad input leaves no output."""
from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import DEMO, ROOT, SHARED

HEAVY = ("torch", "weasyprint", "boto3", "google", "matplotlib", "duckdb", "pandas")


def costaudit(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "audit", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=600)


def test_help_imports_nothing_heavy():
    code = ("import sys\nfrom audit.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def test_init_writes_a_template_that_loads(tmp_path):
    from audit.case import load_case
    result = costaudit("init", tmp_path / "new")
    assert result.returncode == 0, result.stderr
    case = load_case(tmp_path / "new")
    assert case.cost_basis == "effective" and "chat" in case.services
    assert costaudit("init", tmp_path / "new").returncode == 1  # never overwrites


@pytest.fixture()
def demo_copy(tmp_path) -> Path:
    target = tmp_path / "case"
    shutil.copytree(DEMO, target)
    return target


def test_unknown_key_suggests_the_nearest(demo_copy, tmp_path):
    text = (demo_copy / "case.toml").read_text().replace("tolerance", "tolerence", 1)
    (demo_copy / "case.toml").write_text(text)
    result = costaudit("run", demo_copy, "--out", tmp_path / "out", "--format", "json")
    assert result.returncode == 1
    assert "did you mean 'tolerance'" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_misspelt_format_names_its_source_and_the_nearest(demo_copy):
    """Before: "case.toml: column format: unknown format 'fokus' (expected one of <all 16>)", naming no source;
    still found with the case's other problems (test_validate_reports_every_problem_at_once)."""
    toml = (demo_copy / "case.toml").read_text()
    assert toml.count('format = "focus"') == 1
    (demo_copy / "case.toml").write_text(toml.replace('format = "focus"', 'format = "fokus"'))
    result = costaudit("validate", demo_copy)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == (f"costaudit: error: {demo_copy / 'case.toml'}: column format: source 'aws-focus': "
                                     "unknown billing format 'fokus'; did you mean 'focus'? (expected one of athena, "
                                     "azure, cur, focus, gcp_billing)")


def _corrupt_billing(case: Path, transform) -> None:
    path = case / "billing" / "focus_2026-09.csv.gz"
    text = gzip.decompress(path.read_bytes()).decode()
    path.write_bytes(gzip.compress(transform(text).encode(), mtime=0))


@pytest.mark.parametrize("transform, expected", [
    (lambda t: t.replace('"BilledCost"', '"BilledKost"', 1), "BilledCost"),
    (lambda t: t.replace('"USD"', '"EUR"', 1), "EUR"),
])
def test_bad_billing_exits_1_and_writes_nothing(demo_copy, tmp_path, transform, expected):
    _corrupt_billing(demo_copy, transform)
    out = tmp_path / "out"
    result = costaudit("run", demo_copy, "--out", out, "--format", "json,html")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "focus_2026-09.csv.gz" in result.stderr and expected in result.stderr
    assert not out.exists() or not any(out.iterdir())


def test_truncated_gzip_is_an_input_error(demo_copy, tmp_path):
    path = demo_copy / "billing" / "focus_2026-09.csv.gz"
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    result = costaudit("run", demo_copy, "--out", tmp_path / "out", "--format", "json")
    assert result.returncode == 1
    assert "gzip" in result.stderr.lower() and "focus_2026-09.csv.gz" in result.stderr


def test_window_without_billing_lines(demo_copy, tmp_path):
    text = (demo_copy / "case.toml").read_text()
    import re
    text = re.sub(r'window = \[[^\]]*\]', 'window = ["2025-01-01", "2025-02-01"]', text)
    (demo_copy / "case.toml").write_text(text)
    result = costaudit("run", demo_copy, "--out", tmp_path / "out", "--format", "json")
    assert result.returncode == 1
    assert "no billing line" in result.stderr


def test_a_loaded_rate_of_zero_is_refused(demo_copy):
    """At 0 an hour every option cost nothing and paid back at once (payback 0.00 months for all)."""
    (demo_copy / "case.toml").write_text((demo_copy / "case.toml").read_text().replace(
        "loaded_rate = 150", "loaded_rate = 0", 1))
    result = costaudit("validate", demo_copy)
    assert result.returncode == 1 and "[case].loaded_rate: expected a number between 0.01 and 1,000,000,000" in result.stderr


def test_unknown_format_lists_the_valid_ones(demo_copy, tmp_path):
    text = (demo_copy / "case.toml").read_text().replace('format = "openmetrics"', 'format = "openmetricz"')
    (demo_copy / "case.toml").write_text(text)
    result = costaudit("validate", demo_copy)
    assert result.returncode == 1
    assert "openmetricz" in result.stderr and "openmetrics" in result.stderr


def test_validate_accepts_the_demo():
    result = costaudit("validate", DEMO)
    assert result.returncode == 0, result.stderr


def test_does_not_reconcile_exits_2_and_still_writes(demo_copy, tmp_path):
    text = (demo_copy / "case.toml").read_text()
    text = text.replace("requests = 16", "requests = 12")  # profile now overstates kernel-seconds per request
    (demo_copy / "case.toml").write_text(text)
    out = tmp_path / "out"
    result = costaudit("run", demo_copy, "--out", out, "--format", "json")
    assert result.returncode == 2, result.stdout + result.stderr
    assert (out / "audit.json").exists()
    assert "does_not_reconcile" in result.stdout


def test_validate_reports_every_problem_at_once(demo_copy):
    text = (demo_copy / "case.toml").read_text().replace('format = "openmetrics"', 'format = "openmetricz"')
    (demo_copy / "case.toml").write_text(text)
    profile = demo_copy / json.loads((DEMO / "truth.json").read_text())["profile"]["trace"]  # the one the case reads
    profile.write_bytes(b"not a trace")
    result = costaudit("validate", demo_copy)
    assert result.returncode == 1
    assert "openmetricz" in result.stderr and profile.name in result.stderr


def test_validate_checks_the_case_currency(demo_copy):
    (demo_copy / "case.toml").write_text((demo_copy / "case.toml").read_text().replace('"USD"', '"EUR"', 1))
    result = costaudit("validate", demo_copy)
    assert result.returncode == 1
    assert "BillingCurrency" in result.stderr and "EUR" in result.stderr


def test_demo_output_passes_the_contract_checker(demo_run):
    result, out = demo_run
    assert result.returncode == 0, result.stderr
    checker = subprocess.run([sys.executable, str(SHARED / "tools" / "check_audit_json.py"), str(out / "audit.json")],
                             capture_output=True, text=True)
    assert checker.returncode == 0, checker.stdout


def test_a_command_runs_with_the_tuned_collector_and_gives_the_thresholds_back(monkeypatch):
    """`costaudit` sets the cyclic collector's thresholds for the command (GC_THRESHOLDS) and
    restores the caller's after it, even when the command exits with an error."""
    import gc

    import audit.cli as cli

    seen = []
    monkeypatch.setattr(cli, "app", lambda **_: (seen.append(gc.get_threshold()), sys.exit(1)))
    before = gc.get_threshold()
    with pytest.raises(SystemExit):
        cli.main(["validate", "nowhere"])
    assert seen == [cli.GC_THRESHOLDS] and gc.get_threshold() == before != cli.GC_THRESHOLDS


def test_the_summary_says_no_spend_in_scope_where_shares_are_none(capsys, tmp_path):
    """A case over FOCUS purchase_scenario_2 keeps 0 in scope: every bucket's share is None, which
    the console printed as "(None)". Now "(no spend in scope)"; a share is printed as before."""
    from audit.cli.run import _summary

    buckets = {name: {"amount": "0.00", "share": None}
               for name in ("model_compute", "serving_path", "platform_overhead", "unattributed")}
    document = {"buckets": buckets, "currency": "USD", "cost_basis": "effective", "total": "0.00",
                "reconciliation": {"verdict": "reconciled", "gap": "0.00", "tolerance": "0.02"}}
    _summary(document, tmp_path, [])
    out = capsys.readouterr().out
    assert "  model_compute                0.00 USD  (no spend in scope)\n" in out and "(None)" not in out
    buckets["model_compute"] = {"amount": "1.00", "share": "100.0%"}
    _summary(document, tmp_path, [])
    assert "  model_compute                1.00 USD  (100.0%)\n" in capsys.readouterr().out


def test_an_empty_source_names_its_format_with_the_right_article(demo_copy):
    """Before: "file is empty (expected a openmetrics file)"."""
    (demo_copy / "telemetry" / "metrics.om.gz").write_bytes(b"")
    result = costaudit("validate", demo_copy)
    assert result.returncode == 1
    assert "metrics.om.gz: file is empty (expected an openmetrics file)" in result.stderr


@pytest.mark.parametrize("command", ["run", "review"])
def test_help_names_quiet_in_plain_text(command):
    """Before: `run --help` and `review --help` showed "``--quiet``"."""
    result = costaudit(command, "--help")
    assert result.returncode == 0 and "``" not in result.stdout
    assert "unless --quiet." in " ".join(result.stdout.split())
