"""Sources that are not regular files: a device, a FIFO, a folder where a file is expected.

Before: a link to /dev/zero read as OpenMetrics grew until MemoryError, a FIFO blocked forever,
a folder named x.csv raised IsADirectoryError with a traceback. Now each is refused at once, in
connectors/base.py (and by the trace readers), naming the path.
"""
from __future__ import annotations

import os

import pytest

from connectors.bounds import FOLDER, check_source_path
from connectors.errors import InputError
from tests.hostile.harness import assert_named_error, costaudit, telemetry, write_case

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")


def fifo(path):
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("command", ["validate", "run"])
def test_dev_zero_as_openmetrics_is_refused(tmp_path, command):
    (tmp_path / "zero.om").symlink_to("/dev/zero")
    case = write_case(tmp_path / "case", extra=telemetry("openmetrics", "../zero.om"))
    outcome = costaudit(command, case, *(["--out", tmp_path / "out"] if command == "run" else []), cwd=tmp_path)
    assert_named_error(outcome, "/dev/zero", "character device")
    assert not (tmp_path / "out").exists()


def test_fifo_as_billing_is_refused_without_blocking(tmp_path):
    fifo(tmp_path / "bill.csv")
    case = write_case(tmp_path / "case", billing="../bill.csv")
    outcome = costaudit("validate", case, cwd=tmp_path, timeout=60)
    assert_named_error(outcome, tmp_path / "bill.csv", "FIFO")


@pytest.mark.parametrize("fmt", ["focus", "cur", "azure", "gcp_billing"])
def test_the_billing_command_refuses_a_fifo_with_its_format_given(tmp_path, fmt):
    """With --format given the header is not sniffed, and the FIFO blocked the read forever."""
    fifo(tmp_path / "bill.csv")
    outcome = costaudit("billing", "--format", fmt, tmp_path / "bill.csv", cwd=tmp_path, timeout=60)
    assert_named_error(outcome, tmp_path / "bill.csv", "FIFO")


@pytest.mark.parametrize("command", ["review", "compare"])
def test_review_and_compare_refuse_a_fifo_and_a_device(tmp_path, command):
    """An audit.json (review) or a profile.json (compare) that is a FIFO blocked the read forever;
    a link to /dev/zero read until memory ran out."""
    fifo(tmp_path / "a.json")
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    extra = ["--out", tmp_path / "out"] if command == "review" else ["--price-a", "1", "--price-b", "1"]
    for target, word in (("a.json", "FIFO"), ("zero.json", "character device")):
        outcome = costaudit(command, target, target, *extra, cwd=tmp_path, timeout=60)
        assert_named_error(outcome, target, word)


def test_folder_named_csv_is_refused(tmp_path):
    (tmp_path / "x.csv").mkdir()
    case = write_case(tmp_path / "case", billing="../x.csv")
    outcome = costaudit("run", case, "--out", tmp_path / "out", cwd=tmp_path)
    assert_named_error(outcome, tmp_path / "x.csv", "is a folder")


@pytest.mark.parametrize("name", ["trace.json", "trace.sqlite"])
def test_trace_refuses_fifo_device_and_folder(tmp_path, name):
    fifo(tmp_path / name)
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    (tmp_path / "dir.json").mkdir()
    for target, word in ((name, "FIFO"), ("zero.json", "character device"), ("dir.json", "is a folder")):
        outcome = costaudit("trace", target, cwd=tmp_path, timeout=60)
        assert_named_error(outcome, target, word)


def test_folder_with_a_fifo_inside_is_refused(tmp_path):
    (tmp_path / "logs").mkdir()
    fifo(tmp_path / "logs" / "access.log")
    with pytest.raises(InputError, match="FIFO"):
        check_source_path(tmp_path / "logs", "file or folder")


def test_file_where_a_folder_is_expected(tmp_path):
    (tmp_path / "bundle").write_text("{}")
    with pytest.raises(InputError, match="is a file, not a folder"):
        check_source_path(tmp_path / "bundle", FOLDER)


def test_case_file_that_is_a_fifo(tmp_path):
    from audit.case import load_case
    from audit.errors import ConfigError

    (tmp_path / "c").mkdir()
    fifo(tmp_path / "c" / "case.toml")
    with pytest.raises(ConfigError, match="FIFO"):
        load_case(tmp_path / "c")


@pytest.mark.parametrize("command", ["validate", "run", "billing", "trace"])
def test_a_symlink_loop_is_named(tmp_path, command):
    """A source that links to itself: Path.resolve() raised RuntimeError "Symlink loop" with a
    traceback in every command; now one line naming it (connectors.bounds.resolved)."""
    loop = tmp_path / "bill.csv"
    loop.symlink_to(loop)
    case = write_case(tmp_path / "case", billing="../bill.csv")
    args = {"validate": [case], "run": [case, "--out", tmp_path / "out"], "billing": [loop], "trace": [loop]}
    outcome = costaudit(command, *args[command], cwd=tmp_path)
    if command in ("validate", "run"):   # the case's problem, the path as the case wrote it
        assert_named_error(outcome, case / "case.toml", f"[[billing]] #1.path: {case}/../bill.csv: a symlink loop")
    else:
        assert_named_error(outcome, loop, f"{loop}: a symlink loop")
    assert not (tmp_path / "out").exists()


def test_a_symlink_loop_found_by_check_source_path(tmp_path):
    """os.stat's ELOOP was "cannot read: Too many levels of symbolic links"."""
    (tmp_path / "a").symlink_to(tmp_path / "a")
    with pytest.raises(InputError, match=r"a: a symlink loop \(expected a file\)$"):
        check_source_path(tmp_path / "a")
