"""Unit costs for every service (METHOD §4): owned lines, the allocation key, request-log
denominators, and the AWS Well-Architected workload-efficiency lab as an external check."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from decimal import Decimal

import pytest

from audit.audit_json import to_dict
from audit.case import Allocation, Service, load_case
from audit.ledger import Ledger, ServiceInterval
from audit.pipeline import run_audit
from audit.unit_costs import shared_split, unit_costs
from tests.paths import FIXTURES, SHARED

LAB = FIXTURES / "wa_labs_efficiency"
CHECKER = SHARED / "tools" / "check_audit_json.py"
SCIENTIFIC = re.compile(r"^-?\d+(\.\d+)?[eE][+-]?\d+$")


@pytest.fixture(scope="module")
def lab() -> dict:
    return to_dict(run_audit(load_case(LAB)))


def test_the_lab_s_published_efficiency_figures_come_out(lab):
    """Step 2 of the lab publishes 6,491.809 total requests per dollar and 2,789.539 successful
    customer requests per dollar (the step-5 CUR and access log): requests ÷ the unblended cost of
    the lines tagged application = ordering."""
    ordering = lab["services"]["ordering"]
    assert ordering["requests_per_currency_unit"] == {"all": "6491.809", "successful": "2789.539"}
    assert lab["cost_basis"] == "contracted" and lab["total"] == ordering["total_cost"] == "43.28"


def test_a_cpu_only_service_has_a_unit_cost(lab):
    ordering = lab["services"]["ordering"]
    assert Decimal(ordering["cost_per_1k_requests"]) > 0 and ordering["gpu_hours"] == "0.00"
    assert ordering["cost_per_1k_requests"] == "0.358482"  # 43.2788426082 × 1000 ÷ 120,728, half-even
    assert ordering["unattributed"] == "0.00"
    # the one null figure says why (METHOD §9): a log counts no tokens
    assert ordering["cost_per_1m_tokens"] is None and ordering["reason"] == (
        "cost per 1 M tokens not measured: a request log (web-access-log (access_log)) counts no tokens")


def test_every_request_log_class_reaches_audit_json(lab):
    counts = lab["services"]["ordering"]["request_counts"]
    assert counts == {"source": "web-access-log (access_log)", "lines": 280958, "successful": 120728,
                      "failed": 6253, "health_checks": 153264, "unparseable": 93, "other_paths": 620,
                      "denominator": True}
    assert sum(v for k, v in counts.items() if k not in ("source", "lines", "denominator")) == counts["lines"]
    assert lab["services"]["ordering"]["requests"] == counts["successful"]


def test_the_claimed_lines_are_the_service_s_and_conserve(lab):
    parts = [p for b in lab["buckets"].values() for p in b["parts"]]
    assert parts and all(p["service"] == "ordering" for p in parts)
    total = sum(Decimal(b["amount"]) for b in lab["buckets"].values())
    assert total == Decimal(lab["total"])


def _strings(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


def test_no_figure_is_written_in_scientific_notation(lab):
    assert not [s for s in _strings(lab) if SCIENTIFIC.match(s)]


def test_the_lab_case_passes_the_contract_checker(lab, tmp_path):
    path = tmp_path / "audit.json"
    path.write_text(json.dumps(lab))
    run = subprocess.run([sys.executable, str(CHECKER), str(path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout


def test_a_claim_that_matches_nothing_is_named_with_the_nearest_values(tmp_path):
    case = tmp_path / "lab"
    shutil.copytree(LAB, case)
    toml = (case / "case.toml").read_text().replace('[services.ordering]\ntags = { application = "ordering" }',
                                                     '[services.ordering]\ntags = { application = "orderin" }')
    (case / "case.toml").write_text(toml)
    run = subprocess.run([sys.executable, "-m", "audit", "validate", str(case)], capture_output=True, text=True)
    assert "tags claim application = \"orderin\" matches no billing line" in run.stdout + run.stderr
    assert "ordering" in (run.stdout + run.stderr).split("orderin\" matches no billing line", 1)[1]


# ---- the allocation key -------------------------------------------------------------------------

SERVICES = {name: Service(name, {"namespace": name}) for name in ("chat", "embed", "web")}


def _ledger() -> Ledger:
    ledger = Ledger()
    ledger.add("model_compute", "kernel_active", "chat", Decimal("60"), "s", "r")
    ledger.add("model_compute", "kernel_active", "embed", Decimal("20"), "s", "r")
    ledger.add("serving_path", "serving_compute", "web", Decimal("10"), "s", "r")   # owned line
    ledger.add("serving_path", "serving_network", None, Decimal("33"), "s", "r")    # shared
    ledger.add("unattributed", "unmatched_line", "web", Decimal("4"), "s", "r")     # left out
    ledger.add("unattributed", "unmatched_line", None, Decimal("7"), "s", "r")
    return ledger


def _interval(service: str, paid: str) -> ServiceInterval:
    from datetime import datetime, timezone
    p = Decimal(paid)
    return ServiceInterval(service, datetime(2026, 9, 1, tzinfo=timezone.utc), 1, p, p, p, p, None, Decimal(0),
                           None, Decimal(3600), Decimal(3600), None)


def _costs(allocation: Allocation, traffic=None):
    intervals = [_interval("chat", "60"), _interval("embed", "20")]
    return unit_costs(_ledger(), intervals, SERVICES, traffic or {}, allocation)


@pytest.mark.parametrize("allocation, shares", [
    (Allocation("gpu_cost"), {"chat": Decimal("24.75"), "embed": Decimal("8.25"), "web": Decimal(0)}),
    (Allocation("owned_cost"), {"chat": Decimal("22"), "embed": Decimal("22") / 3, "web": Decimal("11") / 3}),
    (Allocation("weights", {"web": Decimal(1), "chat": Decimal(2)}), {"chat": Decimal(22), "embed": Decimal(0),
                                                                      "web": Decimal(11)}),
])
def test_each_key_splits_the_shared_pool(allocation, shares):
    costs, split = _costs(allocation)
    assert split.used == allocation.key and split.note is None
    for name, share in shares.items():
        assert abs(costs[name].shared - share) < Decimal("1e-20"), name
    assert sum(c.shared for c in costs.values()) == Decimal(33)


def test_services_plus_unattributed_plus_unallocated_is_the_total():
    ledger = _ledger()
    costs, split = _costs(Allocation("owned_cost"))
    unattributed = sum(p.amount for p in ledger.parts.values() if p.bucket == "unattributed")
    assert sum(c.own + c.shared for c in costs.values()) + unattributed + split.unallocated == ledger.total()
    assert costs["web"].unattributed == Decimal(4) and costs["web"].own == Decimal(10)


def test_a_key_that_sums_to_zero_falls_back_to_requests_then_equal_shares():
    split = shared_split(Allocation("gpu_cost"), ["a", "b"], Decimal(10),
                         {"gpu_cost": {}, "requests": {"a": Decimal(3), "b": Decimal(1)}})
    assert split.used == "requests" and "sums to zero: split by requests" in split.note
    equal = shared_split(Allocation("gpu_cost"), ["a", "b"], Decimal(10), {"gpu_cost": {}, "requests": {}})
    assert equal.used == "equal" and equal.weights == {"a": 1, "b": 1} and "equal shares" in equal.note
    nobody = shared_split(Allocation("requests"), [], Decimal(10), {"requests": {}})
    assert nobody.unallocated == Decimal(10) and "no service" in nobody.note


def test_requests_a_service_has_unmeasured_do_not_split_the_pool_and_the_note_says_why():
    """METHOD §4: a key that cannot weigh every service falls back. Before (cloudgen eks 8201 with embed's
    vllm:request_success_total series deleted, key "requests"): embed's requests null, yet the weights were
    chat 0.999964, gateway 0.000036 and the note null: embed took 0.00 of the 393.98 shared pool. Now equal
    shares, the note naming embed and why (and a service no traffic source matched)."""
    requests = {"chat": Decimal(187538548), "embed": None, "gateway": Decimal(6670)}
    split = shared_split(Allocation("requests"), ["chat", "embed", "gateway"], Decimal("393.98"),
                         {"requests": requests})
    assert (split.used, split.weights, split.unallocated) == ("equal", {"chat": 1, "embed": 1, "gateway": 1}, 0)
    assert split.note == ("requests not measured for embed (its traffic source has token series only, no request "
                          "series): split in equal shares")
    fallback = shared_split(Allocation("gpu_cost"), ["chat", "embed", "web"], Decimal(10),
                            {"gpu_cost": {}, "requests": requests})
    assert (fallback.used, fallback.weights) == ("equal", {"chat": 1, "embed": 1, "web": 1})
    assert fallback.note == ("GPU cost (no service holds paid GPU time) sums to zero; requests not measured for embed "
                             "(its traffic source has token series only, no request series), web (no request counter "
                             "or request log matched it): split in equal shares")


def test_allocation_keys_are_checked_with_the_nearest_name(tmp_path):
    case = tmp_path / "lab"
    shutil.copytree(LAB, case)
    with (case / "case.toml").open("a") as handle:
        handle.write('\n[allocation]\nkey = "request"\n')
    run = subprocess.run([sys.executable, "-m", "audit", "validate", str(case)], capture_output=True, text=True)
    assert run.returncode == 1 and "did you mean 'requests'?" in run.stdout + run.stderr


def test_a_rule_naming_an_undeclared_service_is_a_case_error(tmp_path):
    case = tmp_path / "lab"
    shutil.copytree(LAB, case)
    toml = (case / "case.toml").read_text().replace('service = "ordering"\nreason', 'service = "orderng"\nreason')
    (case / "case.toml").write_text(toml)
    run = subprocess.run([sys.executable, "-m", "audit", "validate", str(case)], capture_output=True, text=True)
    assert run.returncode == 1 and "did you mean 'ordering'?" in run.stdout + run.stderr


def test_a_service_that_owns_nothing_has_no_unit_cost_not_a_cost_of_zero(tmp_path):
    """A CPU tier counted by its access log but claiming no line (its nodes' cost went to the shared
    pool, which the GPU services take by GPU cost) owns nothing: its unit costs are unmeasured, said
    so with what to do, never 0.000000 per 1,000 requests."""
    from benchmarks.cloudgen.generate import generate

    generate("eks", 1, tmp_path / "case")
    toml = (tmp_path / "case" / "case.toml").read_text()
    claim = 'tags = { "eks:nodegroup-name" = "cpu-gateway" }'
    assert claim in toml
    (tmp_path / "case" / "case.toml").write_text(toml.replace(claim, 'pod = "gateway"'))
    gateway = to_dict(run_audit(load_case(tmp_path / "case")))["services"]["gateway"]
    assert gateway["requests"] > 1000 and gateway["total_cost"] == "0.00"
    assert gateway["cost_per_request"] is gateway["cost_per_1k_requests"] is gateway["cost_per_1k_all_requests"] is None
    assert "owns no billing line and no GPU time" in gateway["reason"] and "claim its lines" in gateway["reason"]


def test_a_resource_ids_claim_written_as_a_resource_name_names_the_id_to_claim():
    """GCP lines carry the instance's name in ResourceName and //compute…/instances/<number> in
    ResourceId; a claim of the name matched nothing, and the warning listed the first ResourceIds by
    likeness, not the one to claim (a verifier's gke case). Now it names that id, whole."""
    import pandas as pd

    from audit.fit_claims import claims_fit
    node = "//compute.googleapis.com/projects/acme-inference-prod/zones/us-central1-b/instances/4313314077904292793"
    lines = pd.DataFrame({"resource_id": [node, "//compute.googleapis.com/projects/p/zones/z/instances/1"],
                          "resource_name": ["gke-pool-f17310e1-mcmn", "gke-pool-f17310e1-abcd"],
                          "tags": ["{}", "{}"], "allocated_tags": ["{}", "{}"]})
    case = type("Case", (), {"services": {"gateway": Service("gateway", {}, resource_ids=("gke-pool-f17310e1-mcmn",))}})
    [misfit] = claims_fit(case, lines, {"gateway": ["access-log"]})
    assert misfit.message == ('service gateway: resource_ids claim "gke-pool-f17310e1-mcmn" matches no billing line; '
                              f"it is the ResourceName of lines whose ResourceId is {node}: claim that")
    assert misfit.nearest == (node,)
