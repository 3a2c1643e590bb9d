"""A scope that keeps no charge is an error, not a report of 0.00 (rule 5).

Before: the demo with ``[scope] accounts = ["111111111112"]`` (one digit off) was audited with exit 0
and a report whose total in scope was 0.00 USD; the only sign was a warning that the account
matches no line. A scope piece that matches nothing while others keep lines stays a warning.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

from audit.fit import scope_fit
from tests.audit.cli.test_cli import costaudit
from tests.builders import make_case
from tests.paths import FIXTURES


def lines() -> pd.DataFrame:
    return pd.DataFrame({"sub_account_id": ["111", "222"], "billing_account_id": ["9", "9"],
                         "charge_category": ["Usage", "Usage"], "service_name": ["EC2", "S3"], "tags": ["{}", "{}"]})


def demo_with_scope(tmp_path: Path, scope: str) -> Path:
    case = tmp_path / "demo"
    shutil.copytree(FIXTURES / "demo", case)
    toml = case / "case.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace('accounts = ["111111111111"]', scope), encoding="utf-8")
    return case


def test_an_absent_account_that_empties_the_scope_is_an_error(tmp_path):
    case = demo_with_scope(tmp_path, 'accounts = ["111111111112"]')
    for command in (("validate", case), ("run", case, "--out", tmp_path / "out", "--format", "json")):
        done = costaudit(*command)
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert ("error: " + str(case / "case.toml") + ": [scope] account 111111111112 matches no line; accounts present: "
                "111111111111, 222222222222, 999999999999; the scope keeps no charge of the ") in done.stderr
        assert "(a report would show 0.00, or tax and credits alone)" in done.stderr
    assert not (tmp_path / "out").exists()


def test_pieces_that_are_each_in_the_data_but_never_together(tmp_path):
    case = demo_with_scope(tmp_path, 'accounts = ["222222222222"]\nservices = ["Amazon Elastic Kubernetes Service"]')
    done = costaudit("validate", case)
    assert done.returncode == 1
    assert ("[scope] accounts = ['222222222222'], services = ['Amazon Elastic Kubernetes Service'] keeps no charge of the "
            in done.stderr)
    assert "each is in the data, but no line has them together" in done.stderr


def test_an_absent_account_beside_one_that_keeps_lines_stays_a_warning():
    case = make_case(accounts=("111", "333"))
    (misfit,) = scope_fit(case, lines(), scoped=1)
    assert misfit.severity == "warning" and misfit.subject == "[scope] account 333"
    (misfit,) = scope_fit(make_case(accounts=("333",)), lines(), scoped=0)
    assert misfit.severity == "error" and "the scope keeps no charge of the 2 billing lines read" in misfit.message
    assert scope_fit(make_case(accounts=()), lines(), scoped=0) == []  # no scope: every line is in it


def test_the_lines_read_are_invoice_lines_not_summed_rows():
    """The readers sum identical lines into one row (``line_count``): the message counted the 2 rows
    (a FOCUS export of 505 lines read as 22); it counts the 7 invoice lines they stand for."""
    (misfit,) = scope_fit(make_case(accounts=("333",)), lines().assign(line_count=[3, 4]), scoped=0)
    assert misfit.message == ("[scope] account 333 matches no line; accounts present: 111, 222, 9; the scope keeps "
                              "no charge of the 7 billing lines read (a report would show 0.00, or tax and credits alone)")


def test_a_scope_that_keeps_only_tax_and_credits_is_an_error(tmp_path):
    """Tax and credits stay in scope by their account alone: a tag no charge carries left the demo's
    tax line and credit in scope, and the audit would have reported their sum as the total."""
    case = demo_with_scope(tmp_path, 'accounts = ["111111111111"]\ntags = { team = "llm-nonexistent" }')
    done = costaudit("validate", case)
    assert done.returncode == 1
    assert "[scope] tag team = \"llm-nonexistent\" matches no line; values of team present: " in done.stderr
    assert "the scope keeps no charge of the " in done.stderr
