"""No silent misfit (issue 12, audit/fit.py): each piece of a case that matches nothing in its data is a
warning in ``costaudit validate`` and ``run``, a note on page 1 and an audit.json ``fit`` entry, with
the nearest values the data holds; a service that matches nothing at all stops both with exit 1.

Cases are real-format ones written by ``benchmarks.cloudgen`` (EKS, seed 1: FOCUS billing, OpenMetrics
DCGM / kube-state-metrics telemetry, a Kineto profile), their case.toml edited to introduce each misfit;
a request log is an nginx combined log.
"""
from __future__ import annotations

import csv
import html
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

CASE = "case.toml"


def costaudit(*args):
    return subprocess.run([sys.executable, "-m", "audit", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)


def edited(eks: Path, tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the generated case with one piece of case.toml replaced."""
    import shutil
    target = tmp_path / "case"
    shutil.copytree(eks, target)
    text = (target / CASE).read_text(encoding="utf-8")
    assert old in text, old
    (target / CASE).write_text(text.replace(old, new, 1), encoding="utf-8")
    return target


def billing_rows(case: Path) -> tuple[Path, list[list[str]]]:
    """The generated case's FOCUS file and its rows (the header first), to edit."""
    billing = case / "billing" / "focus_aws.csv"
    return billing, list(csv.reader(io.StringIO(billing.read_text(encoding="utf-8"))))


def write_rows(billing: Path, rows: list[list[str]]) -> None:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    billing.write_text(out.getvalue(), encoding="utf-8")


def first_usage(rows: list[list[str]], *positive: str) -> int:
    """The data row of the first usage line whose ``positive`` columns are above zero."""
    header = rows[0]
    return next(i for i, row in enumerate(rows[1:], 1) if row[header.index("ChargeCategory")] == "Usage"
                and all(float(row[header.index(c)]) > 0 for c in positive))


def warnings_of(stderr: str) -> list[str]:
    return [line.removeprefix("costaudit: warning: ") for line in stderr.splitlines()
            if line.startswith("costaudit: warning: ")]


def validated(case: Path) -> list[str]:
    """The warnings of ``costaudit validate`` on ``case``, which passes (exit 0)."""
    result = costaudit("validate", case)
    assert result.returncode == 0, result.stderr
    return warnings_of(result.stderr)


def errors_of(stderr: str) -> list[str]:
    """The errors, each without its ``costaudit: error: <case.toml>:`` prefix."""
    return [line.split(": ", 3)[3] for line in stderr.splitlines() if line.startswith("costaudit: error: ")]


def test_the_generated_case_fits(eks):
    result = costaudit("validate", eks)
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr and "with" not in result.stdout


def test_a_regex_without_re_is_an_error_with_the_re_form(eks, tmp_path):
    case = edited(eks, tmp_path, 'pod = "re:^chat-"', 'pod = "chat-.*"')
    result = costaudit("validate", case)
    assert result.returncode == 1
    line = next(x for x in result.stderr.splitlines() if "service chat" in x)
    assert 'service chat matches nothing in the data: pod = "chat-.*" matches no pod' in line
    assert "pods in namespace llm: chat-" in line and "did you mean `re:^chat-`?" in line
    assert "Traceback" not in result.stderr
    run = costaudit("run", case, "--out", tmp_path / "out", "--format", "json")
    assert run.returncode == 1 and line.split(": ", 1)[1] in run.stderr
    assert not (tmp_path / "out").exists()


def test_a_matcher_without_pods_is_a_warning_when_a_request_log_names_the_service(eks, tmp_path):
    case = edited(eks, tmp_path, 'namespace = "embed"\npod = "re:^embed-"', 'namespace = "embedding"\npod = "re:^embed-"')
    log = case / "telemetry" / "access.log"
    log.write_text("".join(f'10.0.0.{i} - - [01/Sep/2026:0{i}:10:00 +0000] "POST /v1/embeddings HTTP/1.1" 200 '
                           f'512 "-" "python-httpx/0.27"\n' for i in range(5)), encoding="utf-8")
    with (case / CASE).open("a", encoding="utf-8") as toml:
        toml.write('\n[[telemetry]]\nname = "gateway-log"\nformat = "access_log"\npath = "telemetry/access.log"\n'
                   'service = "embed"\n')
    result = costaudit("validate", case)
    assert result.returncode == 0, result.stderr
    (warning,) = [w for w in warnings_of(result.stderr) if "service embed" in w]
    assert 'namespace = "embedding" matches no namespace' in warning and "did you mean `embed`?" in warning
    assert "gateway-log" in warning and "undeclared workload" in warning
    assert "with 1 warning(s)" in result.stdout


def test_a_request_log_naming_an_undeclared_service(eks, tmp_path):
    case = edited(eks, tmp_path, "[services.embed]", "[services.embed]")
    (case / "telemetry" / "access.log").write_text(
        "".join(f'10.0.0.1 - - [01/Sep/2026:0{i}:20:00 +0000] "POST /v1/chat/completions HTTP/1.1" 200 90 "-" '
                f'"curl/8.5"\n' for i in range(3)), encoding="utf-8")
    with (case / CASE).open("a", encoding="utf-8") as toml:
        toml.write('\n[[telemetry]]\nname = "alb"\nformat = "access_log"\npath = "telemetry/access.log"\n'
                   'service = "chatt"\n')
    (warning,) = validated(case)
    assert ("request-log source alb names service chatt, which has no [services] entry: its 3 requests count "
            "for no service; services declared: chat, gateway, embed — did you mean chat?") == warning
    out = tmp_path / "out"
    run = costaudit("run", case, "--out", out, "--format", "json,html")
    assert run.returncode in (0, 2), run.stderr
    assert warning in warnings_of(run.stderr)
    fit = json.loads((out / "audit.json").read_text())["fit"]
    assert [(f["kind"], f["severity"], f["nearest"]) for f in fit] == [
        ("request_log_service", "warning", ["chat", "gateway", "embed"])]
    page = html.unescape((out / "report.html").read_text())
    first = page[:page.index("Where the money in scope goes")]
    assert "The case does not fit the data everywhere." in first
    assert "Request-log source alb names service chatt" in first


def test_a_scope_tag_no_line_carries(eks, tmp_path):
    """The tag empties the scope: an error (it was audited to 0.00 with a warning), counting the bill's 364
    invoice lines (it counted the 19 rows the reader summed them into)."""
    case = edited(eks, tmp_path, 'accounts = ["111111111111"]',
                  'accounts = ["111111111111"]\ntags = { "eks:nodegroup" = "p5-chat" }')
    out = tmp_path / "out"
    for result in (costaudit("validate", case), costaudit("run", case, "--out", out, "--format", "json,html")):
        assert result.returncode == 1, result.stderr
        (found,) = errors_of(result.stderr)
        assert found.startswith("[scope] tag eks:nodegroup matches no line; tag keys present: eks:nodegroup-name, ")
        assert found.endswith("the scope keeps no charge of the 364 billing lines read (a report would show 0.00, "
                              "or tax and credits alone)")
    assert not out.exists()


def test_a_scope_account_no_line_carries_beside_one_that_does(eks, tmp_path):
    case = edited(eks, tmp_path, 'accounts = ["111111111111"]', 'accounts = ["111111111111", "11111111111"]')
    (found,) = validated(case)
    assert found == ("[scope] account 11111111111 matches no line; accounts present: 111111111111, "
                     "222222222222, 999999999999")
    out = tmp_path / "out"
    run = costaudit("run", case, "--out", out, "--format", "json,html")
    assert found in warnings_of(run.stderr)
    document = json.loads((out / "audit.json").read_text())
    assert document["fit"][0]["kind"] == "scope_account" and document["fit"][0]["nearest"][0] == "111111111111"
    page = html.unescape((out / "report.html").read_text())
    assert "[scope] account 11111111111 matches no line" in page[:page.index("Where the money in scope goes")]


def test_a_scope_tag_value_accounts_and_services_no_line_carries(eks, tmp_path):
    case = edited(eks, tmp_path, 'accounts = ["111111111111"]',
                  'accounts = ["11111111111"]\nservices = ["Amazon EC2"]\ntags = { team = "analytic" }')
    found = [e.split("; the scope keeps no charge")[0] for e in errors_of(costaudit("validate", case).stderr)]
    assert found[0] == ("[scope] account 11111111111 matches no line; accounts present: 111111111111, "
                        "222222222222, 999999999999")
    assert found[1].startswith("[scope] service Amazon EC2 matches no line; services present: ")
    assert "Amazon Elastic Compute Cloud" in found[1] and "Elastic Load Balancing" in found[1]
    assert found[2] == '[scope] tag team = "analytic" matches no line; values of team present: analytics'


@pytest.mark.parametrize("step, empty", [("10m", "33%"), ("5m", "67%"), ("1m", "93%")])
def test_a_step_finer_than_the_samples_are_apart(eks, tmp_path, step, empty):
    """The case's DCGM samples are 15 minutes apart: at a finer step, intervals without a sample were
    reported unmeasured with no word of why (the step is finer than the data, not the data missing)."""
    case = edited(eks, tmp_path, 'step = "1h"', f'step = "{step}"')
    found = warnings_of(costaudit("validate", case).stderr)
    assert found == [f"[case] step {step} is finer than the GPU activity samples are apart (about 15m): {empty} "
                     "of the intervals between a GPU's samples have none, and the GPU time in them is reported "
                     "unmeasured although it was sampled; a step of 15m or more fits them"]
    out = tmp_path / "out"
    costaudit("run", case, "--out", out, "--format", "json")
    entry = json.loads((out / "audit.json").read_text())["fit"]
    assert [(f["kind"], f["subject"], f["nearest"]) for f in entry] == [("step_finer_than_samples", "[case] step",
                                                                          ["15m"])]


@pytest.mark.parametrize("step", ["15m", "20m", "2h"])
def test_a_step_the_samples_fill_fits(eks, tmp_path, step):
    """20m is no multiple of 15m, but every interval holds a sample: nothing to say."""
    case = edited(eks, tmp_path, 'step = "1h"', f'step = "{step}"')
    result = costaudit("validate", case)
    assert result.returncode == 0 and "warning" not in result.stderr, result.stderr


def test_an_outage_is_not_a_step_misfit():
    """A GPU's day without samples is one long gap (the coverage section's business); a missed scrape
    now and then leaves under a tenth of the intervals empty. Neither is the step's fault."""
    import pandas as pd

    from audit.fit_step import sampled_gaps, step_fit

    hours = list(range(0, 24 * 10))
    hours = [h for h in hours if not 48 <= h < 72 and h % 30 != 7]   # a day out, a scrape missed every 30 h
    activity = pd.DataFrame({"source": "p", "node": "n1", "gpu": "0", "uuid": "GPU-1",
                             "ts": pd.to_datetime([1_788_220_800 + 3600 * h for h in hours], unit="s", utc=True)})
    assert sorted(set(sampled_gaps(activity, 3600).tolist())) == [1, 2, 25]

    class Tele:
        pass
    tele, case = Tele(), type("C", (), {"step_seconds": 3600})()
    tele.activity = activity
    assert step_fit(case, tele) == []
    case.step_seconds = 1800  # the same samples at half the step: every other interval empty
    assert [m.kind for m in step_fit(case, tele)] == ["step_finer_than_samples"]
    case.step_seconds = None  # no step set: the grid is the samples' own spacing
    assert step_fit(case, tele) == []


def test_an_outage_inside_a_short_window_is_not_a_step_misfit():
    """cloudgen eks 8201 over 06:00-18:00 at step 1h, one node's 8 GPUs silent 09:00-12:00: every gap of
    up to 4 intervals counted as sampling, the outage's gap of 4 among them, so 11 % of the intervals
    were "between samples" and the warning said the samples were about 67m apart (a step of 2h fits).
    The typical (median) gap is 1 interval: the outage is no sampling, and nothing is said of the step."""
    import pandas as pd

    from audit.fit_step import step_fit

    rows = [{"source": "p", "node": f"n{g // 8}", "gpu": str(g % 8), "uuid": f"GPU-{g}",
             "ts": pd.Timestamp("2026-09-01T06:00:00Z") + pd.Timedelta(hours=h)}
            for g in range(20) for h in range(12) if not (8 <= g < 16 and 3 <= h < 6)]
    tele, case = type("T", (), {"activity": pd.DataFrame(rows)})(), type("C", (), {"step_seconds": 3600})()
    assert step_fit(case, tele) == []
    case.step_seconds = 1800  # the same samples at half the step: every other interval empty, named
    (found,) = step_fit(case, tele)
    assert found.message.startswith("[case] step 30m is finer than the GPU activity samples are apart (about 1h): ")


def test_an_outage_is_reported_by_the_coverage_not_the_step(eks, tmp_path):
    """The same over the generated case (its second p5's exporter silent 09:00-12:00): no fit warning,
    and the outage's 24 GPU-hours are the coverage's unmeasured hours and the unattributed bucket's
    GPU-intervals with no activity sample."""
    case = edited(eks, tmp_path, 'window = ["2026-09-01", "2026-09-02"]',
                  'window = ["2026-09-01T06:00:00", "2026-09-01T18:00:00"]')
    out = tmp_path / "out"
    done = costaudit("run", case, "--out", out, "--format", "json")
    assert done.returncode == 0, done.stderr
    audit = json.loads((out / "audit.json").read_text())
    assert [f["kind"] for f in audit["fit"]] == []
    assert audit["coverage"]["unmeasured_gpu_hours"] == "24.00"
    parts = audit["buckets"]["unattributed"]["parts"]
    assert sum(float(p["gpu_hours"]) for p in parts if p["name"] == "no_activity_sample") == 24


def test_nodes_that_meet_nothing_are_named_with_what_each_side_carries(eks, tmp_path):
    case = edited(eks, tmp_path, "[services.chat]",
                  '[nodes]\n"ip-10-0-9-9.ec2.internal" = "i-0123456789abcdef0"\n\n[services.chat]')
    found = warnings_of(costaudit("validate", case).stderr)
    assert len(found) == 2
    assert found[0].startswith('[nodes] ip-10-0-9-9.ec2.internal = "i-0123456789abcdef0": telemetry names no node '
                               "ip-10-0-9-9.ec2.internal; telemetry nodes: ip-10-0-")
    assert "(i-0" in found[0]
    assert found[1].startswith('[nodes] ip-10-0-9-9.ec2.internal = "i-0123456789abcdef0": no billing line names '
                               "this resource; GPU resources billed: i-0")


def test_a_billed_gpu_and_a_telemetry_node_that_do_not_meet(eks, tmp_path):
    case = edited(eks, tmp_path, "[services.chat]", "[services.chat]")
    billing = case / "billing" / "focus_aws.csv"
    text = billing.read_text(encoding="utf-8")
    gpu_instance = "i-085599882ec70c1f6"
    assert gpu_instance in text
    billing.write_text(text.replace(gpu_instance, "i-0aaaaaaaaaaaaaaaa"), encoding="utf-8")
    found = warnings_of(costaudit("validate", case).stderr)
    billed = next(w for w in found if w.startswith("billed GPU resource i-0aaaaaaaaaaaaaaaa"))
    assert "(p5.48xlarge)" in billed and "meets no telemetry node" in billed and f"({gpu_instance})" in billed
    node = next(w for w in found if w.startswith("telemetry node "))
    assert f"({gpu_instance}) shows GPU activity but no GPU line in scope bills it" in node
    assert "i-0aaaaaaaaaaaaaaaa (p5.48xlarge)" in node


def test_a_service_every_pod_of_which_an_earlier_service_owns(eks, tmp_path):
    """A pod belongs to the first service whose matchers hold: a narrower service declared after a
    broader one got 0.00 in silence while the broader one counted its GPU time."""
    case = edited(eks, tmp_path, "[services.embed]", '[services.chat_canary]\nnamespace = "llm"\n'
                  'pod = "re:^chat-"\n\n[services.embed]')
    found = validated(case)
    assert len(found) == 1 and found[0].startswith("service chat_canary matches ")
    assert ("and every one belongs to service chat, declared before it (a pod belongs to the first service "
            "whose matchers all hold): chat_canary gets none of their GPU time and service chat counts it all; "
            "declare chat_canary first, or narrow the matchers of service chat") in found[0]
    out = tmp_path / "out"
    costaudit("run", case, "--out", out, "--format", "json")
    document = json.loads((out / "audit.json").read_text())
    assert [(f["kind"], f["nearest"]) for f in document["fit"]] == [("service_shadowed", ["chat"])]
    assert document["services"]["chat_canary"]["cost"] == "0.00"
    # declared first, the canary owns the pods, and chat is the one left with none
    first = edited(eks, tmp_path / "first", "[services.chat]", '[services.chat_canary]\nnamespace = "llm"\n'
                   'pod = "re:^chat-"\n\n[services.chat]')
    found = warnings_of(costaudit("validate", first).stderr)
    assert len(found) == 1 and found[0].startswith("service chat matches ")
    assert found[0].endswith("declare chat first, or narrow the matchers of service chat_canary")


def test_gpu_lines_that_name_no_resource(eks, tmp_path):
    """A bill without resource ids (a CUR written without them, a FOCUS file whose ResourceId is
    empty): every GPU line is unattributed as not in telemetry. The warning said "no GPU line in
    scope bills any" while they billed thousands of GPU-hours; it now says what is missing."""
    case = edited(eks, tmp_path, "[services.chat]", "[services.chat]")
    billing, rows = billing_rows(case)
    column = rows[0].index("ResourceId")
    for row in rows[1:]:
        row[column] = ""
    write_rows(billing, rows)
    found = warnings_of(costaudit("validate", case).stderr)
    anonymous = next(w for w in found if "name no resource" in w)
    assert " GPU line(s) in scope billing g6e.12xlarge, p5.48xlarge name no resource (ResourceId, or a CUR's " in anonymous
    assert "their cost is unattributed (GPU not in telemetry); telemetry GPU nodes: ip-10-0-" in anonymous
    assert int(anonymous.split(" GPU line")[0].replace(",", "")) == 72  # a day of 3 machines, hourly
    assert any(w.endswith("but no GPU line in scope names a resource") for w in found)
    assert not any("bills any" in w for w in found)
    assert anonymous.endswith("A billing export with resource ids (a CUR with 'Include resource IDs') fits")


def test_a_negative_quantity_at_a_positive_cost_is_named(eks, tmp_path):
    """A usage line billing -1 hours at a positive cost was read with no word (its hours feed the
    GPU split and the price check)."""
    case = edited(eks, tmp_path, "[services.chat]", "[services.chat]")
    billing, rows = billing_rows(case)
    header = rows[0]
    usage = first_usage(rows, "BilledCost")
    rows[usage][header.index("ConsumedQuantity")] = "-1"
    write_rows(billing, rows)
    found = [w for w in warnings_of(costaudit("validate", case).stderr) if "negative ConsumedQuantity" in w]
    assert found == [f"1 usage line(s) bill a negative ConsumedQuantity at a positive BilledCost (lines "
                     f"focus_aws.csv:{usage}; the first: -1 at {rows[usage][header.index('BilledCost')]}): "
                     "the quantity is read as given, and the GPU hours and price checks that use it rest on it"]


def test_a_negative_cost_at_a_positive_quantity_is_named(eks, tmp_path):
    """A usage row billing -5000 for 208 hours went through as "reconciles", the buckets' shares
    above 1 and below 0, with no word."""
    case = edited(eks, tmp_path, "[services.chat]", "[services.chat]")
    billing, rows = billing_rows(case)
    header = rows[0]
    usage = first_usage(rows, "BilledCost", "PricingQuantity")
    for column in ("BilledCost", "EffectiveCost"):
        rows[usage][header.index(column)] = "-5000"
    write_rows(billing, rows)
    found = [w for w in warnings_of(costaudit("validate", case).stderr) if "negative BilledCost" in w]
    assert found == [f"1 usage line(s) bill a positive PricingQuantity at a negative BilledCost (lines "
                     f"focus_aws.csv:{usage}; the first: {rows[usage][header.index('PricingQuantity')]} at -5000): "
                     "the cost is read as given (a refund is a Credit line), and every bucket it reaches is lower by it"]


def test_a_gcp_standard_export_is_told_of_the_detailed_one(tmp_path):
    """GCP's standard export has no resource names: the advice named the CUR's option."""
    import json

    case = tmp_path / "gke"
    done = subprocess.run([sys.executable, "-m", "benchmarks.cloudgen", "--cloud", "gke", "--seed", "1", "--out", str(case),
                           "--billing", "native"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    (detailed,) = (case / "billing").glob("gcp_billing_export_resource_v1*.jsonl")
    standard = detailed.with_name("gcp_billing_export_v1.jsonl")
    with detailed.open(encoding="utf-8") as rows, standard.open("w", encoding="utf-8") as out:
        for line in rows:
            record = json.loads(line)
            record.pop("resource", None)
            out.write(json.dumps(record) + "\n")
    detailed.unlink()
    toml = case / "case.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace(detailed.name, standard.name), encoding="utf-8")
    anonymous = next(w for w in warnings_of(costaudit("validate", case).stderr) if "name no resource" in w)
    assert anonymous.endswith("A billing export with resource ids (the detailed usage cost export, "
                              "gcp_billing_export_resource_v1_…) fits")


def test_a_window_longer_than_the_billing(eks, tmp_path):
    """The case's bill covers 1 September; audited for 1–3 September, its figures were one day's,
    presented as the window's, without a word."""
    case = edited(eks, tmp_path, 'window = ["2026-09-01", "2026-09-02"]', 'window = ["2026-09-01", "2026-09-03"]')
    found = [w for w in warnings_of(costaudit("validate", case).stderr) if "usage line" in w]
    assert found == ["no billing source has a usage line on 1 of the window's 2 day(s): 2026-09-02 – 2026-09-03. "
                     "The figures are those of the days billed (2026-09-01 – 2026-09-02), not of the whole window "
                     "2026-09-01 – 2026-09-03; an export that covers the window, or a window inside "
                     "2026-09-01 – 2026-09-02, fits"]


def test_a_calendar_month_without_billing_is_one_named_error(eks, tmp_path):
    """Two months audited from one month's bill: the month audit stopped with "no billing line falls in
    the window 2026-08-31 – 2026-09-01", a window the case never wrote; now it names the month and what
    the billing covers, and run writes nothing."""
    case = edited(eks, tmp_path, 'window = ["2026-09-01", "2026-09-02"]', 'window = ["2026-08-31", "2026-09-02"]')
    out = tmp_path / "out"
    result = costaudit("run", case, "--out", out, "--format", "json")
    assert result.returncode == 1 and "Traceback" not in result.stderr and not out.exists()
    assert ("column ChargePeriodStart: no billing line falls in 2026-08 (2026-08-31 – 2026-09-01), of the window "
            "2026-08-31 – 2026-09-02; the billing's lines in the window cover 2026-09-01 00:00 – 2026-09-02 00:00 UTC "
            "(expected billing lines in every calendar month of the window, or a window inside what the billing "
            "covers)") in result.stderr


def test_a_window_given_with_an_offset_is_named_in_utc_times(eks, tmp_path):
    """A window of 2026-09-01 – 2026-09-02 at +05:30 starts at 18:30 UTC on 31 August: the error named the
    window as whole days and said "the billing covers 2026-09-01 00:00 – 2026-09-01 18:30 UTC", what lies in
    the window, as if it were all the file held; now both in UTC times, and what the lines in the window cover."""
    case = edited(eks, tmp_path, 'window = ["2026-09-01", "2026-09-02"]',
                  'window = ["2026-09-01T00:00:00+05:30", "2026-09-02T00:00:00+05:30"]')
    result = costaudit("run", case, "--out", tmp_path / "out", "--format", "json")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert ("no billing line falls in 2026-08 (2026-08-31 18:30 – 2026-09-01 00:00 UTC), of the window "
            "2026-08-31 18:30 – 2026-09-01 18:30 UTC; the billing's lines in the window cover "
            "2026-09-01 00:00 – 2026-09-01 18:30 UTC") in result.stderr


def test_billed_days_count_short_usage_lines_only():
    """A month-long fee covers no day; an hourly line covers its day; a line ending at midnight covers
    only the day it ran in; without any short usage line nothing is said."""
    from datetime import datetime, timezone

    import pandas as pd

    from audit.fit_window import billed_days, window_fit

    case = type("C", (), {"start": datetime(2026, 9, 1, tzinfo=timezone.utc),
                          "end": datetime(2026, 9, 6, tzinfo=timezone.utc)})()
    def at(*days):
        return pd.to_datetime([f"2026-09-{d}" for d in days], utc=True)
    lines = pd.DataFrame({"start": at("01T00", "01T05", "03T23", "01T00"),
                          "end": at("01T01", "02T00", "04T00", "30T00"),
                          "charge_category": ["Usage", "Usage", "Usage", "Purchase"]})
    assert billed_days(case, lines).tolist() == [True, False, True, False, False]
    [misfit] = window_fit(case, lines)
    assert misfit.kind == "window_not_billed" and misfit.nearest == ("2026-09-01 – 2026-09-04",)
    assert "on 3 of the window's 5 day(s): 2026-09-02 – 2026-09-03, 2026-09-04 – 2026-09-06." in misfit.message
    assert window_fit(case, lines.iloc[[3]]) == []
    before = lines.iloc[[0]].assign(start=at("01T00") - pd.Timedelta(days=3), end=at("01T01") - pd.Timedelta(days=3))
    assert window_fit(case, before) == []  # no usage line in the window to tell its days by


def test_days_of_billed_gpu_time_without_any_sample():
    """Telemetry exported for the first days of the window: the rest of the billed GPU time is
    unmeasured interval by interval; the warning says where at once. A run of 72 hourly GPU lines
    joined into one line (line_count 72) counts for the three days it spans."""
    from datetime import datetime, timezone

    import pandas as pd

    from audit.fit_window import telemetry_days_fit

    case = type("C", (), {"start": datetime(2026, 9, 1, tzinfo=timezone.utc),
                          "end": datetime(2026, 9, 4, tzinfo=timezone.utc)})()
    gpu_lines = pd.DataFrame({"start": pd.to_datetime(["2026-09-01T00"], utc=True),
                              "end": pd.to_datetime(["2026-09-04T00"], utc=True),
                              "charge_category": ["Usage"], "line_count": [72]})
    tele = type("T", (), {})()
    tele.step = 3600
    tele.activity = pd.DataFrame({"ts": pd.to_datetime(["2026-09-01T05", "2026-09-01T06"], utc=True)})
    [misfit] = telemetry_days_fit(case, gpu_lines, tele)
    assert misfit.kind == "telemetry_gap" and misfit.nearest == ("2026-09-01 – 2026-09-02",)
    assert misfit.message.startswith("GPU time is billed on 2 day(s) on which no GPU has an activity sample: "
                                     "2026-09-02 – 2026-09-04.")
    tele.activity = pd.DataFrame({"ts": pd.to_datetime(["2026-09-01T05", "2026-09-02T06", "2026-09-03T23"], utc=True)})
    assert telemetry_days_fit(case, gpu_lines, tele) == []
    assert telemetry_days_fit(case, gpu_lines.assign(line_count=1), tele) == []  # a 3-day line of one: no days


def test_telemetry_with_no_gpu_activity_sample_in_the_window_is_named():
    """DCGM exported a year later beside this month's other families: every GPU-hour unmeasured,
    model compute 0.00, and no word (the nodes being known, no node misfit said it)."""
    from datetime import datetime, timezone
    from types import SimpleNamespace

    import pandas as pd

    from audit.fit_window import telemetry_days_fit

    gpu_lines = pd.DataFrame({"start": pd.to_datetime(["2026-09-01T00"], utc=True),
                              "end": pd.to_datetime(["2026-09-01T01"], utc=True), "charge_category": ["Usage"]})
    sources = (SimpleNamespace(name="bill", kind="billing"), SimpleNamespace(name="prom", kind="telemetry"))
    case = SimpleNamespace(start=datetime(2026, 9, 1, tzinfo=timezone.utc), end=datetime(2026, 9, 4, tzinfo=timezone.utc),
                           sources=sources)
    tele = SimpleNamespace(step=3600, activity=pd.DataFrame({"ts": pd.to_datetime([], utc=True)}))
    [misfit] = telemetry_days_fit(case, gpu_lines, tele)
    assert misfit.kind == "telemetry_gap" and misfit.message.startswith(
        "GPU time is billed on 1 day(s) of the window, and no telemetry source (prom) has a GPU activity sample in it")
    case.sources = sources[:1]  # billing-only: the coverage says so
    assert telemetry_days_fit(case, gpu_lines, tele) == []


def test_a_coarse_step_samples_every_day_of_its_intervals():
    """At a step of a week the activity rows are stamped at each week's start: the warning said GPU
    time was billed on the other six days of each week without a sample."""
    from datetime import datetime, timezone

    import pandas as pd

    from audit.fit_window import sampled_days, telemetry_days_fit

    case = type("C", (), {"start": datetime(2026, 9, 1, tzinfo=timezone.utc),
                          "end": datetime(2026, 10, 1, tzinfo=timezone.utc)})()
    gpu_lines = pd.DataFrame({"start": pd.date_range("2026-09-01", periods=720, freq="h", tz="UTC"),
                              "charge_category": "Usage", "line_count": 1})
    gpu_lines["end"] = gpu_lines["start"] + pd.Timedelta(hours=1)
    tele = type("T", (), {})()
    tele.step = 7 * 86_400
    tele.activity = pd.DataFrame({"ts": pd.date_range("2026-09-01", periods=5, freq="7D", tz="UTC")})
    assert telemetry_days_fit(case, gpu_lines, tele) == []
    weeks = pd.Series(pd.to_datetime(["2026-08-30", "2026-09-15"], utc=True))  # one before the window
    assert sampled_days(case, weeks, 30, 7 * 86_400).tolist() == [True] * 5 + [False] * 9 + [True] * 7 + [False] * 9
    assert sampled_days(case, weeks, 30, 3600).tolist() == [False] * 14 + [True] + [False] * 15


def test_a_profile_recorded_on_another_gpu_model(eks, tmp_path):
    """The case's H100 trace attached to embed, which runs on g6e.12xlarge (L40S): its gap ratio split
    L40S GPU time by an H100's figures without a word."""
    case = edited(eks, tmp_path, 'path = "profiles/h100_qwen1.5-0.5b-chat.json.gz"\nservice = "chat"',
                  'path = "profiles/h100_qwen1.5-0.5b-chat.json.gz"\nservice = "embed"')
    found = [w for w in warnings_of(costaudit("validate", case).stderr) if w.startswith("profile ")]
    assert found == ["profile chat-profile was recorded on NVIDIA H100 80GB HBM3 (H100), but service embed runs on "
                     "L40S: the kernel-active time and gap ratio of one GPU model do not describe another, so the "
                     "share of embed's GPU time read as model compute is another GPU's; a profile recorded on L40S "
                     "fits"]


def test_gpus_per_replica_against_the_pods(eks, tmp_path):
    """The right-size option priced replicas of gpus_per_replica GPUs: 64 where pods hold one made it
    "no saving" in silence (the demo: 6,767.02 a month before)."""
    case = edited(eks, tmp_path, "[services.chat]\nnamespace = \"llm\"\npod = \"re:^chat-\"\ngpus_per_replica = 1",
                  "[services.chat]\nnamespace = \"llm\"\npod = \"re:^chat-\"\ngpus_per_replica = 64")
    found = warnings_of(costaudit("validate", case).stderr)
    assert found == ["service chat sizes a replica at gpus_per_replica = 64, but its pods hold 1 GPU(s) each in the "
                     "GPU activity (the median over its pods and intervals): the right-size and autoscaling "
                     "options would count replicas of the wrong size; gpus_per_replica = 1 fits the data"]


def test_gpu_replica_settings_on_a_cpu_tier_are_named(eks, tmp_path):
    """The gateway (a tags claim, no pods) with gpus_per_replica = 2, min_replicas = 3 and
    scale_reaction = "5m" (a verifier's find): before, validate and run said nothing; now the settings
    are named as applying to nothing. The default values written out are no warning."""
    claim = '[services.gateway]\ntags = { "eks:nodegroup-name" = "cpu-gateway" }'
    case = edited(eks, tmp_path, claim, claim + '\ngpus_per_replica = 2\nmin_replicas = 3\nscale_reaction = "5m"')
    assert validated(case) == [
        'service gateway sets gpus_per_replica = 2, min_replicas = 3, scale_reaction = "5m", which apply to nothing: '
        "it has no telemetry matchers and holds no GPU in the data (the GPU split gives GPU time by pods, never by a "
        "claim), and these settings size the GPU replicas of the right-size and autoscaling options; remove them (a "
        "CPU tier gets none)"]
    defaults = edited(eks, tmp_path / "defaults", claim, claim + '\ngpus_per_replica = 1\nscale_reaction = "1h"')
    assert warnings_of(costaudit("validate", defaults).stderr) == []


def test_a_pod_holding_two_gpus_against_the_default():
    """Tensor parallel 2 audited without gpus_per_replica (1 by default) is named, with 2."""
    from types import SimpleNamespace

    import pandas as pd

    from audit.case_services import Service
    from audit.fit_replicas import replicas_fit

    ts = pd.to_datetime(["2026-09-01T00", "2026-09-01T00", "2026-09-01T01", "2026-09-01T01"], utc=True)
    activity = pd.DataFrame({"namespace": "llm", "pod": "chat-0", "container": "vllm", "model_name": "",
                             "node": "n1", "uuid": ["GPU-a", "GPU-b", "GPU-a", "GPU-b"], "gpu": ["0", "1", "0", "1"],
                             "ts": ts})
    services = {"chat": Service("chat", {"namespace": "llm"})}
    [misfit] = replicas_fit(SimpleNamespace(services=services), SimpleNamespace(activity=activity, traffic=pd.DataFrame()))
    assert misfit.kind == "gpus_per_replica" and misfit.nearest == ("2",)
    services = {"chat": Service("chat", {"namespace": "llm"}, gpus_per_replica=2)}
    assert replicas_fit(SimpleNamespace(services=services), SimpleNamespace(activity=activity, traffic=pd.DataFrame())) == []
    # the same GPU seen twice in an interval (two rows for one GPU-interval) is one GPU
    doubled = pd.concat([activity, activity.iloc[[0]]])
    assert replicas_fit(SimpleNamespace(services=services), SimpleNamespace(activity=doubled, traffic=pd.DataFrame())) == []
    # a pod no service declares is nobody's (it once made the median of nothing, a ValueError)
    other = pd.concat([activity, activity.assign(namespace="batch", pod="job-1")])
    assert replicas_fit(SimpleNamespace(services=services), SimpleNamespace(activity=other, traffic=pd.DataFrame())) == []


def test_gpu_model_families():
    from audit.fit_profiles import family

    names = {"NVIDIA H100 80GB HBM3": "H100", "H100 80GB": "H100", "NVIDIA A10G": "A10G", "A10": "A10",
             "NVIDIA L40S": "L40S", "L4": "L4", "Tesla T4": "T4", "AMD Instinct MI300X": "MI300X",
             "NVIDIA H200": "H200", "NVIDIA H20": "H20", "Tesla V100-SXM2-16GB": "V100", "": "", "cpu": ""}
    assert {name: family(name) for name in names} == names


def test_untrusted_values_are_cut_and_escaped():
    from audit.fit import listing, suggestion, text
    assert text("a\nb") == "a\\nb" and len(text("x" * 500)) <= 61
    assert listing([str(i) for i in range(9)]) == "0, 1, 2, 3, 4 … (4 more)"
    assert suggestion("ranker-.*", ["ranker-7d9f-0", "ranker-7d9f-1"]) == "re:^ranker-"
    assert suggestion("ranker-00", ["ranker-0", "chat-0"]) == "ranker-0"
    assert suggestion("zzz", ["ranker-0"]) is None


def test_the_page_one_note_is_escaped():
    from audit.reporters.html import charts_of, render_html
    from audit.reporters.view import build_model
    document = json.loads((ROOT / "tests" / "data" / "sample_audit.json").read_text())
    document["fit"] = [{"kind": "scope_tag", "subject": "x", "severity": "warning", "nearest": [],
                        "message": "[scope] tag <script>alert(1)</script> matches no line"}]
    model = build_model(document)
    page = render_html(model, charts_of(model))
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "The case does not fit the data everywhere." in page


def test_no_fit_entry_no_note():
    from audit.reporters.html import charts_of, render_html
    from audit.reporters.view import build_model
    document = json.loads((ROOT / "tests" / "data" / "sample_audit.json").read_text())
    document["fit"] = []
    model = build_model(document)
    assert "does not fit the data" not in render_html(model, charts_of(model))


# ---- the engine, on in-memory tables (tests/builders.py) ------------------------------------------

def _collected(pods: list[dict]):
    from audit.collected import Collected
    from tests.builders import activity, frame, line, lines_frame
    billing = frame("billing", "focus", {"lines": lines_frame([line(1, resource_id="i-1")])})
    if not pods:
        return Collected((billing,))
    rows = [{"node": "n1", "ts": "2026-09-01T00:00:00Z", "busy_fraction": 0.5, **p} for p in pods]
    return Collected((billing, frame("telemetry", "openmetrics", {"gpu_activity": activity(rows)})))


def test_without_pods_a_service_is_a_warning_and_strict_runs():
    from audit.pipeline import audit_collected
    from tests.builders import make_case
    result = audit_collected(make_case(), _collected([]), strict=True)
    (misfit,) = [m for m in result.fit.misfits if m.kind != "lines_unmatched"]  # the builder's line is unclassed
    assert misfit.severity == "warning" and "telemetry names no pod" in misfit.message


def test_a_service_matching_nothing_stops_a_strict_audit_only():
    from audit.audit_json import to_dict
    from audit.pipeline import audit_collected
    from connectors.errors import InputErrors
    from tests.builders import make_case
    collected = _collected([{"namespace": "search", "pod": "ranker-7d9f-0"},
                            {"namespace": "search", "pod": "ranker-7d9f-1"}])
    with pytest.raises(InputErrors, match='namespace = "llm" matches no namespace; namespaces in telemetry: search'):
        audit_collected(make_case(), collected, strict=True)
    document = to_dict(audit_collected(make_case(), collected))
    assert [(f["kind"], f["severity"], f["nearest"]) for f in document["fit"] if f["kind"] != "lines_unmatched"] == [
        ("service_unmatched", "error", ["search"]),
        ("telemetry_node_not_billed", "warning", ["n1"])]


def test_service_matchers_keep_the_case_files_order():
    """A service's matchers (and so the misfit messages that list them) come in the order the case
    file writes them, whatever the interpreter's hash seed: the keys were once read from a set."""
    from audit.case_services import parse_services

    problems: list[str] = []
    services = parse_services({"a": {"pod": "re:^a-", "namespace": "llm"},
                               "b": {"namespace": "llm", "container": "c", "pod": "re:^b-"}},
                              lambda table, key, default, where, found: default, problems)
    assert problems == []
    assert list(services["a"].match) == ["pod", "namespace"]
    assert list(services["b"].match) == ["namespace", "container", "pod"]


def test_telemetry_of_another_quarter_is_named_with_the_span_it_covers(tmp_path):
    """Last quarter's telemetry beside this month's bill: the only word was that telemetry names no
    pod of chat or embed."""
    import shutil

    case = tmp_path / "demo"
    shutil.copytree(ROOT / "fixtures" / "demo", case)
    shutil.copy(ROOT / "fixtures" / "history" / "q2" / "telemetry" / "metrics.om.gz", case / "telemetry" / "metrics.om.gz")
    found = warnings_of(costaudit("validate", case).stderr)
    assert found[0].startswith("telemetry source prometheus-export holds ")
    assert found[0].endswith("sample(s), none in the window 2026-09-01 – 2026-10-01: they run from 2026-04-01 00:00 "
                             "to 2026-07-01 00:00 UTC. Nothing it holds is measured in the window (its GPU time is "
                             "unattributed); telemetry exported for the window, or a window inside 2026-04-01 – "
                             "2026-07-01, fits")
    assert any(w.startswith("service chat: telemetry names no pod") for w in found[1:])


def test_a_bill_in_another_currency_is_one_error_with_the_setting_that_fits(tmp_path):
    """It was twenty errors, one a row, none saying that every line was in USD. The count is of the
    bill's lines (16,113 rows), not of the rows the reader summed them into (it said 817)."""
    import shutil

    case = tmp_path / "demo"
    shutil.copytree(ROOT / "fixtures" / "demo", case)
    toml = case / "case.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace('currency = "USD"', 'currency = "EUR"'), encoding="utf-8")
    done = costaudit("validate", case)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("costaudit: error:")]
    assert len(errors) == 1, errors
    assert ("row 1, column BillingCurrency: currency 'USD' differs from the case's on 16,113 line(s) in the "
            'window (every one), the first focus_2026-09.csv.gz:1; set currency = "USD" in [case] '
            "(amounts are never converted between currencies) (expected EUR)") in errors[0]


def test_a_claim_whose_lines_another_service_owns_is_named(eks, tmp_path):
    """A second service claiming the gateway's node group by the same tag ran with exit 0 and no
    word: the gateway, declared first, owns every line, and gw2's cost was 0.00."""
    case = edited(eks, tmp_path, '[services.gateway]\ntags = { "eks:nodegroup-name" = "cpu-gateway" }',
                  '[services.gateway]\ntags = { "eks:nodegroup-name" = "cpu-gateway" }\n\n'
                  '[services.gw2]\ntags = { "eks:nodegroup-name" = "cpu-gateway" }')
    [found] = [w for w in validated(case) if w.startswith("service gw2:")]
    assert re.fullmatch(r"service gw2: its claims match (\d[\d,]*) line\(s\) in scope and it owns 0 of them; \1 are "
                        r"serving_compute lines owned by service gateway \(its rule, or its claim first in file "
                        r"order\): \d+\.\d\d USD", found), found


def test_a_claim_on_gpu_lines_is_named(eks, tmp_path):
    """A claim by resource id on a GPU instance owns nothing: the GPU split gives its time by telemetry."""
    gpu = _gpu_instance(eks)
    case = edited(eks, tmp_path, '[services.gateway]\ntags = { "eks:nodegroup-name" = "cpu-gateway" }',
                  f'[services.gateway]\ntags = {{ "eks:nodegroup-name" = "cpu-gateway" }}\n\n'
                  f'[services.pinned]\nresource_ids = ["{gpu}"]')
    found = [w for w in warnings_of(costaudit("validate", case).stderr) if w.startswith("service pinned:")]
    assert len(found) == 1 and "it owns 0 of them" in found[0]
    assert "are gpu_compute lines (the GPU split gives GPU time by telemetry, not by claims)" in found[0]


def _gpu_instance(eks: Path) -> str:
    """The ResourceId of a GPU instance the generated bill charges (a p5 or g6e line)."""
    with (eks / "billing" / "focus_aws.csv").open(encoding="utf-8", newline="") as f:
        return next(row["ResourceId"] for row in csv.DictReader(f)
                    if row["ResourceId"].startswith("i-") and re.search(r"\b(p5|g6e)\.", row["ChargeDescription"]))


def test_without_a_profile_s_traffic_the_reconciliation_is_not_measured(eks, tmp_path):
    """With no profile stating its traffic, both sides took telemetry's kernel-active seconds and the
    audit said "reconciles", gap 0.000000: a verdict the data could not have failed (METHOD §5)."""
    case = edited(eks, tmp_path, "requests = 16\nprompt_tokens = 32768\ngenerated_tokens = 16\n", "")
    out = tmp_path / "out"
    result = costaudit("run", case, "--out", out, "--format", "json")
    assert result.returncode == 0, result.stderr
    recon = json.loads((out / "audit.json").read_text())["reconciliation"]
    assert recon["verdict"] == "not_measured" and recon["gap"] is None and recon["bottom_up"] is None
    assert recon["reason"].startswith("no service's kernel time is estimated from a kernel profile with its traffic")


def test_charges_no_rule_classes_are_named_largest_first(eks, tmp_path):
    """Rule 5: a charge no rule classes is unattributed, and the user is told which, by name, with its
    amount and share (before: the audit said only "Unmatched invoice lines … no rule matched")."""
    case = edited(eks, tmp_path, "[case]", "[case]")
    billing, rows = billing_rows(case)
    header = rows[0]
    for name, resource, amount in (("Acme Widget Pro", "acme-1", "5000.00"), ("Acme Widget Pro", "acme-2", "2500.00"),
                                   ("Example Search", "", "1250.00")):
        row = list(rows[first_usage(rows, "BilledCost")])
        for column, value in (("ServiceName", name), ("ResourceId", resource), ("ResourceName", resource),
                              ("ChargeDescription", f"{name} monthly"), ("ServiceCategory", "Other"),
                              ("ServiceSubcategory", ""), ("ResourceType", ""), ("SkuId", "acme"),
                              ("SkuMeter", "acme"), ("SkuPriceDetails", ""), ("x_UsageType", "acme"),
                              ("x_Operation", ""), ("x_ServiceCode", "acme"), ("Tags", "{}"),
                              ("BilledCost", amount), ("EffectiveCost", amount), ("ListCost", amount),
                              ("ContractedCost", amount)):
            if column in header:
                row[header.index(column)] = value
        rows.append(row)
    write_rows(billing, rows)
    result = costaudit("validate", case)
    assert result.returncode == 0, result.stderr
    found = [w for w in warnings_of(result.stderr) if "match no class rule" in w]
    assert len(found) == 1, result.stderr
    assert found[0].startswith("3 charge line(s) in scope, 8750.00 USD (")
    assert ("are unattributed: Acme Widget Pro: acme-1 5000.00 (1 line); Acme Widget Pro: acme-2 2500.00 (1 line); "
            "Example Search 1250.00 (1 line).") in found[0]


def _focus_with_dcgm(tmp_path: Path, t4_pod: str = "") -> Path:
    """The FOCUS 1.0 sample (g5 lines bill A10G) beside DCGM with GPU activity on a T4 host only and
    a ray pod on an A10G host named only on DCGM_FI_PROF_DRAM_ACTIVE (the real DCGM excerpt's shape)."""
    from tests.paths import DATA
    case = tmp_path / "case"
    case.mkdir()
    t4 = 'gpu="0",UUID="GPU-20c5",modelName="Tesla T4",Hostname="424773df46e0"' + t4_pod
    a10g = ('gpu="0",UUID="GPU-abc",modelName="NVIDIA A10G",Hostname="ip-11111",container="ray-worker",'
            'namespace="ray-llm",pod="ray-1111111"')
    samples = [f"DCGM_FI_DEV_GPU_UTIL{{{t4}}} 0 {t}\n" for t in (1726102800, 1726103700)]
    samples += [f"DCGM_FI_PROF_DRAM_ACTIVE{{{a10g}}} 0.000003 {t}\n" for t in (1726102800, 1726103700)]
    (case / "dcgm.prom").write_text("".join(samples) + "# EOF\n")
    (case / CASE).write_text(
        '[case]\nname = "focus10_dcgm"\nwindow = ["2024-09-01", "2024-10-01"]\ncurrency = "USD"\n'
        'cost_basis = "billed"\nloaded_rate = 150\n\n[[billing]]\nname = "f10"\nformat = "focus"\n'
        f'path = "{DATA / "billing/focus_sample_data/focus_sample_1000.csv"}"\n\n'
        '[[telemetry]]\nname = "dcgm"\nformat = "openmetrics"\npath = "dcgm.prom"\n\n'
        '[services.ray]\nnamespace = "ray-llm"\npod = "re:^ray-"\n')
    return case


def test_a_pod_named_only_on_a_series_the_split_does_not_read_is_named(tmp_path):
    """Rule 5: telemetry names pod ray-1111111 only on DCGM_FI_PROF_DRAM_ACTIVE (an evidence gauge):
    before, the warning said telemetry names no pod, nearest none; now it names the pod, its
    namespace, node and series, nearest the pod. A g5 (A10G) resource meeting no node is offered
    the A10G node ip-11111 first (before: only the T4 host 424773df46e0)."""
    found = warnings_of(costaudit("validate", _focus_with_dcgm(tmp_path)).stderr)
    assert found[0] == (
        'service ray: telemetry names no pod on the series the split reads for GPU activity or GPU requests, so '
        'none of its matchers (namespace = "ray-llm", pod = "re:^ray-") can find its GPU time; it names pod '
        'ray-1111111 in ray-llm on node ip-11111, only on DCGM_FI_PROF_DRAM_ACTIVE, which the split does not read '
        'for activity')
    assert found[1] == (
        "billed GPU resource i-006flle71l19b488a (g5.4xlarge) meets no telemetry node (its cost is unattributed: "
        "GPU not in telemetry); telemetry GPU nodes carry: ip-11111, 424773df46e0 (the billed GPU model, A10G, on "
        "ip-11111); [nodes] can join them")
    assert (
        "billed GPU resource i-035fel2la90287a83 (g3.4xlarge) meets no telemetry node (its cost is unattributed: "
        "GPU not in telemetry); telemetry GPU nodes carry: 424773df46e0; [nodes] can join them") in found


def test_a_service_matching_only_pods_on_unread_series_names_them(tmp_path):
    """Rule 5: telemetry names pod chat-1 in llm on GPU activity and ray-1111111 in ray-llm only on
    DCGM_FI_PROF_DRAM_ACTIVE: before, the error said namespace "ray-llm" matches no namespace, 'namespaces
    in telemetry: llm' and did you mean `llm`; now ray-llm and ray-1111111 rank nearest and the pod is named
    with its namespace, node and series."""
    case = _focus_with_dcgm(tmp_path, ',namespace="llm",pod="chat-1"')
    result = costaudit("validate", case)
    assert result.returncode == 1
    assert (
        'service ray matches no pod the split reads: namespace = "ray-llm" matches no namespace on the series '
        'the split reads; namespaces in telemetry: ray-llm, llm; pod = "re:^ray-" matches no pod on the series '
        'the split reads; pods in telemetry: ray-1111111, chat-1; it names pod ray-1111111 in ray-llm on node '
        'ip-11111, only on DCGM_FI_PROF_DRAM_ACTIVE, which the split does not read for activity; no request-log '
        'source names it. Its GPU time would be counted as undeclared workload') in result.stderr
