"""`costaudit review`: two audit.json files → review.json written as one set; a bad input is one line
naming the file and exit 1, nothing written, no traceback."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.audit.review.documents import audit, component
from tests.paths import ROOT

CHAT_Q2 = {"requests": 1000, "components": {"gpu_busy": component("100", "50"), "line:egress": component("20")}}
CHAT_Q3 = {"requests": 1200, "components": {"gpu_busy": component("97.2", "54"), "line:egress": component("30")}}


def costaudit(*args):
    return subprocess.run([sys.executable, "-m", "audit", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def write(tmp_path, name, document):
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_review_writes_review_json(tmp_path):
    a = write(tmp_path, "q2.json", audit("q2", {"chat": CHAT_Q2}))
    b = write(tmp_path, "q3.json", audit("q3", {"chat": CHAT_Q3}))
    out = tmp_path / "review"
    result = costaudit("review", a, b, "--out", out, "--format", "json")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["review.json"]
    document = json.loads((out / "review.json").read_text(encoding="utf-8"))
    assert document["meta"]["tool"] == "costaudit" and document["comparable"] is True
    assert [a["case"] for a in document["audits"]] == ["q2", "q3"]
    assert "chat: volume" in result.stdout and "24.00" in result.stdout
    assert f"costaudit: reading {a}" in result.stderr and "writing review.json" in result.stderr
    again = costaudit("review", a, b, "--out", out, "--format", "json", "--quiet")
    assert again.returncode == 0 and again.stderr == ""


def test_bad_input_is_one_line_and_exit_1(tmp_path):
    good = write(tmp_path, "q2.json", audit("q2", {"chat": CHAT_Q2}))
    broken = tmp_path / "q3.json"
    broken.write_text("{not json", encoding="utf-8")
    out = tmp_path / "review"
    result = costaudit("review", good, broken, "--out", out, "--format", "json")
    assert result.returncode == 1 and not out.exists()
    assert result.stderr.strip().splitlines()[-1] == f"costaudit: error: {broken}: not JSON: line 1 column 2: " \
                                    "Expecting property name enclosed in double quotes"
    other = write(tmp_path, "other.json", {"hello": 1})
    result = costaudit("review", good, other, "--out", out)
    assert result.returncode == 1 and "not an audit.json of costaudit" in result.stderr
    assert "Traceback" not in result.stderr
    result = costaudit("review", good, "--out", out)
    assert result.returncode == 1 and "needs two audits or more" in result.stderr
    result = costaudit("review", good, tmp_path / "missing.json", "--out", out)
    assert result.returncode == 1 and "missing.json: no such file or folder" in result.stderr


def test_every_path_is_checked_before_any_audit(tmp_path):
    """Before: `review CASE nothere` audited CASE (~70 s, "auditing case …", "reading nothere") and only
    then said nothere was missing. Now one error line, exit 1, before any audit."""
    from tests.paths import DEMO

    missing = tmp_path / "nothere"
    result = costaudit("review", DEMO, missing, "--out", tmp_path / "review")
    assert result.returncode == 1
    assert result.stderr == (f"costaudit: error: {missing}: no such file or folder "
                             "(give an audit.json or a case folder)\n")


def test_the_summary_amounts_have_thousands_separators(capsys):
    """Before: "realised 23039.13 USD a month" beside a note's "9,924.07 a month", totals "89258.43"."""
    from audit.cli.review import summary

    document = {"audits": [{"case": "q2", "total": "89258.43", "currency": "USD"},
                           {"case": "q3", "total": "91234.00", "currency": "USD"}],
                "pairs": [{"from": 0, "to": 1, "bridge": {"steps": [{"label": "chat: volume", "amount": "-12345.60"}]},
                           "realised": [{"option": "o", "service": "chat", "shipped": "2026-09", "realised": "23039.13",
                                         "verdict": "realised", "note": "9,924.07 a month"}]}]}
    summary(document)
    assert capsys.readouterr().out.splitlines() == [
        "review: q2 89,258.43 USD → q3 91,234.00 USD",
        f"  {'chat: volume':<40} {'-12,345.60':>14} USD",
        "shipped o (chat, 2026-09): realised 23,039.13 USD a month, realised (9,924.07 a month)"]


def test_out_may_not_hold_an_input(tmp_path):
    a = write(tmp_path, "q2.json", audit("q2", {"chat": CHAT_Q2}))
    b = write(tmp_path, "q3.json", audit("q3", {"chat": CHAT_Q3}))
    result = costaudit("review", a, b, "--out", tmp_path)
    assert result.returncode == 1 and "holds the input" in result.stderr


def test_help():
    result = costaudit("review", "--help")
    assert result.returncode == 0 and "volume, price, efficiency" in result.stdout and "--out" in result.stdout


def test_method_version_is_the_audits():
    from audit.audit_json import METHOD_VERSION
    from audit.review.document import METHOD_VERSION as REVIEW_METHOD

    assert REVIEW_METHOD == METHOD_VERSION
