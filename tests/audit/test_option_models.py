"""The option models of audit/pricing/ on generated data with known answers, and the demo's bases (METHOD §7)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pandas as pd
import pytest

from audit.case import Service
from audit.ledger import UNALLOCATED, Group, ServiceInterval
from audit.pricing import Modelled
from audit.pricing.autoscale import autoscale
from audit.pricing.commitment import best_level, right_size_commitment
from audit.pricing.packing import consolidate
from audit.pricing.replay import smoothed
from audit.pricing.rightsize import right_size
from audit.rank import _price, catalogue
from tests.builders import make_case

T0 = datetime(2026, 9, 1, tzinfo=timezone.utc)
HOUR = 3600


def interval(i: int, held: int, demand_gpus: Decimal, target: Decimal, paid_per_gpu=Decimal(10)) -> ServiceInterval:
    """An hour of a service holding ``held`` GPUs whose served work needs ``demand_gpus`` at ``target``."""
    busy = demand_gpus * target * HOUR
    paid = paid_per_gpu * held
    kernel = paid * busy / (held * HOUR)
    return ServiceInterval("svc", T0 + timedelta(hours=i), held, paid, paid, paid, kernel, Decimal(0),
                           paid - kernel, Decimal(0), Decimal(held * HOUR), busy, Decimal(0))


def service(per_replica=2, minimum=1, reaction=0) -> dict[str, Service]:
    return {"svc": Service("svc", {"pod": "svc"}, per_replica, minimum, reaction)}


TARGET = Decimal("0.5")


def test_smoothing_takes_the_most_needed_within_reach_and_the_floor():
    assert smoothed([1, 1, 5, 1, 1], 1, 2) == [2, 5, 5, 5, 2]
    assert smoothed([1, 1, 5, 1, 1], 0, 0) == [1, 1, 5, 1, 1]


def test_right_size_frees_the_whole_replicas_above_demand():
    # 8 GPUs held, demand 4 GPUs at the target: 2 replicas of 2 needed, 2 replicas (4 GPUs) spare.
    ivs = [interval(i, 8, Decimal(4), TARGET) for i in range(3)]
    found = right_size(ivs, service(), TARGET, HOUR, (TARGET, TARGET))
    assert found is not None
    assert found.saving["expected"] == 3 * 4 * Decimal(10)
    inputs = {name: value for name, value, _ in found.inputs}
    assert inputs["svc: GPU-hours held"] == "24.00" and inputs["svc: GPU-hours needed"] == "12.00"
    assert all(source for _, _, source in found.inputs)


def test_right_size_smooths_over_the_scale_reaction_and_keeps_the_minimum():
    demand = [Decimal(2), Decimal(2), Decimal(6), Decimal(2), Decimal(2)]  # replicas needed 1, 1, 3, 1, 1
    ivs = [interval(i, 8, d, TARGET) for i, d in enumerate(demand)]
    # reaction one hour: kept 1, 3, 3, 3, 1 (minimum 1): spare 3, 1, 1, 1, 3 replicas of 2 GPUs
    slow = right_size(ivs, service(reaction=HOUR), TARGET, HOUR, (TARGET, TARGET))
    assert slow is not None and slow.saving["expected"] == (3 + 1 + 1 + 1 + 3) * 2 * Decimal(10)
    # minimum 3 replicas: kept 3 everywhere: spare 1 replica each hour
    floor = right_size(ivs, service(minimum=3), TARGET, HOUR, (TARGET, TARGET))
    assert floor is not None and floor.saving["expected"] == 5 * 2 * Decimal(10)


def test_right_size_bands_come_from_the_target_range():
    ivs = [interval(i, 8, Decimal(4), TARGET) for i in range(2)]
    found = right_size(ivs, service(per_replica=1), TARGET, HOUR)  # targets 0.4 / 0.5 / 0.6
    assert found is not None
    # demand GPU-seconds 4 × 0.5 × 3600: at 0.4 it needs 5 GPUs, at 0.6 it needs 4 (3.33 → 4)
    assert found.saving == {"low": 2 * 3 * Decimal(10), "expected": 2 * 4 * Decimal(10),
                            "high": 2 * 4 * Decimal(10)}


def test_right_size_needs_a_measured_serving_split():
    iv = interval(0, 8, Decimal(4), TARGET)
    unprofiled = ServiceInterval(iv.service, iv.ts, iv.gpus, iv.paid, iv.gross, iv.priced, iv.kernel, None,
                                 iv.overhead, None, iv.paid_seconds, iv.busy_seconds, None)
    assert right_size([unprofiled], service(), TARGET, HOUR) is None


def test_autoscale_is_the_extra_a_faster_reaction_sheds():
    demand = [Decimal(2), Decimal(2), Decimal(6), Decimal(2), Decimal(2)]
    ivs = [interval(i, 8, d, TARGET) for i, d in enumerate(demand)]
    # the case reacts in an hour (spare 3, 1, 1, 1, 3 replicas); the policy at once (3, 3, 1, 3, 3):
    # 4 replicas of 2 GPUs more, at the same target (no headroom freed: the policy target is the case's)
    found = autoscale(ivs, service(reaction=HOUR), TARGET, HOUR, TARGET, 0)
    assert found is not None and found.saving["expected"] == 4 * 2 * Decimal(10)
    assert autoscale(ivs, service(reaction=HOUR), TARGET, HOUR, None, None) is None
    assert "changes nothing" not in found.bands


def test_a_policy_target_below_the_case_is_named_with_the_target_used():
    """Rule 5: the demo with autoscaling_policy target_utilisation = 0.7 under the case's 0.8 was
    replayed at 0.8 in silence, its input "policy target utilisation = 0.8, source: options.toml /
    case [[options]]". Now the input credits the case's target and the bands say what was raised."""
    ivs = [interval(i, 8, d, TARGET) for i, d in enumerate([Decimal(2), Decimal(6), Decimal(2)])]
    found = autoscale(ivs, service(reaction=HOUR), TARGET, HOUR, Decimal("0.4"), 0)
    assert found is not None
    assert found.inputs[1] == ("policy target utilisation", "0.5", "case: target_utilisation (the option's 0.4 "
                                                                  "is below it)")
    assert ("; the option's target utilisation 0.4 is below the case's 0.5: the policy is replayed at 0.5 (a "
            "policy never holds less than the case's target)") in found.bands
    above = autoscale(ivs, service(reaction=HOUR), TARGET, HOUR, Decimal("0.6"), 0)
    assert above is not None and "is below the case's" not in above.bands
    assert above.inputs[1] == ("policy target utilisation", "0.6", "options.toml / case [[options]]: target_utilisation")


def test_a_reaction_the_step_cannot_resolve_is_said_to_change_nothing():
    """Before: 300 s, 1 h and 2 h replayed alike at a 1 h step, the inputs saying 300 s, with no word."""
    demand = [Decimal(2), Decimal(2), Decimal(6), Decimal(2), Decimal(2)]
    ivs = [interval(i, 8, d, TARGET) for i, d in enumerate(demand)]
    found = autoscale(ivs, service(reaction=HOUR), TARGET, HOUR, TARGET, 300)
    assert found is not None and found.saving["expected"] == 0
    assert found.bands.endswith("the policy's 300 s reaction changes nothing at the case's 3600 s step: replicas "
                                "are kept 1 interval(s) either side under it as under the services' own reaction, "
                                "so the saving comes from the target alone (a finer step would resolve the reaction)")


def group(holder: str, ts: datetime, types: dict[str, int], per_gpu=None) -> Group:
    """A holder's GPUs in one interval per instance type ("" unknown), each GPU-hour paid its type's
    price (``per_gpu``: type → price, default 5)."""
    price = {kind: (per_gpu or {}).get(kind, Decimal(5)) for kind in types}
    paid = {kind: price[kind] * n for kind, n in types.items()}
    seconds = {kind: Decimal(n * HOUR) for kind, n in types.items()}
    return Group(holder, ts, gpus=sum(types.values()), paid=sum(paid.values(), Decimal(0)),
                 paid_seconds=sum(seconds.values(), Decimal(0)), types=dict(types),
                 type_paid=paid if holder == UNALLOCATED else {},
                 type_seconds=seconds if holder == UNALLOCATED else {})


def test_packing_frees_the_nodes_the_held_gpus_do_not_need():
    t1, t2 = T0, T0 + timedelta(hours=1)
    groups = {
        # hour 1: 10 GPUs held, 14 free, on 3 nodes of 8: packed, 10 need 2 nodes: 1 node released
        ("svc", t1): group("svc", t1, {"p8": 10}),
        (UNALLOCATED, t1): group(UNALLOCATED, t1, {"p8": 14}),
        # hour 2: 17 held need 3 nodes: nothing released, though 7 GPUs are free
        ("svc", t2): group("svc", t2, {"p8": 17}),
        (UNALLOCATED, t2): group(UNALLOCATED, t2, {"p8": 7}),
    }
    found = consolidate(groups, {"p8": 8}, HOUR, HOUR)
    assert found is not None
    assert found.saving["expected"] == 8 * Decimal(5)            # one node of 8 GPUs, one hour
    assert found.saving["high"] == (14 + 7) * Decimal(5)         # every unallocated GPU
    assert found.saving["low"] == 0                              # no node free in both hours (reach 1)
    instant = consolidate(groups, {"p8": 8}, 0, HOUR)
    assert instant is not None and instant.saving["low"] == instant.saving["expected"]
    inputs = {name: value for name, value, _ in found.inputs}
    assert inputs["node-hours that could be released"] == "1.00"
    # before: "telemetry: GPUs no pod held (GPU split holder __unallocated__)", an internal name
    sources = {name: source for name, _, source in found.inputs}
    assert sources["unallocated GPU-hours"] == "telemetry: unallocated GPUs (held by no pod) in the GPU split"


def test_a_holder_on_several_types_is_packed_type_by_type():
    """The split counts each holder's GPUs per instance type: a service on two node types no longer
    leaves the interval as it is. a4: 2 nodes, 2 GPUs held, 6 free: 1 node of 4 released (at a4's
    price); b8: 1 node, 3 held, 5 free: none. Free GPUs on a node of unknown type stay, counted."""
    prices = {"a4": Decimal(5), "b8": Decimal(9), "": Decimal(7)}
    groups = {("svc", T0): group("svc", T0, {"a4": 2, "b8": 3}, prices),
              (UNALLOCATED, T0): group(UNALLOCATED, T0, {"a4": 6, "b8": 5, "": 4}, prices)}
    found = consolidate(groups, {"a4": 4, "b8": 8}, 0, HOUR)
    assert found is not None
    assert found.saving["expected"] == 4 * Decimal(5)
    assert found.saving["high"] == 6 * Decimal(5) + 5 * Decimal(9) + 4 * Decimal(7)
    inputs = {name: value for name, value, _ in found.inputs}
    assert inputs["unallocated GPU-hours left as they are (node of unknown instance type or size)"] == "4.00"
    assert inputs["GPUs per instance"] == "a4: 4, b8: 8"
    assert consolidate({}, {"a4": 4}, 0, HOUR) is None
    only_unknown = {(UNALLOCATED, T0): group(UNALLOCATED, T0, {"": 4}, prices)}
    assert consolidate(only_unknown, {"a4": 4}, 0, HOUR) is None


def commitment_lines(covered: list[Decimal], level: Decimal, discount: Decimal) -> list[dict]:
    out = []
    for h, used in enumerate(covered):
        start, end = pd.Timestamp(T0 + timedelta(hours=h)), pd.Timestamp(T0 + timedelta(hours=h + 1))
        common = {"commitment_discount_id": "sp-1", "resource_class": "gpu_compute", "charge_category": "Usage",
                  "start": start, "end": end}
        out.append(dict(common, commitment_discount_status="Used", net=used, effective_cost=used,
                        list_cost=used / (1 - discount)))
        out.append(dict(common, commitment_discount_status="Unused", resource_class="commitment_unused",
                        net=level - used, effective_cost=level - used, list_cost=None))
    return out


def test_commitment_level_that_minimises_cost_over_the_window():
    # 100 h at 10 / h and 100 h at 4 / h covered; 12 / h committed; 40 % discount. At 4 / h the window
    # costs 200 × 4 + 100 × 6 ÷ 0.6 = 1,800; at 10 / h 2,000; at 0, 1,400 ÷ 0.6. Paid now 200 × 12 = 2,400.
    covered = [Decimal(10)] * 100 + [Decimal(4)] * 100
    assert best_level(covered, Decimal("0.4")) == Decimal(4)
    lines = commitment_lines(covered, Decimal(12), Decimal("0.4"))
    end = datetime(2027, 3, 1, tzinfo=timezone.utc)
    found = right_size_commitment(lines, T0, T0 + timedelta(hours=200), {"sp-1": end})
    assert found is not None
    cents = {band: round(value, 2) for band, value in found.saving.items()}  # the discount is 1 − eff ÷ list
    assert cents == {"low": Decimal(400), "expected": Decimal(600), "high": Decimal(600)}  # low: 10 / h, the busiest
    assert found.commitment_end == end
    inputs = {name: value for name, value, _ in found.inputs}
    assert inputs["best level (per hour)"] == "4.0000" and inputs["commitment discount"] == "0.4000"


def test_commitments_cheaper_than_any_constant_level_save_nothing_and_say_why():
    # Committed 10 / h for 100 h, then 1 / h, all of it used (no unused), 50 % discount: paid 1,100. Every
    # constant level costs more: at 10 / h 2,000; at 1 / h 200 + 100 × 9 ÷ 0.5 = 2,000; at 0 1,100 ÷ 0.5.
    covered = [Decimal(10)] * 100 + [Decimal(1)] * 100
    lines = [ln for ln in commitment_lines(covered, Decimal(10), Decimal("0.5"))
             if ln["commitment_discount_status"] == "Used" or ln["net"] == 0]
    found = right_size_commitment(lines, T0, T0 + timedelta(hours=200), {})
    assert found is not None and round(found.saving["expected"], 2) == Decimal(-900)
    inputs = {name: value for name, value, _ in found.inputs}
    assert inputs["commitment cost over the window now"] == "1100.00"
    assert inputs["cost over the window at the best level"] == "2000.00"
    spec = next(dict(s) for s in catalogue() if s.get("model") == "commitment")
    option = _price(spec, False, spec["acts_on"], Decimal(1100), Decimal(1), make_case(), {spec["acts_on"]}, None,
                    found)
    assert option.status == "no_saving" and option.payback is None
    assert "would cost more than now" in option.reason and "-900.00" in option.reason


def test_an_option_whose_low_band_alone_saves_nothing_says_so():
    spec = dict(catalogue()[0])
    model = Modelled({"low": Decimal(-50), "expected": Decimal(200), "high": Decimal(300)},
                     (("x", "1", "case: x"),), "low / high: test")
    option = _price(spec, False, spec["acts_on"], Decimal(10_000), Decimal(1), make_case(), {spec["acts_on"]},
                    None, model)
    assert option.status == "no_saving" and "low band's saving is -50.00" in option.reason


def test_commitment_needs_covered_usage_with_a_list_cost():
    lines = commitment_lines([Decimal(1)], Decimal(2), Decimal("0.3"))
    for ln in lines:
        ln["list_cost"] = None
    assert right_size_commitment(lines, T0, T0 + timedelta(hours=1), {}) is None


def test_a_modelled_option_is_priced_on_its_model_not_the_fraction():
    spec = dict(catalogue()[0])
    model = Modelled({"low": Decimal(100), "expected": Decimal(200), "high": Decimal(300)},
                     (("x", "1", "case: x"),), "low / high: test")
    case = make_case()
    option = _price(spec, False, spec["acts_on"], Decimal(10_000), Decimal(1), case, {spec["acts_on"]}, None, model)
    assert option.basis == "modelled" and option.saving["expected"] == Decimal(200)
    assert option.inputs == (("x", "1", "case: x"),) and option.basis_note == "low / high: test"
    assumed = _price(spec, False, spec["acts_on"], Decimal(1000), Decimal(1), case, {spec["acts_on"]}, None,
                     None, "needs the GPU idle by host call path")
    assert assumed.basis == "assumed" and assumed.basis_note == "needs the GPU idle by host call path"
    assert assumed.saving["expected"] == Decimal(1000) * Decimal(str(spec["recoverable"]["expected"]))
    assert {source for _, _, source in assumed.inputs} >= {"catalogue: audit/data/options.toml"}


@pytest.fixture(scope="module")
def demo_options(demo_run) -> list[dict]:
    import json
    result, out = demo_run
    assert result.returncode in (0, 2), result.stderr
    return json.loads((out / "audit.json").read_text())["options"]


def test_every_demo_option_says_its_basis_and_inputs(demo_options):
    assert demo_options
    for o in demo_options:
        assert o["basis"] in ("modelled", "assumed"), o["id"]
        assert o["basis_note"], o["id"]
        if o["status"] != "not_measured":
            assert o["inputs"], o["id"]
        for figure in o["inputs"]:
            assert set(figure) == {"name", "value", "source"} and all(figure.values()), (o["id"], figure)


def test_demo_models_run_where_their_evidence_exists(demo_options):
    by_id = {o["id"]: o for o in demo_options}
    assert by_id["right_size_replicas"]["basis"] == "modelled"
    sync = by_id["remove_sync_points"]                   # from the profile's idle by host call path (issue 16)
    assert sync["basis"] == "modelled" and "sync-drain" in sync["basis_note"]
    assert {"sync-drain idle share of the profile's GPU time (chat)",
            "serving_path.in_flight_idle over the window (chat)"} <= {i["name"] for i in sync["inputs"]}
    for o in demo_options:
        if o["basis"] == "modelled" and o["monthly_saving"]:
            saving = o["monthly_saving"]
            assert Decimal(saving["low"]) <= Decimal(saving["expected"]) <= Decimal(saving["high"]), o["id"]


def test_a_case_sets_the_models_own_inputs_and_bad_ones_are_named(tmp_path):
    """[[options]] may set the autoscaling policy and the batching bound (checked, durations in seconds)."""
    import shutil

    from audit.case import load_case
    from audit.errors import ConfigError
    from tests.paths import FIXTURES

    case = tmp_path / "case"
    shutil.copytree(FIXTURES / "wa_labs_efficiency", case)
    base = (case / "case.toml").read_text()
    (case / "case.toml").write_text(base + '\n[[options]]\nid = "autoscaling_policy"\nscale_reaction = "15m"\n'
                                    'target_utilisation = 0.85\nlatency_bound_ms = 250\nlatency_percentile = "p99"\n')
    override = load_case(case).option_overrides["autoscaling_policy"]
    assert override["scale_reaction"] == 900 and override["target_utilisation"] == Decimal("0.85")
    assert override["latency_bound_ms"] == Decimal(250) and override["latency_percentile"] == "p99"
    (case / "case.toml").write_text(base + '\n[[options]]\nid = "batching_limits"\ntarget_utilisation = 1.5\n'
                                    'latency_percentile = "p90"\n')
    with pytest.raises(ConfigError) as caught:
        load_case(case)
    text = str(caught.value)
    assert "target_utilisation: expected a number from 0.01 to 1" in text and "one of p50, p95, p99" in text


def test_autoscaling_and_right_sizing_bands_add_up_to_what_the_policy_alone_sheds():
    """METHOD §7, no replica counted twice: autoscaling's expected and high are what the policy sheds
    at their targets less what right-sizing sheds in the same band (before, the high less
    right-sizing's expected: right-sizing's high (target + 0.1) plus autoscaling's high counted the
    replicas between the case's target and target + 0.1 twice); its low stays less right-sizing's
    expected (0 in the demo: at its 3600 s step the policy's reaction changes nothing)."""
    from audit.case import load_case
    from audit.pipeline import run_audit
    from audit.pricing.autoscale import policy_of, shed_under
    from audit.pricing.replay import replay, replayable
    from audit.rank import MONTH_DAYS
    from tests.paths import DEMO

    result = run_audit(load_case(DEMO))
    case, options = result.case, {o.id: o for o in result.options}
    right, auto = options["right_size_replicas"], options["autoscaling_policy"]
    by_service = replayable(result.intervals)
    per_month = MONTH_DAYS / case.days
    for band, target in (("expected", Decimal("0.9")), ("high", Decimal("1.0"))):
        shed = sum((replay(ivs, policy_of(case.services[n], target, 300), result.telemetry.step,
                           shed_under(target)).saving for n, ivs in by_service.items()), Decimal(0))
        assert gross(right, band) + gross(auto, band) == pytest.approx(shed * per_month, abs=Decimal("0.000001"))
    assert auto.saving["low"] == 0


def gross(option, band: str) -> Decimal:
    """An option's saving before its committed share is set aside: the demo's commitment has no known
    end, so its saving is s₀ alone (METHOD §7), s₀ = gross × (1 − committed share)."""
    share = option.committed_share if option.deferred_months is None else None
    return option.saving[band] / (1 - share) if share else option.saving[band]


def test_a_replay_names_the_services_it_leaves_out():
    """The demo's embed holds GPUs but has no kernel profile: its idle is idle_not_separated, so
    right-sizing and autoscaling replay chat alone and say so (before: nothing said embed was out)."""
    from audit.case import load_case
    from audit.pipeline import run_audit
    from tests.paths import DEMO

    options = {o.id: o for o in run_audit(load_case(DEMO)).options}
    for option in ("right_size_replicas", "autoscaling_policy"):
        assert options[option].basis_note.endswith(
            "; not replayed (no serving split: their idle is idle_not_separated): embed"), options[option].basis_note
