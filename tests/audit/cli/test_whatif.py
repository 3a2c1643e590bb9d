"""`costaudit whatif`: changed settings re-price the plan on one reading of the sources.

Figures come from runs of fixtures/demo (regenerated from time to time), never written here: each
test compares the audited case with the changed one in the direction METHOD §3 / §7 gives.
"""
from __future__ import annotations

import json
import shutil
import tomllib
from decimal import Decimal

import pytest
from typer.testing import CliRunner

from audit.cli import app
from audit.errors import ConfigError
from tests.paths import DEMO

RIGHT_SIZE = "right_size_replicas"


def demo_settings() -> dict:
    return tomllib.loads((DEMO / "case.toml").read_text())


@pytest.fixture(scope="module")
def demo_base():
    """The demo case, its sources read once, and its plan view (audit/whatif_plan.py)."""
    from audit.audit_json import to_dict
    from audit.case import load_case
    from audit.collect import collect_sources
    from audit.pipeline import audit_collected
    from audit.whatif_plan import plan_view

    case = load_case(DEMO)
    collected = collect_sources(case)
    return case, collected, plan_view(to_dict(audit_collected(case, collected, strict=True)))


def changed_view(demo_base, *settings: str) -> dict:
    """The plan view of the demo under ``settings``, audited on the sources already read."""
    from audit.audit_json import to_dict
    from audit.pipeline import audit_collected
    from audit.whatif import changed_case
    from audit.whatif_plan import plan_view

    case, collected, _ = demo_base
    changed, _ = changed_case(case, settings)
    return plan_view(to_dict(audit_collected(changed, collected, strict=True)))


def expected_saving(view: dict, option_id: str) -> Decimal:
    row = next(r for r in view["options"] if r["id"] == option_id)
    return Decimal(row["monthly_saving"]["expected"])


def part_amount(document_view: dict, name: str) -> Decimal:
    return Decimal(document_view["totals"][name])


def invoke(*args: str):
    return CliRunner().invoke(app, ["whatif", str(DEMO), *args])


# -- through the command line ------------------------------------------------------------------------

def test_a_setting_that_changes_nothing_gives_an_empty_diff_and_reads_each_source_once(tmp_path, monkeypatch):
    from audit.case import load_case
    from connectors.base import Connector

    reads: list[str] = []
    original = Connector.read

    def counted(self):
        reads.append(self.spec.name)
        return original(self)
    monkeypatch.setattr(Connector, "read", counted)
    current = demo_settings()["case"]["target_utilisation"]
    out = tmp_path / "changed"
    result = invoke("--set", f"target_utilisation={current}", "--json", "--out", str(out), "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert set(document) == {"changes", "before", "after", "diff"}
    assert document["diff"] == {"options": [], "totals": {}}
    assert document["before"] == document["after"]
    assert document["changes"] == [{"key": "target_utilisation", "path": "case.target_utilisation",
                                    "before": repr(current), "after": repr(current)}]
    sources = [s.name for s in load_case(DEMO).sources]
    assert sorted(reads) == sorted(sources)                        # read once, for both cases
    assert sum("reading" in line for line in result.stderr.splitlines()) == len(sources)
    written = json.loads((out / "audit.json").read_text())        # the changed case's reports, via render
    assert [o["monthly_saving"] for o in written["options"]] == [o["monthly_saving"]
                                                                  for o in document["after"]["options"]]
    assert sorted(p.name for p in out.iterdir()) == ["audit.json"]


def test_text_table_shows_before_and_after_per_option():
    current = demo_settings()["services"]["chat"]["min_replicas"]
    result = invoke("--set", f"services.chat.min_replicas={current + 4}", "--quiet")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert f"services.chat.min_replicas {current} → {current + 4}" in text
    assert "rank" in text and "payback (months)" in text and RIGHT_SIZE in text
    assert "buckets.platform_overhead" in text and "total" in text
    assert result.stderr == ""


@pytest.mark.parametrize(("setting", "nearest"), [
    ("target_utilisaton=0.7", "target_utilisation"),
    ("services.caht.min_replicas=2", "services.chat.min_replicas"),
    ("services.chat.min_replica=2", "services.chat.min_replicas"),
    ("options.right_size_replica.recoverable.expected=0.5", "options.right_size_replicas.recoverable.expected"),
])
def test_a_bad_key_is_exit_1_naming_the_nearest_key(tmp_path, setting, nearest):
    out = tmp_path / "out"
    result = invoke("--set", setting, "--out", str(out))
    assert result.exit_code == 1
    assert f"did you mean {nearest!r}" in result.stderr
    assert setting.split("=")[0] in result.stderr
    assert not out.exists()


@pytest.mark.parametrize("setting", ['billing.path="other.csv"', 'telemetry.format="prometheus"',
                                     'window=["2026-09-01", "2026-09-10"]', 'step="5m"'])
def test_a_change_to_what_is_read_is_refused(setting):
    result = invoke("--set", setting)
    assert result.exit_code == 1
    assert "what-if changes settings, not sources" in result.stderr


@pytest.mark.parametrize(("setting", "words"), [
    ("target_utilisation=1.5", "[case].target_utilisation"),
    ("services.chat.min_replicas=-1", "[services.chat].min_replicas"),
    ("services.chat.min_replicas=two", "not a TOML value"),
    ("options.right_size_replicas.recoverable.expected=2", "from 0 to 1"),
    ('allocation.key="gpu_cots"', "did you mean 'gpu_cost'"),
    # before: a traceback (loaded_rate 1e308, run cost 1e308, a 5,000-digit integer), or the value's
    # first line applied and the rest dropped without a word
    ("loaded_rate=1e308", "[case].loaded_rate"),
    ("loaded_rate=" + "9" * 5000, "not a TOML value"),
    ("options.right_size_replicas.run_cost_per_month=1e308", "run_cost_per_month"),
    ("options.right_size_replicas.run_cost_per_month=" + "9" * 400, "run_cost_per_month"),
    ("options.right_size_replicas.effort_hours.low=1e7", "effort_hours"),
    ("options.right_size_replicas.recoverable={ low = 0.9, expected = 0.5, high = 0.7 }",
     "low ≤ expected ≤ high, got {'low': 0.9, 'expected': 0.5, 'high': 0.7}"),
    ("options.right_size_replicas.recoverable=0.5", "{ low, expected, high }"),
    ("options.right_size_replicas.title=5", "expected a string"),
    ('name="x"\n[case]\nloaded_rate=1', "not a TOML value (one value"),
    ("loaded_rate=1\nloaded_rate=2", "not a TOML value (one value"),
])
def test_a_bad_value_is_exit_1_naming_the_key(tmp_path, setting, words):
    out = tmp_path / "out"
    result = invoke("--set", setting, "--out", str(out))
    assert result.exit_code == 1
    assert words in result.stderr and setting.split("=")[0] in result.stderr
    assert not out.exists()


@pytest.mark.parametrize("others", [(), ("--set", "target_utilisation=0.7")])
def test_a_service_the_setting_makes_match_nothing_names_the_setting_not_the_file(others):
    """Before: "…/case.toml: service embed matches nothing in the data: namespace = "embedding" …", the
    case file blamed for a value it does not hold (it says "embed"); the --set is named now, and
    only the one on that service."""
    result = invoke(*others, "--set", 'services.embed.namespace="embedding"', "--quiet")
    assert result.exit_code == 1, result.output
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("costaudit: error:")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    assert errors[0].startswith(f"costaudit: error: --set services.embed.namespace on {DEMO / 'case.toml'}: "
                                'service embed matches nothing in the data: namespace = "embedding" matches no '
                                "namespace; "), errors[0]
    assert "did you mean `embed`?" in errors[0] and "target_utilisation" not in errors[0]


# -- the API on one reading of the demo's sources ----------------------------------------------------

def test_a_lower_target_keeps_more_headroom_and_right_sizes_less(demo_base):
    """METHOD §3: headroom = (B + S)/u − B − S grows as u falls, capacity above demand shrinks with it;
    §7: right-sizing replays demand at the target, so a lower target needs more replicas."""
    from audit.whatif_plan import diff

    before = demo_base[2]
    target = Decimal(str(demo_settings()["case"]["target_utilisation"]))
    after = changed_view(demo_base, f"target_utilisation={target - Decimal('0.1')}")
    assert expected_saving(after, RIGHT_SIZE) < expected_saving(before, RIGHT_SIZE)
    changed = diff(before, after)
    assert RIGHT_SIZE in {o["id"] for o in changed["options"]}
    row = next(o for o in changed["options"] if o["id"] == RIGHT_SIZE)
    delta = Decimal(row["monthly_saving"]["change"]["expected"])
    assert delta == expected_saving(after, RIGHT_SIZE) - expected_saving(before, RIGHT_SIZE)
    for bucket in ("total", "buckets.model_compute", "buckets.serving_path", "buckets.platform_overhead",
                   "buckets.unattributed"):
        assert bucket not in changed["totals"]      # headroom and capacity above demand are labels of one bucket


def test_more_min_replicas_never_right_sizes_more(demo_base):
    before = demo_base[2]
    current = demo_settings()["services"]["chat"]["min_replicas"]
    for more in (current + 1, current + 4):
        after = changed_view(demo_base, f"services.chat.min_replicas={more}")
        assert expected_saving(after, RIGHT_SIZE) <= expected_saving(before, RIGHT_SIZE)


def test_a_recoverable_share_on_the_modelled_right_size_scales_its_saving(demo_base):
    """docs/case.md's own example (recoverable 0.4 / 0.6 / 0.8 on right_size_replicas): the modelled
    saving × the share (before: "no change", the saving stayed 2474.39 / 3126.04 / 3920.42)."""
    before = next(r for r in demo_base[2]["options"] if r["id"] == RIGHT_SIZE)["monthly_saving"]
    view = changed_view(demo_base, f"options.{RIGHT_SIZE}.recoverable={{low=0.4,expected=0.6,high=0.8}}")
    after = next(r for r in view["options"] if r["id"] == RIGHT_SIZE)["monthly_saving"]
    assert before == {"low": "2474.39", "expected": "3126.04", "high": "3920.42"}
    assert after == {"low": "989.75", "expected": "1875.62", "high": "3136.34"}  # × 0.4 / 0.6 / 0.8, exact


# -- the pieces ---------------------------------------------------------------------------------------

def test_a_band_set_alone_without_a_case_table_applies_to_all_three():
    """The case gives no recoverable table for right_size_replicas: expected=0.55 alone is 0.55 in
    every band, and it was not set before (before: the catalogue's 0.5 / 0.9 were pulled in as low
    and high, scaling a modelled saving the catalogue's share never applies to, and the change said
    "before 0.7", the catalogue's, which the model never applied)."""
    from audit.case import load_case
    from audit.catalogue import catalogue
    from audit.whatif import changed_case

    changed, changes = changed_case(load_case(DEMO), [f"options.{RIGHT_SIZE}.recoverable.expected=0.55"])
    override = changed.option_overrides[RIGHT_SIZE]
    shipped = next(o for o in catalogue() if o["id"] == RIGHT_SIZE)["recoverable"]
    assert override["recoverable"] == {"low": 0.55, "expected": 0.55, "high": 0.55}
    assert (changes[0].before, changes[0].after) == (None, 0.55)
    assert shipped == {"low": 0.5, "expected": 0.7, "high": 0.9}  # none of which is the case's


@pytest.mark.parametrize("share", [0, 1])
def test_a_band_set_alone_at_either_end_is_accepted(share):
    """expected=0 or =1 alone (before: refused as "[[options]] #1.recoverable … got {'low': 0.5,
    'expected': 0, 'high': 0.9}", values from the catalogue the case never wrote)."""
    from audit.case import load_case
    from audit.whatif import changed_case

    changed, _ = changed_case(load_case(DEMO), [f"options.{RIGHT_SIZE}.recoverable.expected={share}"])
    assert changed.option_overrides[RIGHT_SIZE]["recoverable"] == dict.fromkeys(("low", "expected", "high"), share)


def test_a_band_set_alone_keeps_the_case_s_other_bands(tmp_path):
    """Where the case gives the table, a band set alone replaces that band in it, and a refusal cites
    the case's own bands."""
    from audit.case import load_case
    from audit.whatif import changed_case

    case_dir = tmp_path / "demo"
    shutil.copytree(DEMO, case_dir)
    with (case_dir / "case.toml").open("a") as toml:
        toml.write(f'\n[[options]]\nid = "{RIGHT_SIZE}"\nrecoverable = {{ low = 0.2, expected = 0.4, high = 0.6 }}\n')
    changed, changes = changed_case(load_case(case_dir), [f"options.{RIGHT_SIZE}.recoverable.high=0.8"])
    assert changed.option_overrides[RIGHT_SIZE]["recoverable"] == {"low": 0.2, "expected": 0.4, "high": 0.8}
    assert (changes[0].before, changes[0].after) == (0.6, 0.8)
    with pytest.raises(ConfigError) as refused:
        changed_case(load_case(case_dir), [f"options.{RIGHT_SIZE}.recoverable.expected=0.1"])
    assert "got {'low': 0.2, 'expected': 0.1, 'high': 0.6}" in str(refused.value)


def test_changes_are_exact_decimal_differences():
    from audit.whatif_plan import diff

    def view(saving: str, total: str) -> dict:
        return {"currency": "USD", "totals": {"total": total, "plan.total.combined_saving.expected": saving},
                "options": [{"id": "a", "title": "A", "rank": 1, "status": "priced",
                             "monthly_saving": {"low": "0.10", "expected": saving, "high": "0.30"},
                             "one_off_cost": {"low": "1.00", "expected": "2.00", "high": "3.00"},
                             "payback_months": None}]}
    assert diff(view("0.20", "1.00"), view("0.20", "1.00")) == {"options": [], "totals": {}}
    moved = diff(view("0.20", "1.00"), view("0.30", "1.00"))
    assert moved["options"][0]["monthly_saving"]["change"] == {"low": "0.00", "expected": "0.10", "high": "0.00"}
    assert moved["totals"] == {"plan.total.combined_saving.expected":
                               {"before": "0.20", "after": "0.30", "change": "0.10"}}


def test_no_setting_is_a_usage_error():
    result = CliRunner().invoke(app, ["whatif", str(DEMO)])
    assert result.exit_code != 0
