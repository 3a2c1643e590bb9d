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
