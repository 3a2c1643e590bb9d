"""The report's charts as plain SVG (audit/reporters/svg.py): well-formed, escaped, deterministic,
self-contained, present for the demo case, and drawn without matplotlib."""

from __future__ import annotations

import base64
import copy
import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from audit.reporters.charts import CHART_SERVICES, build_charts
from audit.reporters.months_view import months_chart
from audit.reporters.review_chart import bridge_chart
from audit.reporters.svg import esc, text_width
from tests.audit.reporters.test_months_view import with_months
from tests.paths import ROOT, TEST_DATA

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = "<x>&\"y'"


@pytest.fixture(scope="module")
def sample() -> dict:
    return json.loads((TEST_DATA / "sample_audit.json").read_text(encoding="utf-8"))


def document(uri: str) -> ET.Element:
    """The parsed SVG of a chart's data URI (a string left unescaped would not parse)."""
    assert uri.startswith("data:image/svg+xml;base64,")
    return ET.fromstring(base64.b64decode(uri.split(",", 1)[1]))


def texts(uri: str) -> list[str]:
    return [t.text or "" for t in document(uri).iter(f"{SVG}text")]


def assert_self_contained(uri: str) -> None:
    """No script, no reference outside the document (only url(#…) to its own patterns), text in a
    font list ending with a generic family."""
    root = document(uri)
    raw = base64.b64decode(uri.split(",", 1)[1]).decode("utf-8")
    assert "<script" not in raw and "href" not in raw and "@import" not in raw
    assert raw.count("http") == 1  # the xmlns
    assert root.get("font-family", "").endswith("sans-serif")
    for element in root.iter():
        for value in element.attrib.values():
            assert "url(" not in value or value.startswith("url(#"), value


def hostile_case(sample: dict) -> dict:
    """The sample with a service, a second service and an option id holding markup characters."""
    audit = with_months(sample, {"embed": HOSTILE})
    audit["utilisation"] = [{**row, "service": HOSTILE if row.get("service") == "embed" else row.get("service")}
                            for row in audit.get("utilisation") or []]
    return audit


def test_hostile_names_stay_text_in_every_chart(sample):
    audit = hostile_case(sample)
    charts = {**build_charts(audit), "months": months_chart(audit)}
    for name in ("waterfall", "utilisation", "months"):
        assert charts[name] is not None, name
        assert_self_contained(charts[name])
        assert HOSTILE in texts(charts[name]), (name, texts(charts[name]))


def test_a_hostile_bridge_label_stays_text():
    bridge = {"from_total": "100.00", "to_total": "90.00",
              "steps": [{"label": f"{HOSTILE}: volume", "amount": "-10.00"}]}
    uri = bridge_chart(bridge, "USD", "q2 <b>", "q3 & co")
    assert_self_contained(uri)
    assert {f"{HOSTILE}: volume", "q2 <b> total", "q3 & co total", "−$10.00"} <= set(texts(uri))


def test_escaping_covers_markup_and_both_quotes():
    assert esc(HOSTILE) == "&lt;x&gt;&amp;&quot;y&#39;"


def test_characters_xml_cannot_hold_do_not_break_the_chart(sample):
    """A control, bidi or lone surrogate character in a name is written as its escape, as in the rest
    of the report (before: U+FFFD, and U+202E raw, reversing the label); one XML cannot hold
    otherwise (U+FFFE) as U+FFFD; the chart still parses."""
    assert esc("a\x00b\x1bc\td\ud800\ufffe") == "a\\x00b\\x1bc\\td\\ud800\ufffd"
    audit = with_months(sample, {"embed": "emb\x07ed\x1b[31m\u202eevil"})
    uri = months_chart(audit)
    assert_self_contained(uri)
    assert "emb\\x07ed\\x1b[31m\\u202eevil" in texts(uri)


def test_the_same_audit_draws_the_same_bytes(sample):
    audit = with_months(sample)
    first = {**build_charts(audit), "months": months_chart(audit)}
    again = {**build_charts(copy.deepcopy(audit)), "months": months_chart(copy.deepcopy(audit))}
    assert first == again
    assert all(v for k, v in first.items() if k != "tornado")  # the stored sample predates sensitivity


def test_every_chart_of_the_demo_case_is_drawn(demo_audit):
    charts = build_charts(demo_audit)
    assert set(charts) == {"buckets", "waterfall", "utilisation", "tornado"}
    for name, uri in charts.items():
        assert uri is not None, name
        assert_self_contained(uri)
    assert "Spend in scope by bucket (USD, total " in " ".join(texts(charts["buckets"]))
    assert "From invoice to buckets" in texts(charts["waterfall"])
    assert {"chat", "embed"} <= set(texts(charts["utilisation"]))
    assert "Payback sensitivity: each input at its low and its high" in texts(charts["tornado"])


def test_more_than_two_services_slant_their_names_and_a_crowd_is_cut(sample):
    audit = copy.deepcopy(sample)
    first = next(iter(audit["services"].values()))
    for i in range(CHART_SERVICES + 4):
        audit["services"][f"svc-{i:02d}"] = {**first, "cost": str(100 + i)}
    root = document(build_charts(audit)["waterfall"])
    slanted = [t for t in root.iter(f"{SVG}text") if "rotate(-" in t.get("transform", "")]
    assert len([t for t in slanted if (t.text or "").startswith(("svc-", "chat", "embed"))]) == CHART_SERVICES
    assert f"the {CHART_SERVICES} costliest of {len(audit['services'])} services" in texts(
        build_charts(audit)["waterfall"])


def test_labels_are_room_estimates_in_proportion_to_their_length():
    assert text_width("", 8) == 0
    assert text_width("$100,000", 8.5) < text_width("Platform overhead", 8.5) < 8.5 * len("Platform overhead")


def test_the_report_path_imports_no_matplotlib(tmp_path):
    """Writing the HTML and the PDF of an audit and the review's chart loads no matplotlib."""
    code = ("import json, sys; from pathlib import Path; from audit.render import render; "
            "from audit.reporters.review_chart import bridge_chart; "
            f"audit = json.loads(Path({str(TEST_DATA / 'sample_audit.json')!r}).read_text()); "
            f"render(audit, Path({str(tmp_path / 'out')!r}), ['html', 'pdf']); "
            "bridge_chart({'from_total': '1', 'to_total': '2', 'steps': []}, 'USD', 'a', 'b'); "
            "print('matplotlib' in sys.modules, (Path(" + repr(str(tmp_path / 'out')) + ") / 'report.pdf').exists())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["False", "True"], out.stderr


def test_the_tornado_labels_an_option_by_its_title():
    """Before: '#1 right_size_replicas: effort', the option's internal id."""
    from audit.reporters.charts import _tornado_rows
    option = {"rank": 1, "id": "right_size_replicas", "title": "Right-size replicas to demand at target utilisation",
              "payback_months": {"expected": "0.60"},
              "sensitivity": [{"input": "effort (hours)", "low": "16", "high": "80",
                               "payback_at_low": "0.24", "payback_at_high": "1.20"}]}
    assert [r[0] for r in _tornado_rows({"options": [option]})] == ["#1 Right-size replicas to demand…: effort"]
