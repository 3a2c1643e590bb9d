"""`costaudit init DIR --from SOURCE…`: a fitted case written, never over a file; a case given to
--from gets its fitted case beside it; bad arguments are one line and exit 1."""
from __future__ import annotations

import tomllib

from tests.audit.cli.test_cli import costaudit
from tests.paths import DATA, DEMO, FIXTURES

BILL = DEMO / "billing" / "focus_2026-09.csv.gz"
METRICS = FIXTURES / "offline_telemetry" / "opencost_allocation.json"
SACCT = FIXTURES / "offline_telemetry" / "sacct.txt"


def test_init_from_takes_every_path_after_it_and_never_overwrites(tmp_path):
    folder = tmp_path / "mycase"
    done = costaudit("init", folder, "--from", BILL, METRICS, SACCT)
    assert done.returncode == 0, done.stderr
    assert f"wrote {folder / 'case.toml'}" in done.stdout and "service  train" in done.stdout
    written = tomllib.loads((folder / "case.toml").read_text())
    assert [s["format"] for s in written["billing"] + written["telemetry"]] == ["focus", "opencost", "sacct"]
    assert costaudit("validate", folder).returncode == 0
    again = costaudit("init", folder, "--from", BILL)
    assert again.returncode == 1 and "already exists; not overwriting it" in again.stderr


def test_init_from_the_case_in_dir_writes_the_fitted_case_beside_it(tmp_path):
    folder = tmp_path / "c"
    assert costaudit("init", folder, "--from", BILL, "--from", METRICS).returncode == 0
    before = (folder / "case.toml").read_text()
    done = costaudit("init", folder, "--from", folder)
    assert done.returncode == 0, done.stderr
    assert (folder / "case.toml").read_text() == before
    fitted = tomllib.loads((folder / "case.fitted.toml").read_text())
    assert [s["name"] for s in fitted["billing"]] == ["focus_2026-09"]
    assert "case.fitted.toml" in done.stdout
    assert costaudit("init", folder, "--from", folder).returncode == 1  # the fitted file exists now
    other = costaudit("init", tmp_path / "d", "--from", folder / "case.toml")
    assert other.returncode == 0 and (tmp_path / "d" / "case.toml").is_file()


def test_init_bad_arguments_are_one_line(tmp_path):
    stray = costaudit("init", tmp_path / "x", BILL)
    assert stray.returncode == 1 and "sources follow --from" in stray.stderr
    unknown = costaudit("init", tmp_path / "y", "--from", DATA / "traffic" / "AzureLLMInferenceTrace_code.csv")
    assert unknown.returncode == 1 and "cannot tell its format; tried" in unknown.stderr
    assert "Traceback" not in unknown.stderr and not (tmp_path / "y").exists()
    window = costaudit("init", tmp_path / "z", "--from", BILL, "--window", "2026-10-01", "2026-09-01")
    assert window.returncode == 1 and "the end must come after the start" in window.stderr
    lone = costaudit("init", tmp_path / "w", "--window", "2026-09-01", "2026-10-01")
    assert lone.returncode == 1 and "--window needs --from" in lone.stderr
    a_file = tmp_path / "audit.json"  # before: FileExistsError, a traceback
    a_file.write_text("{}")
    for args in (("--from", BILL), ()):
        done = costaudit("init", a_file, *args)
        assert done.returncode == 1 and "exists and is not a folder" in done.stderr and "Traceback" not in done.stderr
    assert a_file.read_text() == "{}"


def test_init_from_with_a_window_clips_the_case(tmp_path):
    done = costaudit("init", tmp_path / "w", "--from", BILL, "--window", "2026-09-10", "2026-09-20")
    assert done.returncode == 0, done.stderr
    written = tomllib.loads((tmp_path / "w" / "case.toml").read_text())
    assert written["case"]["window"] == ["2026-09-10", "2026-09-20"]


def test_init_warns_when_no_billing_line_falls_in_the_window_given(tmp_path):
    """Before: exit 0, no word, and the case's comments described September; only validate said
    "no billing line falls in the window". Now a warning on stderr and above the window."""
    done = costaudit("init", tmp_path / "w", "--from", BILL, "--window", "2027-01-01", "2027-02-01")
    assert done.returncode == 0, done.stderr
    said = (f"no billing line of {BILL} falls in the window 2027-01-01 – 2027-02-01; "
            "the billing covers 2026-09-01 – 2026-10-01")
    assert f"costaudit: warning: {said}\n" in done.stderr
    text = (tmp_path / "w" / "case.toml").read_text()
    assert (f"# the window given with --window\n# warning: {said}\n"
            'window = ["2027-01-01", "2027-02-01"]\n') in text
    inside = costaudit("init", tmp_path / "v", "--from", BILL, "--window", "2026-09-10", "2026-09-20")
    assert "falls in the window" not in inside.stderr + (tmp_path / "v" / "case.toml").read_text()


def test_a_profile_without_requests_is_named_by_validate_and_run(tmp_path):
    """Before: `init --from` bill, metrics and profile wrote [[profiles]] without requests; validate said
    "valid" and run "reconciliation: not_measured (gap n/a, tolerance 0.02)" with no word on why."""
    profile = DEMO / "profiles" / "h100_qwen1.5-0.5b-chat.prefill_decode.derived.json.gz"
    case = tmp_path / "c"
    done = costaudit("init", case, "--from", BILL, DEMO / "telemetry" / "metrics.om.gz", profile)
    assert done.returncode == 0, done.stderr
    said = ("costaudit: warning: profile h100_qwen1.5-0.5b-chat.prefill_decode.derived of service chat states no "
            "requests count: its kernel-seconds per request cannot be measured, so the bottom-up cost per request "
            "cannot be reconciled (reconciliation not_measured); give requests = N, the requests served in the "
            "traced window\n")
    valid = costaudit("validate", case)
    assert valid.returncode == 0 and said in valid.stderr
    run = costaudit("run", case, "--out", tmp_path / "out", "--format", "json", "--quiet")
    assert run.returncode == 0 and said in run.stderr
    assert ("reconciliation: not_measured (gap n/a, tolerance 0.02): no service's kernel time is estimated from a "
            "kernel profile with its traffic (services chat, embed)") in run.stdout


def test_init_proposes_the_usage_days_and_names_what_lies_outside(tmp_path):
    """Before: the window was every line's span (a month of Tax lines, a Purchase dated 09-21), and
    the case's own validate warned "no billing source has a usage line on 16 of the window's 30
    day(s)" (18 for the EA file). Now the window is the usage lines' whole days, and the comment
    names the lines reaching outside it and that widening the window takes them in."""
    billing = DATA / "billing"
    cur = costaudit("init", tmp_path / "cur", "--from", billing / "focus_converters" / "aws_cur1_anonymized_2023-11.csv")
    assert cur.returncode == 0, cur.stderr
    text = (tmp_path / "cur" / "case.toml").read_text()
    assert tomllib.loads(text)["case"]["window"] == ["2023-11-01", "2023-11-15"]
    assert ("# the whole UTC days of the billing's usage lines: 2023-11-01 00:00 – 2023-11-14 04:00 UTC "
            "(end exclusive)\n# outside it: 12 Tax line(s) of 2023-11-01 – 2023-12-01, 0.08 USD "
            "(0.04 USD of it after 2023-11-15, left out)\n"
            "# a window widened to 2023-11-01 – 2023-12-01 takes them in\n") in text
    checked = costaudit("validate", tmp_path / "cur")
    assert checked.returncode == 0 and "usage line on" not in checked.stderr, checked.stderr
    ea = costaudit("init", tmp_path / "ea", "--from", billing / "msft_finops_toolkit" / "EA_ActualCost_Small.csv")
    assert ea.returncode == 0, ea.stderr
    text = (tmp_path / "ea" / "case.toml").read_text()
    assert tomllib.loads(text)["case"]["window"] == ["2023-09-04", "2023-09-06"]
    assert ("# outside it: 1 Purchase line(s) of 2023-09-21 – 2023-09-22, 0.00 USD effective, billed 3.25 (all of it after "
            "2023-09-06, left out)\n# a window widened to 2023-09-04 – 2023-09-22 takes them in\n") in text
    checked = costaudit("validate", tmp_path / "ea")
    assert checked.returncode == 0 and "usage line on" not in checked.stderr, checked.stderr
