"""The same billing data listed twice would double the invoice without a word: the case is
refused (exit 1), naming both sources — whole sources by sha256, and a file that is listed on
its own and also lies in a listed folder."""
from __future__ import annotations

import shutil

from tests.builders import billing_case, cur2_rows, write_cur2
from tests.hostile.harness import assert_named_error, costaudit, write_case

SECOND = '[[billing]]\nname = "{name}"\nformat = "focus"\npath = "{path}"\n'


def test_same_file_under_two_names_is_refused(tmp_path):
    case = write_case(tmp_path / "case")
    shutil.copy(case / "good.csv", case / "copy.csv")
    (case / "case.toml").write_text((case / "case.toml").read_text() + SECOND.format(name="again", path="copy.csv"))
    for command in ("run", "validate"):
        outcome = costaudit(command, case, "--out", tmp_path / "out", cwd=tmp_path) if command == "run" \
            else costaudit(command, case, cwd=tmp_path)
        assert_named_error(outcome, "copy.csv", "'bill'", "'again'", "same sha256")
        assert not (tmp_path / "out").exists()


def test_file_listed_alone_and_inside_a_listed_folder_is_refused(tmp_path):
    rows = cur2_rows()
    folder = tmp_path / "case"
    write_cur2(folder / "exports" / "part-1.parquet", rows[:10])
    write_cur2(folder / "exports" / "part-2.parquet", rows[10:])
    shutil.copy(folder / "exports" / "part-2.parquet", folder / "september.parquet")
    billing_case(folder, "cur", ("2026-09-01", "2026-10-01"), "billed", format="cur", path="exports")
    (folder / "case.toml").write_text((folder / "case.toml").read_text()
                                      + '[[billing]]\nname = "alone"\nformat = "cur"\npath = "september.parquet"\n')
    outcome = costaudit("validate", folder, cwd=tmp_path)
    assert_named_error(outcome, "september.parquet", "'cur'", "'alone'", "part-2.parquet")


def test_different_files_of_the_same_size_are_read(tmp_path):
    case = write_case(tmp_path / "case")
    text = (case / "good.csv").read_text()
    (case / "other.csv").write_text(text.replace("acct-1", "acct-2"))
    (case / "case.toml").write_text((case / "case.toml").read_text() + SECOND.format(name="other", path="other.csv"))
    outcome = costaudit("validate", case, cwd=tmp_path)
    assert outcome.rc == 0, outcome.stderr
