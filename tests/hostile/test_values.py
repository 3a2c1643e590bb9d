"""Values a parser accepted and a later stage crashed on: money out of DECIMAL(38, 20) range, nsys
timestamps that are NULL, text or 2e30, case.toml values of the wrong type.

Before: `validate` said valid and `run` crashed in money.cents (EffectiveCost = 1e400); OverflowError
(PricingQuantity = 1e400); TypeError / OverflowError naming no file (nsys); tracebacks (case.toml).
"""
from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from audit.case import load_case
from audit.case_services import matchers
from audit.errors import ConfigError
from tests.hostile.harness import assert_named_error, costaudit, focus_row, profile, write_case, write_focus
from tests.paths import DEMO


@pytest.mark.parametrize(("column", "row"), [("EffectiveCost", focus_row(effective="1e400")),
                                             ("PricingQuantity", focus_row(quantity="1e400")),
                                             ("EffectiveCost", focus_row(effective="-1000000000000000000"))])
@pytest.mark.parametrize("command", ["validate", "run"])
def test_amount_out_of_range(tmp_path, command, column, row):
    write_focus(tmp_path / "bill.csv", row)
    case = write_case(tmp_path / "case", billing="../bill.csv")
    outcome = costaudit(command, case, *(["--out", tmp_path / "out"] if command == "run" else []), cwd=tmp_path)
    assert_named_error(outcome, tmp_path / "bill.csv", "row 1", f"column {column}", "out of range")


def test_amount_just_in_range_is_read(tmp_path):
    from connectors.base import ReadContext, SourceSpec
    from connectors.billing.focus import FocusConnector
    from tests.builders import ALWAYS

    path = write_focus(tmp_path / "bill.csv", focus_row(effective="999999999999999999.5"))
    spec = SourceSpec("bill", "billing", "focus", path)
    frame = FocusConnector(spec, ReadContext(*ALWAYS, "USD")).read()
    assert str(frame.tables["lines"]["effective_cost"].iloc[0]) == "999999999999999999.5"


def nsys_export(path, start: str, end: str):
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE StringIds (id INTEGER, value TEXT)")
    db.execute("INSERT INTO StringIds VALUES (1, 'kern')")
    db.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, "
               "streamId INTEGER, correlationId INTEGER, demangledName INTEGER, gridX, gridY, gridZ, "
               "blockX, blockY, blockZ)")
    db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (100, 900, 0, 7, 1, 1, 1, 1, 1, 1, 1, 1)")
    db.execute(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({start}, {end}, 0, 7, 2, 1, 1, 1, 1, 1, 1, 1)")
    db.commit()
    db.close()
    return path


@pytest.mark.parametrize(("start", "end", "column", "shown"), [("NULL", "2000", "start", "NULL"),
                                                               ("'soon'", "2000", "start", "'soon'"),
                                                               ("1000", "2e30", "end", "2e+30"),
                                                               ("-5", "2000", "start", "-5")])
def test_nsys_bad_timestamps(tmp_path, start, end, column, shown):
    nsys_export(tmp_path / "p.sqlite", start, end)
    outcome = costaudit("trace", "p.sqlite", cwd=tmp_path)
    assert_named_error(outcome, "p.sqlite", "row 2", f"column {column}", shown)


def test_nsys_bad_timestamp_in_a_case(tmp_path):
    nsys_export(tmp_path / "p.sqlite", "NULL", "2000")
    case = write_case(tmp_path / "case", extra=profile("nsys", "../p.sqlite"))
    assert_named_error(costaudit("validate", case, cwd=tmp_path), tmp_path / "p.sqlite", "start is NULL")


@pytest.mark.parametrize(("toml", "problem"), [
    ("services = 5\n", "[services]: expected a table"),
    ("tolerance = nan\n", "[case].tolerance: expected a number"),
    ("loaded_rate = inf\n", "[case].loaded_rate: expected a number"),
    ("scope = [1]\n", "[scope]: expected a table"),
    ("rules = [1, 2]\n", "[[rules]] #1: expected a table"),
    ("step = 1e9\n", "[case].step"),
    ('window = ["0001-01-01", "9999-01-01"]\n', "[case].window"),
])
def test_case_values_of_the_wrong_type(tmp_path, toml, problem):
    folder = write_case(tmp_path / "case")
    text = (folder / "case.toml").read_text()
    key = toml.split("=")[0].strip()
    if key in ("tolerance", "loaded_rate", "step", "window"):
        text = "\n".join(ln for ln in text.splitlines() if not ln.startswith(key + " ")) + "\n"
        text = text.replace("[case]\n", "[case]\n" + toml)
    else:
        text = toml + text
    (folder / "case.toml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_case(folder)
    assert any(problem in p for p in caught.value.problems), caught.value.problems


def test_case_reports_every_wrong_value_at_once(tmp_path):
    folder = write_case(tmp_path / "case")
    text = (folder / "case.toml").read_text().replace("loaded_rate = 150", "loaded_rate = inf\ntolerance = nan")
    (folder / "case.toml").write_text("services = 5\n" + text)
    outcome = costaudit("validate", folder, cwd=tmp_path)
    assert outcome.rc == 1 and "Traceback" not in outcome.stderr
    for word in ("[services]", "tolerance", "loaded_rate"):
        assert word in outcome.stderr


def test_long_values_are_cut_in_messages(tmp_path):
    folder = write_case(tmp_path / "case", head='cost_basis = "' + "x" * 10_000 + '"')
    with pytest.raises(ConfigError) as caught:
        load_case(folder)
    assert max(map(len, caught.value.problems)) < 200



def demo_with(tmp_path: Path, edit) -> Path:
    """A copy of the demo case whose case.toml text ``edit`` changed."""
    folder = tmp_path / "demo"
    shutil.copytree(DEMO, folder)
    (folder / "case.toml").write_text(edit((folder / "case.toml").read_text()))
    return folder


def test_a_profile_that_served_no_request_is_refused(tmp_path):
    """requests = 0 would leave kernel-seconds per request unmeasured without a word (no figure can
    divide by it): the case names the key and says to leave it out where nothing was counted."""
    def edit(text: str) -> str:
        assert "\nrequests = 16\n" in text
        return text.replace("\nrequests = 16\n", "\nrequests = 0\n")
    with pytest.raises(ConfigError) as caught:
        load_case(demo_with(tmp_path, edit))
    assert any(".requests: expected a whole number ≥ 1, got 0 (leave it out" in p for p in caught.value.problems)


@pytest.mark.parametrize("written, hint", [("chta", "; did you mean 'chat'?"), ("zzz", "; declared: chat, embed")])
def test_a_profile_of_an_undeclared_service_names_the_nearest(tmp_path, written, hint):
    with pytest.raises(ConfigError) as caught:
        load_case(demo_with(tmp_path, lambda text: text.replace('service = "chat"', f'service = "{written}"')))
    assert f"[[profiles]] 'chat-qwen-prefill-decode': service '{written}' is not declared in [services]{hint}" \
        in caught.value.problems


@pytest.mark.parametrize(("where", "value", "named"), [
    ("[services.odd]", "namespace = true", "[services.odd].namespace: expected a string"),
    ("[services.odd]", "pod = [\"a\", \"b\"]", "[services.odd].pod: expected a string"),
    ("[services.odd]", "tags = {team = 1.5}", "[services.odd].tags.team: expected a string"),
    ("[scope]", "tags = {team = false}", "[scope].tags.team: expected a string"),
])
def test_a_matcher_that_is_not_text_is_refused(tmp_path, where, value, named):
    """A boolean, a float or a list as a matcher would be matched as Python's text of it ("True",
    "['a', 'b']"), which no label or tag spells: the case names the key instead."""
    def edit(text: str) -> str:
        header = where + "\n"
        return text.replace(header, header + value + "\n") if header in text else text + f"\n{header}{value}\n"
    with pytest.raises(ConfigError) as caught:
        load_case(demo_with(tmp_path, edit))
    assert any(named in p for p in caught.value.problems), caught.value.problems


def test_a_whole_number_matcher_is_read_as_its_digits():
    """tags = {team = 3} matches the tag "3" (TOML spells the number, the bill the text)."""
    problems: list[str] = []
    assert matchers({"team": 3, "app": "re:^a", "env": "prod"}, "[x].tags", problems) == {
        "team": "3", "app": "re:^a", "env": "prod"}
    assert problems == []
