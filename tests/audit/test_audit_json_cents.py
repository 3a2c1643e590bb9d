"""Every cent figure of audit.json from one rounding (audit/audit_json_cents.py, METHOD §4, §5): each
sum docs/audit-json.md and docs/telemetry.md document holds to the cent, on the demo, on the demo
with vLLM phase timers beside it, and on a case where rounding each figure on its own misses a cent
(the GKE figures: ocr's 40.514869 rounds to 40.51 alone but takes the leftover cent in the
composition, and 40.51 + 4.33 + 12.54 = 57.38 against a total of 57.39)."""
from __future__ import annotations

import os
import shutil
from decimal import Decimal
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit import audit_json_units
from audit.audit_json import _buckets
from audit.audit_json_cents import rounded
from audit.audit_json_review import composition
from audit.case import Allocation, Service, load_case
from audit.ledger import Ledger
from audit.money import cents
from audit.pipeline import run_audit
from audit.unit_costs import SHARED_PARTS, unit_costs
from tests.paths import DEMO

D = Decimal


def broken_sums(doc: dict) -> list[str]:
    """The documented sums of an audit.json that do not hold to the cent (none: every one holds)."""
    out = []

    def same(what, left, right):
        if D(left) != D(right):
            out.append(f"{what}: {left} != {right}")

    buckets, services = doc["buckets"], doc["services"]
    parts = [p for b in buckets.values() for p in b["parts"]]
    same("Σ buckets = total", sum(D(b["amount"]) for b in buckets.values()), doc["total"])
    for name, bucket in buckets.items():
        same(f"Σ {name} parts = its amount", sum(D(p["amount"]) for p in bucket["parts"]), bucket["amount"])
    if "classes" in doc:  # a document built from a ledger alone has none
        same("Σ classes net = total", sum(D(c["net"]) for c in doc["classes"]), doc["total"])
        unapplied = sum((D(p["amount"]) for p in parts if p["name"] == "unapplied_adjustment"), D(0))
        same("classes' unapplied_adjustment = the unattributed part", sum(
            (D(c["net"]) for c in doc["classes"] if c["class"] == "unapplied_adjustment"), D(0)), unapplied)
    composed = doc["composition"]
    members = [*composed["services"].values(), composed["unattributed"], composed["unallocated"]]
    same("Σ composition = total", sum(D(v) for v in members), doc["total"])
    same("composition.unattributed = the bucket", composed["unattributed"], buckets["unattributed"]["amount"])
    shared = [p for p in parts if p["service"] is None and (p["id"].split(".")[0], p["name"]) in SHARED_PARTS]
    same("allocation.shared_cost = Σ shared parts", doc["allocation"]["shared_cost"],
         sum(D(p["amount"]) for p in shared))
    same("Σ shared_cost + unallocated = allocation.shared_cost",
         sum(D(s["shared_cost"]) for s in services.values()) + D(doc["allocation"]["unallocated"]),
         doc["allocation"]["shared_cost"])
    for name, s in services.items():
        mine = [p for p in parts if p["service"] == name]
        same(f"{name}: composition = total_cost", composed["services"][name], s["total_cost"])
        same(f"{name}: total_cost = cost + shared_cost", s["total_cost"], D(s["cost"]) + D(s["shared_cost"]))
        same(f"{name}: cost = Σ by_bucket", s["cost"], sum(D(v) for v in s["by_bucket"].values()))
        for bucket, amount in s["by_bucket"].items():
            same(f"{name}: by_bucket.{bucket} = Σ its parts", amount,
                 sum(D(p["amount"]) for p in mine if p["id"].startswith(bucket + ".")))
        same(f"{name}: unattributed = Σ its parts", s["unattributed"],
             sum(D(p["amount"]) for p in mine if p["id"].startswith("unattributed.")))
        prefill, decode = s["phases"]["prefill"], s["phases"]["decode"]
        if prefill["cost"] is not None:
            [kernel] = [p["amount"] for p in mine if p["name"] == "kernel_active"]
            same(f"{name}: prefill + decode = the part", D(prefill["cost"]) + D(decode["cost"]), kernel)
            same(f"{name}: prefill + decode = by_bucket.model_compute", D(prefill["cost"]) + D(decode["cost"]),
                 s["by_bucket"]["model_compute"])
            same(f"{name}: prefill + decode service_cost = total_cost",
                 D(prefill["service_cost"]) + D(decode["service_cost"]), s["total_cost"])
    return out


def test_every_documented_sum_holds_on_the_demo(demo_audit):
    """Before: chat's by_bucket.model_compute 30864.70 and cost 52588.60 (each rounded on its own)
    beside a kernel-active part of 30864.69, and allocation.shared_cost 18734.76 beside shared parts
    of 18734.77; now by_bucket and cost are sums of the rounded parts and shared_cost the rest of
    total_cost, which stays the exact cost to the cent (67086.180575)."""
    assert broken_sums(demo_audit) == []
    chat = demo_audit["services"]["chat"]
    assert chat["by_bucket"]["model_compute"] == "30864.69"
    assert (chat["cost"], chat["shared_cost"], chat["total_cost"]) == ("52588.59", "14497.59", "67086.18")
    assert demo_audit["composition"]["services"] == {"chat": "67086.18", "embed": "12950.51"}
    assert demo_audit["allocation"]["shared_cost"] == "18734.77"


PHASES = "\n".join(
    [f"# TYPE vllm:request_{phase}_time_seconds histogram\n" + "\n".join(
        f'vllm:request_{phase}_time_seconds_{kind}{{model_name="Qwen/Qwen1.5-0.5B-Chat",namespace="llm",'
        f'pod="chat-7c9d5f8b6d-2v98q"}} {value} {moment}'
        for moment, count, total in ((1788220800, 0, 0), (1788224400, 50, seconds))
        for kind, value in (("count", count), ("sum", total)))
     for phase, seconds in (("prefill", 100), ("decode", 300))] + ["# EOF\n"])


@pytest.fixture(scope="module")
def demo_with_timers(tmp_path_factory) -> dict:
    """The demo with a second telemetry source holding only one chat pod's vLLM phase timers."""
    from audit.audit_json import to_dict

    case = tmp_path_factory.mktemp("demo-timers") / "demo"
    shutil.copytree(DEMO, case, copy_function=os.symlink)
    (case / "case.toml").unlink()
    (case / "case.toml").write_text((DEMO / "case.toml").read_text() + (
        '\n[[telemetry]]\nname = "phase-timers"\nformat = "openmetrics"\npath = "telemetry/phases.om"\n'))
    (case / "telemetry" / "phases.om").write_text(PHASES)
    return to_dict(run_audit(load_case(case)))


def test_the_phase_costs_add_up_to_the_part_the_demo_shows(demo_with_timers):
    """Before: prefill 7716.18 + decode 23148.52 = 30864.70 (the part rounded on its own) against the
    part's 30864.69; now the part's cents split by largest remainder: 7716.17 + 23148.52; the service
    costs likewise to total_cost (67086.18)."""
    assert broken_sums(demo_with_timers) == []
    phases = demo_with_timers["services"]["chat"]["phases"]
    assert (phases["prefill"]["cost"], phases["decode"]["cost"]) == ("7716.17", "23148.52")
    assert (phases["prefill"]["service_cost"], phases["decode"]["service_cost"]) == ("16771.54", "50314.64")
    assert phases["prefill"]["source"] == ("vllm:request_prefill_time_seconds_sum and "
                                           "vllm:request_decode_time_seconds_sum over the window "
                                           "(phase-timers (openmetrics)); on 1 of the service's 13 pods, "
                                           "applied to all")
    # one chat pod of 13 carries the timers: the split stands for the other 12, and says so
    assert phases["reason"].startswith("12 of the service's 13 pods carry no phase timer")
    assert [m["kind"] for m in demo_with_timers["fit"] if m["kind"].startswith("phase_")] == ["phase_timers_some_pods"]
    [part] = demo_with_timers["buckets"]["model_compute"]["parts"]
    assert part["source"].startswith("DCGM_FI_PROF_GR_ENGINE_ACTIVE (prometheus-export) × ")


def _gke():
    """The GKE case's ledger (its exact parts), unit costs and shared split."""
    ledger = Ledger()
    for bucket, name, service, amount in (
            ("platform_overhead", "egress", None, "3.5386508085823428847207793801277699159925072187549"),
            ("platform_overhead", "orchestration", None, "1.3591005390548952564805195867518466106616714791699"),
            ("serving_path", "serving_compute", "web", "4.3292441179580748295713134704326934626239391652149"),
            ("platform_overhead", "unallocated", None, "23.075879172735579201504789873787851463470901857251"),
            ("unattributed", "no_kernel_profile", "ocr", "11.537939586367789600752394936893925731735450928622"),
            ("platform_overhead", "idle_not_separated", "ocr", "12.541238680834553913861298844449919273625490139806"),
            ("unattributed", "no_activity_sample", None, "1.0032990944667643131089039075559935418900392111846")):
        ledger.add(bucket, name, service, D(amount), "s", "r")
    services = {name: Service(name, {"namespace": name}) for name in ("ocr", "web")}
    costs, split = unit_costs(ledger, [], services, {}, Allocation("weights", {"ocr": D(1)}))
    return SimpleNamespace(ledger=ledger, unit_costs=costs, shared=split, intervals=(),
                           telemetry=SimpleNamespace(label_mismatches=()), evidence=SimpleNamespace(serving={}))


def test_a_service_s_total_is_its_composition_cent_where_rounding_it_alone_misses(monkeypatch):
    result = _gke()
    total = cents(result.ledger.total())
    assert total == D("57.39") and cents(result.unit_costs["ocr"].own + result.unit_costs["ocr"].shared) == D("40.51")
    figures = rounded(result, total)
    monkeypatch.setattr(audit_json_units, "phases_entry", lambda result, uc, held: {
        "prefill": {"cost": None}, "decode": {"cost": None}})
    doc = {"total": str(total), "buckets": _buckets(result, figures, total),
           "composition": composition(figures, total),
           "services": {name: audit_json_units.service_entry(result, uc, "weights", figures.services[name])
                        for name, uc in result.unit_costs.items()},
           "allocation": audit_json_units.allocation(result, figures)}
    assert broken_sums(doc) == []
    assert doc["composition"] == {"services": {"ocr": "40.52", "web": "4.33"}, "unattributed": "12.54",
                                  "unallocated": "0.00", "total": "57.39"}
    ocr = doc["services"]["ocr"]
    assert (ocr["cost"], ocr["shared_cost"], ocr["total_cost"]) == ("12.54", "27.98", "40.52")


def test_the_class_nets_add_up_to_the_total_where_rounding_each_alone_misses():
    """A credit spread over three classes (a verifier's CPU case): exact nets 2.84845, 0.51268 and
    16.2348 make 19.59593, 19.60 in scope. Each rounded alone gave 2.85 + 0.51 + 16.23 = 19.59
    (before); rounded together by largest remainder they are 2.85 + 0.51 + 16.24 = 19.60."""
    import pandas as pd

    from audit.audit_json_classes import class_rows

    nets = {"observability": D("2.84845"), "serving_network": D("0.51268"), "unmatched": D("16.2348")}
    charges = pd.DataFrame([{"resource_class": k, "line_count": 1, "gross": v, "commitment": D(0), "credits": D(0),
                             "tax": D(0), "net": v} for k, v in nets.items()])
    rows = {c["class"]: c["net"] for c in class_rows(charges, sum(nets.values()), D(0), D("19.60"))}
    assert rows == {"observability": "2.85", "serving_network": "0.51", "unmatched": "16.24"}


cell = st.decimals(min_value=D("-500"), max_value=D("500"), places=4, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(cell, cell, cell), min_size=1, max_size=8))
def test_a_table_rounds_to_its_row_totals_each_cell_within_a_cent(rows):
    """Rows always add up; columns too where no exact cell must stay as it is."""
    from audit.money import CENT, cents, largest_remainder, table_cents
    cells = {f"r{i}": {"gross": g, "credits": c, "tax": t} for i, (g, c, t) in enumerate(rows)}
    targets = largest_remainder({r: sum(row.values()) for r, row in cells.items()})
    columns = largest_remainder({c: sum(row[c] for row in cells.values()) for c in ("gross", "credits", "tax")},
                                sum(targets.values()))
    out = table_cents(cells, targets, columns)
    assert all(sum(out[r].values()) == targets[r] for r in cells)
    for r, row in cells.items():
        for c, v in row.items():
            assert out[r][c] == v if v == cents(v) else out[r][c] - CENT < v < out[r][c] + CENT
    if not any(v == cents(v) for row in cells.values() for v in row.values()):  # every cell may take a cent
        assert {c: sum(out[r][c] for r in cells) for c in columns} == columns


def test_the_classes_add_up_by_row_and_by_column():
    """The demo's classes (before: each figure rounded alone, gpu_compute 82,476.00 − 1,880.37 +
    3,323.92 = 83,919.55 against a net of 83,919.54, and the tax column 3,535.39 against 3,535.38 billed)."""
    import pandas as pd

    from audit.audit_json_classes import class_rows
    exact = {"gpu_compute": (D("82476.00"), D("-1880.374"), D("3323.916")),
             "serving_network": (D("1145.07"), D("-26.106"), D("46.154")),
             "commitment_unused": (D("1058.40"), D("-24.130"), D("42.660"))}
    charges = pd.DataFrame([{"resource_class": k, "line_count": 1, "gross": g, "commitment": D(0), "credits": c,
                             "tax": t, "net": g + c + t} for k, (g, c, t) in exact.items()])
    rows = {r["class"]: r for r in class_rows(charges, sum(charges["net"]), sum(charges["tax"]),
                                                       D("86161.59"))}
    for r in rows.values():
        assert D(r["gross"]) + D(r["credits"]) + D(r["tax"]) == D(r["net"])
    assert [rows[k]["gross"] for k in exact] == ["82476.00", "1145.07", "1058.40"]
    assert sum(D(r["tax"]) for r in rows.values()) == D("3412.73")       # as billed
    assert sum(D(r["credits"]) for r in rows.values()) == D("-1930.61")  # as billed


def test_in_scope_and_outside_add_up_to_the_invoice_where_rounding_each_alone_misses(tmp_path):
    """cloudgen's EKS case of seed 7606: 2945.835743284 in scope, 4.8384 outside (account
    222222222222), 2950.674143284 invoiced, on a basis where effective = billed. Each rounded alone
    (before) gave 2945.84 + 4.84 against an invoice of 2950.67; rounded once by largest remainder
    the outside's larger remainder takes the cent: 2945.83 + 4.84 = 2950.67 (cloudgen's truth says
    2945.83), and the bridge's totals of the same exact amount, the buckets and the accounts follow."""
    from audit.audit_json import to_dict
    from benchmarks.cloudgen.generate import generate

    truth = generate("eks", 7606, tmp_path / "eks")
    doc = to_dict(run_audit(load_case(tmp_path / "eks")))
    outside = doc["outside_scope"]
    assert (doc["total"], outside["amount"], doc["invoice_total"]) == ("2945.83", "4.84", "2950.67") \
        == (truth["total"], truth["outside_scope"]["amount"], truth["invoice_total"])
    assert outside["by_account"] == [{"account": "222222222222", "amount": "4.84"}]
    assert [doc["bridge"][k] for k in ("list", "contracted", "billed", "effective")] == ["2945.83"] * 4
    assert broken_sums(doc) == []
