"""A tags claim that matches only part of a resource's lines (audit/fit_claims.py ``claims_partial_fit``).

A verifier's gke case (cloudgen seed 7201, native export) with the labels taken off 24 of the
default-pool nodes' 96 N2 Core / Ram lines: the gateway's claim by ``goog-k8s-node-pool-name``
silently left them to the shared pool (its owned cost 12.99 instead of 17.95) and ``fit`` was empty.
Now each such resource is named with the lines and cost left and the tag values they carry; which
lines a claim takes is unchanged.
"""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from decimal import Decimal

import pandas as pd

from audit.case import Rule, Service
from audit.classify import classify
from audit.fit_claims import claims_fit, claims_partial_fit
from tests.audit.test_fit import costaudit, edited, validated
from tests.builders import line, lines_frame, make_case
from tests.paths import ROOT

#: instance hours are serving_compute, data transfer egress (each claimed class by class)
RULES = (Rule({"ChargeDescription": "instance hour"}, "serving_compute", "instance hours"),
         Rule({"ChargeDescription": "data transfer"}, "egress", "data transfer out"))


def _claimed_lines():
    """Lines of four instances: i-web1 and web-2 tagged team=web on some hours only, i-web1's data
    transfer untagged, i-web3 whose untagged hour another service claims by id, i-other untagged
    throughout; a tax line of i-web1."""
    rows = [("i-web1", "", {"team": "web"}, "1.00", 1), ("i-web1", "", {"team": "web"}, "1.00", 1),
            ("i-web1", "", {}, "0.50", 3), ("i-web2", "web-2", {"team": "web"}, "2.00", 1),
            ("i-web2", "web-2", {"team": "webb"}, "0.25", 1), ("i-web3", "", {"team": "web"}, "1.00", 1),
            ("i-web3", "", {}, "4.00", 1), ("i-other", "", {}, "9.00", 1)]
    built = [line(n, resource_id=rid, resource_name=name, tags=json.dumps(tags), effective_cost=Decimal(cost),
                  billed_cost=Decimal(cost), line_count=count, charge_description="instance hour")
             for n, (rid, name, tags, cost, count) in enumerate(rows, 1)]
    built.append(line(9, resource_id="i-web1", charge_description="data transfer", effective_cost=Decimal("3.00"),
                      line_count=1))
    built.append(line(10, resource_id="i-web1", charge_category="Tax", effective_cost=Decimal("7.00"), line_count=1))
    return lines_frame(built)


def test_a_tags_claim_matching_part_of_a_resource_names_the_lines_it_leaves():
    services = {"gateway": Service("gateway", {}, tags={"team": "web"}),
                "batch": Service("batch", {}, resource_ids=("i-web3",))}
    case = replace(make_case(), services=services)
    classified = classify(_claimed_lines(), RULES, set(), set(), services)
    [misfit] = claims_partial_fit(case, classified)
    assert misfit.kind == "claim_partial" and misfit.severity == "warning" and misfit.subject == "service gateway"
    assert misfit.message == (
        'service gateway: tags claim team = "web" matches only part of the lines in scope of 2 resource(s), class '
        "by class, and leaves 4 line(s), 0.75 USD effective before tax and credits, to no service (shared or "
        "unattributed): i-web1: 3 of its 5 serving_compute line(s), 0.50 USD effective, carrying team absent; "
        'web-2 (ResourceId i-web2): 1 of its 2 serving_compute line(s), 0.25 USD effective, carrying team "webb". '
        "Label those lines, or claim the resources by resource_ids")
    assert misfit.nearest == ("i-web1", "i-web2")


def test_a_claim_matching_whole_resources_or_none_is_no_partial_claim():
    """web-2's lines all carry team web or webb; i-other's carry no tag, and the claim matches none of them."""
    services = {"gateway": Service("gateway", {}, tags={"team": "re:^webb?$"})}
    case = replace(make_case(), services=services)
    lines = _claimed_lines()
    lines = lines[lines["resource_id"].isin(["i-web2", "i-other"])]
    assert claims_partial_fit(case, classify(lines, RULES, set(), set(), services)) == []


NOLABELS = ('service gateway: tags claim goog-k8s-node-pool-name = "default-pool" matches only part of the lines in '
            "scope of 2 resource(s), class by class, and leaves 24 line(s), 4.66 USD effective before tax and "
            "credits, to no service (shared or unattributed): gke-inference-default-pool-b5187ed8-cbpb: 12 of its 48 "
            "serving_compute line(s), 2.33 USD effective, carrying goog-k8s-node-pool-name absent; "
            "gke-inference-default-pool-fb7faefb-gkqg: 12 of its 48 serving_compute line(s), 2.33 USD effective, "
            "carrying goog-k8s-node-pool-name absent. Label those lines, or claim the resources by resource_ids")


def _gke_without_labels(tmp_path):
    """The verifier's case: gke seed 7201 (native export, adjustments), the labels off the default-pool
    nodes' N2 Core / Ram lines from 00:00 to 06:00 UTC (24 of their 96 lines)."""
    case = tmp_path / "gke"
    done = subprocess.run([sys.executable, "-m", "benchmarks.cloudgen", "--cloud", "gke", "--seed", "7201",
                           "--billing", "native", "--adjustments", "--out", str(case)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    export = case / "billing" / "gcp_billing_export_resource_v1.jsonl"
    rows = [json.loads(text) for text in export.read_text(encoding="utf-8").splitlines()]
    taken = 0
    for row in rows:
        if ("default-pool" in (row["resource"] or {}).get("name", "") and row["sku"]["description"].startswith("N2 Instance ")
                and row["usage_start_time"] < "2026-09-01 06:00:00 UTC"):
            row["labels"] = []
            taken += 1
    assert taken == 24
    export.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return case


def test_the_gke_case_with_labels_missing_on_some_lines_names_them(tmp_path):
    case = _gke_without_labels(tmp_path)
    assert validated(case) == [NOLABELS]
    out = tmp_path / "out"
    assert costaudit("run", case, "--out", out, "--format", "json").returncode == 0
    audit = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert [(m["kind"], m["message"]) for m in audit["fit"]] == [("claim_partial", NOLABELS)]
    assert audit["services"]["gateway"]["total_cost"] == "12.99"  # the money is the claim's rule, unchanged


def test_a_claim_matching_only_lines_outside_the_scope_is_named(eks, tmp_path):
    """The gateway claiming team = "analytics", a tag only the m7i.xlarge lines of account
    222222222222 carry, which [scope].accounts leaves out (a verifier's find on eks 8201): before,
    validate and run said nothing and the gateway owned 0.00; now the claim is named with those
    lines, their money, the scope rule and the tags the lines in scope carry."""
    case = edited(eks, tmp_path, 'tags = { "eks:nodegroup-name" = "cpu-gateway" }', 'tags = { "team" = "analytics" }')
    assert validated(case) == [
        'service gateway: tags claim team = "analytics" matches only lines outside [scope]: 24 line(s), 4.84 USD '
        "effective, left out by [scope].accounts = ['111111111111'] (their account(s): 222222222222), so it claims "
        "nothing; in scope, tag keys present: eks:cluster-name, eks:nodegroup-name, elbv2.k8s.aws/cluster"]


def test_a_resource_id_claim_outside_the_scope_names_the_nearest_in_scope():
    """One resource-id claim on an out-of-scope instance, one on an in-scope one: only the first is named."""
    services = {"gateway": Service("gateway", {}, resource_ids=("i-other",)),
                "web": Service("web", {}, resource_ids=("i-web1",))}
    case = replace(make_case(), services=services, scope={"accounts": ["111"]})
    lines = _claimed_lines()
    lines["sub_account_id"] = ["222" if r == "i-other" else "111" for r in lines["resource_id"]]
    kept = (lines["sub_account_id"] == "111").to_numpy()
    [misfit] = claims_fit(case, lines, {}, kept)
    assert (misfit.kind, misfit.subject) == ("claim_out_of_scope", "service gateway")
    assert misfit.message == (
        'service gateway: resource_ids claim "i-other" matches only lines outside [scope]: 1 line(s), 9.00 USD '
        "effective, left out by [scope].accounts = ['111'] (their account(s): 222), so it claims nothing; in scope, "
        "ResourceIds present: i-web1, i-web2, i-web3")
    assert misfit.nearest == ("i-web1", "i-web2", "i-web3")


def _pool_lines(keys: tuple[str, ...], provider: str = "Microsoft"):
    """One instance-hour line per key, each of its own VM (ResourceId vm-N of scale set ss), tagged key = "system"."""
    return lines_frame([line(n, resource_id=f"vm-{n}", resource_name="ss", tags=json.dumps({key: "system"}),
                             effective_cost=Decimal("9.89"), billed_cost=Decimal("9.89"), line_count=24,
                             charge_description="instance hour", provider=provider)
                        for n, key in enumerate(keys, 1)])


def test_lines_whose_tag_key_differs_in_case_are_named():
    """Azure treats tag names case-insensitively: one VM of the system scale set carrying
    AKS-Managed-PoolName where the claim names aks-managed-poolName (a verifier's find on aks 8501):
    before, its 9.89 went to no service without a word (no claim_partial: each VM is its own
    ResourceId); now the lines, their cost and the key as they write it are named."""
    services = {"gateway": Service("gateway", {}, tags={"aks-managed-poolName": "system"})}
    case = replace(make_case(), services=services)
    lines = _pool_lines(("aks-managed-poolName", "AKS-Managed-PoolName"))
    [misfit] = claims_partial_fit(case, classify(lines, RULES, set(), set(), services))
    assert (misfit.kind, misfit.subject, misfit.nearest) == ("claim_key_case", "service gateway", ("vm-2",))
    assert misfit.message == (
        'service gateway: tags claim aks-managed-poolName = "system" leaves 24 line(s) in scope, 9.89 USD effective '
        "before tax and credits, to no service whose tag key is written in another case (tag keys match "
        "case-sensitively; Azure reads them case-insensitively, so its lines carry one tag written two ways): ss "
        "(ResourceId vm-2): 24 line(s), 9.89 USD "
        "effective, carrying AKS-Managed-PoolName. Write the key alike on those lines, or claim the resources by "
        "resource_ids")


def test_on_an_aws_bill_a_key_in_another_case_is_another_tag():
    """AWS reads tag keys case-sensitively: a verifier's find on eks 9201 (EKS:NodeGroup-Name beside
    eks:nodegroup-name) said "Azure reads them case-insensitively" on an AWS bill; now the rule is
    said by provider: the lines are tagged differently."""
    services = {"gateway": Service("gateway", {}, tags={"eks:nodegroup-name": "system"})}
    case = replace(make_case(), services=services)
    lines = _pool_lines(("eks:nodegroup-name", "EKS:NodeGroup-Name"), provider="AWS")
    [misfit] = claims_partial_fit(case, classify(lines, RULES, set(), set(), services))
    assert "(tag keys match case-sensitively; AWS reads them case-sensitively too, so the lines are tagged " \
           "differently): ss (ResourceId vm-2)" in misfit.message and "Azure" not in misfit.message


def test_a_claim_matching_no_line_names_its_key_in_another_case():
    """Every line carrying AKS-Managed-PoolName: before, the hint listed only the values of the claimed
    key (a100pool, h100pool); now it names the key in another case with the claimed value."""
    services = {"gateway": Service("gateway", {}, tags={"aks-managed-poolName": "system"})}
    case = replace(make_case(), services=services)
    lines = _pool_lines(("AKS-Managed-PoolName", "AKS-Managed-PoolName"))
    other = _pool_lines(("aks-managed-poolName",)).assign(tags=json.dumps({"aks-managed-poolName": "h100pool"}))
    [misfit] = claims_fit(case, pd.concat([lines, other], ignore_index=True), {"gateway": ["log"]})
    assert misfit.kind == "service_claim"
    assert misfit.message == (
        'service gateway: tags claim aks-managed-poolName = "system" matches no billing line; values of '
        'aks-managed-poolName present: h100pool; the lines carry AKS-Managed-PoolName = "system", the key in another '
        "case (tag keys match case-sensitively; Azure reads them case-insensitively, so its lines carry one tag "
        "written two ways): claim it as the lines write it")
    assert misfit.nearest == ("AKS-Managed-PoolName = system", "h100pool")
