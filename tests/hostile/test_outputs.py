"""The output set: written whole or not at all, interrupts cleaned up, the output folder never
outside out/ by default and never the case folder.

Before: every report was staged inside --out and renamed one by one, so a failure after the first
rename (an existing ``out/tables`` that is a file) left a new report.pdf beside old tables;
SIGTERM left ``.*.tmp`` files inside --out; a case named ``/abs/path`` or ``../../x`` wrote its
reports outside the working folder. Now (audit/render.py, audit/cli/run.py) the set is written into
one folder beside --out and swapped in with one rename, SIGINT and SIGTERM end the run with 130 /
143 and no temporary left, and the default folder is a safe name under out/.
"""
from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import audit.reporters.atomic as atomic_module
from audit.cli import app
from audit.cli.interrupts import Interrupted, interruptible
from audit.cli.run import folder_name
from audit.collect import side_by_side
from audit.errors import ReportError
from audit.render import render, signals_held
from audit.reporters.xlsx import XlsxReporter
from connectors.base import SourceSpec
from connectors.duck import session
from tests.hostile.harness import write_case
from tests.paths import ROOT, TEST_DATA


@pytest.fixture(scope="module")
def sample() -> dict:
    return json.loads((TEST_DATA / "sample_audit.json").read_text(encoding="utf-8"))


@pytest.fixture(params=["exchange", "two renames"])
def swap_kind(request, monkeypatch):
    """Each swap test runs with renameat2(RENAME_EXCHANGE) and with the two-rename fallback."""
    if request.param == "two renames":
        monkeypatch.setattr(atomic_module, "exchange", lambda first, second: False)
    return request.param


def snapshot(folder: Path) -> dict:
    """Every path under ``folder`` (itself included) → its mode and, for a file, its bytes."""
    found = {".": (folder.stat().st_mode, None)}
    for path in sorted(folder.rglob("*")):
        found[path.relative_to(folder).as_posix()] = (path.stat().st_mode,
                                                       None if path.is_dir() else path.read_bytes())
    return found


def temporaries(root: Path) -> list[Path]:
    """Every ``.*.tmp`` file or folder anywhere under ``root``."""
    return [p for p in root.rglob(".*") if p.name.endswith(".tmp")]


def previous_output(folder: Path) -> Path:
    """A folder as a previous run left it: old reports, a stale table, a mode of its own."""
    (folder / "tables").mkdir(parents=True)
    (folder / "audit.json").write_text('{"old": true}\n')
    (folder / "report.pdf").write_bytes(b"%PDF old")
    (folder / "tables" / "stale.csv").write_text("old,table\n")
    folder.chmod(0o750)
    return folder


# ---- a failure before the swap -----------------------------------------------------------------

@pytest.mark.parametrize("error, raised", [(OSError(errno.ENOSPC, "No space left on device"), ReportError),
                                           (RuntimeError("a bug in the reporter"), RuntimeError)])
def test_a_reporter_failing_after_others_wrote_leaves_the_previous_output(
        tmp_path, sample, monkeypatch, swap_kind, error, raised):
    out = previous_output(tmp_path / "out")
    before = snapshot(out)

    def half_then_fail(self, audit, path):
        Path(path).write_bytes(b"half a workbook")
        raise error

    monkeypatch.setattr(XlsxReporter, "report", half_then_fail)
    with pytest.raises(raised) as caught:
        render(sample, out, ["json", "csv", "html", "xlsx"])
    if raised is ReportError:
        assert str(out) in str(caught.value) and "as it was" in str(caught.value)
    assert snapshot(out) == before
    assert temporaries(tmp_path) == []


def test_a_failure_into_a_new_folder_leaves_no_folder(tmp_path, sample, monkeypatch):
    def full(self, audit, path):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(XlsxReporter, "report", full)
    with pytest.raises(ReportError):
        render(sample, tmp_path / "new" / "deeper" / "out", ["json", "xlsx"])
    assert list(tmp_path.iterdir()) == []


def test_a_failing_second_rename_puts_the_old_folder_back(tmp_path, sample, monkeypatch):
    monkeypatch.setattr(atomic_module, "exchange", lambda first, second: False)
    out = previous_output(tmp_path / "out")
    before = snapshot(out)
    real_rename = os.rename

    def rename(src, dst):
        if Path(src).name.endswith(".tmp") and not Path(src).name.endswith(".old.tmp") and Path(dst) == out:
            raise OSError(errno.EIO, "Input/output error")
        return real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(ReportError, match="as it was"):
        render(sample, out, ["json", "csv"])
    monkeypatch.setattr(os, "rename", real_rename)
    assert snapshot(out) == before
    assert temporaries(tmp_path) == []


# ---- the swap ------------------------------------------------------------------------------

def test_a_tables_file_is_replaced_by_the_whole_new_set(tmp_path, sample, swap_kind):
    """The case that broke: ``out/tables`` a file. Now the new set replaces the old one whole."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.pdf").write_bytes(b"%PDF old")
    (out / "tables").write_text("a file where the tables go")
    written = render(sample, out, ["json", "csv"])
    assert sorted(p.name for p in out.iterdir()) == ["audit.json", "tables"]
    assert (out / "tables").is_dir() and len(list((out / "tables").iterdir())) == 9  # CSV_TABLES
    assert written == [out / "audit.json", *sorted((out / "tables").iterdir())]
    assert temporaries(tmp_path) == []


def test_files_of_the_old_set_do_not_survive_and_modes_are_kept(tmp_path, sample, swap_kind):
    out = previous_output(tmp_path / "out")
    render(sample, out, ["json", "csv"])
    assert not (out / "report.pdf").exists() and not (out / "tables" / "stale.csv").exists()
    assert json.loads((out / "audit.json").read_text()) == sample
    assert out.stat().st_mode & 0o7777 == 0o750  # a replaced folder keeps its mode
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in out.rglob("*") if p.is_file())
    assert temporaries(tmp_path) == []


def test_a_new_folder_has_the_mode_mkdir_gives(tmp_path, sample):
    umask = os.umask(0o022)
    os.umask(umask)
    render(sample, tmp_path / "a" / "out", ["csv"])
    expected = 0o777 & ~umask
    assert (tmp_path / "a" / "out").stat().st_mode & 0o777 == expected
    assert (tmp_path / "a" / "out" / "tables").stat().st_mode & 0o777 == expected


def test_a_link_to_a_folder_replaces_the_folder_and_keeps_the_link(tmp_path, sample, swap_kind):
    real = previous_output(tmp_path / "real")
    (tmp_path / "link").symlink_to(real)
    render(sample, tmp_path / "link", ["json"])
    assert (tmp_path / "link").is_symlink() and sorted(p.name for p in real.iterdir()) == ["audit.json"]
    assert temporaries(tmp_path) == []


def test_a_folder_holding_other_files_is_refused_not_deleted(tmp_path, sample):
    out = previous_output(tmp_path / "out")
    (out / "notes.txt").write_text("mine")
    (out / "tables" / "sub").mkdir()
    before = snapshot(out)
    with pytest.raises(ReportError, match=r"notes\.txt, tables/sub/"):
        render(sample, out, ["json"])
    assert snapshot(out) == before
    (tmp_path / "file").write_text("x")
    with pytest.raises(ReportError, match="is a file, not a folder"):
        render(sample, tmp_path / "file", ["json"])
    assert (tmp_path / "file").read_text() == "x" and temporaries(tmp_path) == []


# ---- signals -------------------------------------------------------------------------------

def test_a_signal_waits_until_the_held_step_is_over():
    steps, handler = [], signal.getsignal(signal.SIGTERM)
    with interruptible(), pytest.raises(Interrupted) as caught:
        with signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
            steps.append("the step finished")
    assert steps == ["the step finished"] and caught.value.exit_code == 143
    assert signal.getsignal(signal.SIGTERM) is handler


def _long_query(con, folder: Path) -> None:
    """A query that runs for minutes unless interrupted: one 4 M-row Parquet file read 400 times. On
    one thread DuckDB's Python client runs every task itself and looks for a signal after each one,
    as it does between the many small queries of a CUR read (with more threads it may run a task
    the size of the whole query first)."""
    data = folder / "rows.parquet"
    if not data.exists():
        con.execute(f"COPY (SELECT range AS i FROM range(4000000)) TO '{data}' (FORMAT parquet, ROW_GROUP_SIZE 100000)")
    con.execute("SET threads = 1")
    files = ", ".join([f"'{data}'"] * 400)
    con.execute(f"SELECT sum(hash(i)) FROM read_parquet([{files}])").fetchall()


def _signal_soon(signum: int, after: float = 1.0) -> threading.Timer:
    timer = threading.Timer(after, os.kill, args=(os.getpid(), signum))
    timer.start()
    return timer


def test_a_signal_inside_a_duckdb_query_is_the_interruption(tmp_path):
    """DuckDB runs the handler while its query runs, cancels the query and raises its own
    ``RuntimeError: Query interrupted``: that still leaves the block as the interruption (a Ctrl-C
    while a CUR export was summed ended in a traceback and exit 1)."""
    with session() as con:
        con.execute(f"COPY (SELECT range AS i FROM range(4000000)) TO '{tmp_path / 'rows.parquet'}' "
                    "(FORMAT parquet, ROW_GROUP_SIZE 100000)")
    _signal_soon(signal.SIGINT)
    began = time.monotonic()
    with pytest.raises(Interrupted) as caught, interruptible(), session() as con:
        _long_query(con, tmp_path)
    assert caught.value.exit_code == 130 and time.monotonic() - began < 30
    assert isinstance(caught.value.__context__, RuntimeError)  # DuckDB's, put in its place


def test_a_signal_while_sources_are_read_side_by_side_stops_every_read(tmp_path):
    """Two sources read at once, each a long DuckDB query in a thread: the signal interrupts both
    queries and the threads end before the interruption goes on (DuckDB still running in a thread
    at exit aborts the process)."""
    def read(spec):
        with session() as con:
            return _long_query(con, tmp_path / spec.name)

    specs = [SourceSpec(name, "billing", "cur", None, {}) for name in ("a", "b")]
    for spec in specs:
        (tmp_path / spec.name).mkdir()
    _signal_soon(signal.SIGTERM, after=2.0)
    began = time.monotonic()
    with pytest.raises(Interrupted) as caught, interruptible():
        side_by_side(specs, read, readers=2)
    assert caught.value.exit_code == 143 and time.monotonic() - began < 30
    assert not [t for t in threading.enumerate() if t.name.startswith("costaudit-read-") and t.is_alive()]


def test_every_command_ends_on_a_signal_with_one_line(capsys):
    """Commands without an output set of their own (``billing``, ``trace``, ``collect``) end on SIGINT
    or SIGTERM as ``run`` does: one line and 130 / 143, also when a library put its own error in
    place of the interruption (what DuckDB's client does)."""
    import typer

    from audit.cli.common import reports_errors

    @reports_errors
    def command() -> None:
        try:
            signal.raise_signal(signal.SIGTERM)
        except Interrupted:
            raise RuntimeError("Query interrupted") from None

    handler = signal.getsignal(signal.SIGTERM)
    with pytest.raises(typer.Exit) as stopped:
        command()
    assert stopped.value.exit_code == 143
    assert capsys.readouterr().err == "costaudit: error: interrupted by SIGTERM\n"
    assert signal.getsignal(signal.SIGTERM) is handler


def _start_run(case: Path, out: Path, cwd: Path) -> subprocess.Popen:
    """``costaudit run`` in a child that takes SIGINT as a terminal would deliver it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "audit", "run", str(case), "--out", str(out),
                             "--format", "json,pdf"], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for(path_glob: str, folder: Path, child: subprocess.Popen, timeout: float = 240) -> None:
    """Until a path matching ``path_glob`` exists under ``folder`` (the child still running)."""
    deadline = time.monotonic() + timeout
    while not list(folder.glob(path_glob)):
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the run never started writing"
        time.sleep(0.005)


@pytest.mark.slow
@pytest.mark.parametrize("readers", ["1", "2"])
def test_a_signal_while_a_cur_export_is_summed_ends_the_run_with_one_line(tmp_path, readers):
    """SIGINT lands while DuckDB sums a CUR export (the longest step of a big run): exit 130 and one
    line, no traceback, nothing written; with two sources read at once as well."""
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "billing" / "generate.py"), str(tmp_path / "cur"),
                    "400000"], check=True, cwd=ROOT, stdout=subprocess.DEVNULL, timeout=120)
    second = tmp_path / "cur2"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "billing" / "generate.py"), str(second),
                    "200000", "--hours", "700"], check=True, cwd=ROOT, stdout=subprocess.DEVNULL, timeout=120)
    case = tmp_path / "case"
    case.mkdir()
    (case / "case.toml").write_text(
        '[case]\nname = "big"\nwindow = ["2025-01-01", "2025-02-01"]\ncurrency = "USD"\nloaded_rate = 150\n\n'
        f'[[billing]]\nname = "cur"\nformat = "cur"\npath = "{tmp_path / "cur" / "costaudit-bench"}"\n\n'
        f'[[billing]]\nname = "cur2"\nformat = "cur"\npath = "{second / "costaudit-bench"}"\n', encoding="utf-8")
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COSTAUDIT_READERS": readers}
    child = subprocess.Popen([sys.executable, "-m", "audit", "run", str(case), "--out", str(out), "--format", "json"],
                             cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert child.stderr is not None
    first = child.stderr.readline()
    assert first.startswith("costaudit: reading billing source cur "), first
    time.sleep(1.5)  # into the DuckDB queries of the read
    child.send_signal(signal.SIGINT)
    stdout, stderr = child.communicate(timeout=120)
    assert child.returncode == 130, stdout + stderr
    assert "Traceback" not in stderr and "Query interrupted" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("costaudit: error:")]
    assert errors == [f"costaudit: error: interrupted by SIGINT; {out} is as it was, nothing written"], stderr
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_while_the_reports_are_written_cleans_up(tmp_path, signum, code):
    """The signal lands once audit.json is in the temporary folder and while the PDF (seconds of
    weasyprint) is being made: the real slow step of a real run, no hook."""
    case = write_case(tmp_path / "case")
    out = previous_output(tmp_path / "out")
    before = snapshot(out)
    child = _start_run(case, out, tmp_path)
    _wait_for(".out.*.tmp/audit.json", tmp_path, child)
    child.send_signal(signum)
    stdout, stderr = child.communicate(timeout=120)
    assert child.returncode == code, stdout + stderr
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("costaudit: error:")]
    assert errors == [f"costaudit: error: interrupted by {signal.Signals(signum).name}; "
                      f"{out} is as it was, nothing written"], stderr
    assert snapshot(out) == before
    assert temporaries(tmp_path) == []


@pytest.mark.slow
def test_a_write_failing_in_a_real_run_is_one_error_and_no_change(tmp_path):
    """A full disk while the PDF is written, after audit.json was: exit 1, one line, --out as it was."""
    case = write_case(tmp_path / "case")
    out = previous_output(tmp_path / "out")
    before = snapshot(out)
    code = ("import errno, sys\nfrom audit.reporters.pdf import PdfReporter\n"
            "def full(self, model, path):\n    open(path, 'wb').write(b'%PDF half')\n"
            "    raise OSError(errno.ENOSPC, 'No space left on device')\n"
            "PdfReporter.report = full\nfrom audit.cli import main\n"
            f"main(['run', {str(case)!r}, '--out', {str(out)!r}, '--format', 'json,pdf'])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("costaudit: error:")]
    assert len(errors) == 1 and str(out) in errors[0] and "No space left" in errors[0], done.stderr
    assert snapshot(out) == before and temporaries(tmp_path) == []


# ---- where the reports go ------------------------------------------------------------------------

@pytest.mark.parametrize("name, folder", [
    ("/abs/path", "abs-path"), ("../../x", "x"), ("..", "case"), ("a/b", "a-b"), ("  ", "case"),
    (".hidden", "hidden"), ("a\\b\nc", "a-b-c"), ("Zürich Q3", "Zürich-Q3"), ("x" * 300, "x" * 64),
    ("é" * 150, "é" * 64), ("日本" * 60, "日本" * 32),
])
def test_folder_names_are_safe(name, folder):
    assert folder_name(name) == folder
    assert len(folder_name(name).encode()) <= 200 and "/" not in folder_name(name)


def _invoke(*args) -> object:
    return CliRunner().invoke(app, list(map(str, args)), catch_exceptions=False)


@pytest.mark.parametrize("name", ["/abs/path", "../../x", "..", "a/b", " . "])
def test_an_unsafe_case_name_writes_under_out(tmp_path, monkeypatch, name):
    work = tmp_path / "work" / "here"
    case = write_case(work / "case")
    text = (case / "case.toml").read_text().replace('name = "hostile"', f"name = {json.dumps(name)}", 1)
    (case / "case.toml").write_text(text)
    monkeypatch.chdir(work)
    result = _invoke("run", case, "--format", "json")
    assert result.exit_code == 0, result.output
    written = list(tmp_path.rglob("audit.json"))
    assert len(written) == 1 and written[0].parent.parent == work / "out", written
    assert f"reports in out/{written[0].parent.name}" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"] and temporaries(tmp_path) == []


@pytest.mark.parametrize("where, message", [
    ("case", "is the case folder"), (".", "holds the case folder"), ("file", "is a file, not a folder"),
    ("mine", "holds files no report writes (notes.txt)"),
])
def test_an_out_that_cannot_be_replaced_is_refused_before_the_audit(tmp_path, monkeypatch, where, message):
    case = write_case(tmp_path / "case")
    (tmp_path / "file").write_text("x")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = _invoke("run", case, "--out", where, "--format", "json")
    assert result.exit_code == 1, result.output
    assert message in result.output and "total in scope" not in result.output
    assert snapshot(tmp_path) == before
