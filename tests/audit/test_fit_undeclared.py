"""Pods of no service are named (rule 5): a canary a matcher just misses is a warning naming the
service it nearly belongs to; every pod of no service is named in the undeclared-workload part.
``eks`` is the generated case (tests/conftest.py)."""
from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

from audit.case_services import Service
from audit.fit_undeclared import nearest_service, orphan_pods, undeclared_fit
from tests.audit.test_fit import costaudit

TIGHT = 'pod = "re:^chat-[a-z0-9]{10}-[a-z0-9]{5}$"'


def canary(eks: Path, tmp_path: Path) -> tuple[Path, str]:
    """The generated case with one chat pod renamed ``<pod>-canary`` and chat's pod matcher tightened
    to the generated pods' form, which the canary's name misses."""
    case = tmp_path / "case"
    shutil.copytree(eks, case)
    metrics = case / "telemetry" / "metrics.om.gz"
    text = gzip.decompress(metrics.read_bytes()).decode()
    pod = sorted(set(re.findall(r'pod="(chat-[a-z0-9]{10}-[a-z0-9]{5})"', text)))[0]
    metrics.write_bytes(gzip.compress(text.replace(f'pod="{pod}"', f'pod="{pod}-canary"').encode()))
    toml = (case / "case.toml").read_text(encoding="utf-8")
    assert 'pod = "re:^chat-"' in toml
    (case / "case.toml").write_text(toml.replace('pod = "re:^chat-"', TIGHT, 1), encoding="utf-8")
    return case, f"{pod}-canary"


def test_a_pod_a_matcher_just_misses_is_named_with_its_service(eks, tmp_path):
    case, pod = canary(eks, tmp_path)
    run = costaudit("run", case, "--out", tmp_path / "out", "--format", "json")
    assert run.returncode in (0, 2), run.stderr
    audit = json.loads((tmp_path / "out" / "audit.json").read_text())
    [found] = [m for m in audit["fit"] if m["kind"] == "undeclared_pods"]
    notebook = next(p for p in found["message"].split(": ", 2)[2].split(", ") if "notebook" in p).split(";")[0]
    assert found["message"] == (
        f"2 pod(s) match no [services] entry: their GPU time is counted as undeclared workload (unattributed) "
        f"and their requests for no service: llm/{pod} (nearest service chat: {TIGHT} does not hold), {notebook}; "
        "widen the matcher named, or declare the pod's own service, if it belongs to the audit")
    assert found["nearest"] == ["chat"]
    [part] = [p for p in audit["buckets"]["unattributed"]["parts"] if p["name"] == "undeclared_workload"]
    assert part["reason"] == f"pods that match no [services] entry: llm/{pod}, {notebook}"


def test_a_pod_near_no_service_is_named_in_its_part_alone(eks, tmp_path):
    run = costaudit("run", eks, "--out", tmp_path / "out", "--format", "json")
    audit = json.loads((tmp_path / "out" / "audit.json").read_text())
    assert not [m for m in audit["fit"] if m["kind"] == "undeclared_pods"]
    [part] = [p for p in audit["buckets"]["unattributed"]["parts"] if p["name"] == "undeclared_workload"]
    assert re.fullmatch(r"pods that match no \[services\] entry: research/notebook-[a-z0-9]{10}-[a-z0-9]{5}",
                        part["reason"]), part["reason"]
    assert run.returncode in (0, 2)


def test_nearness_needs_every_other_matcher_and_a_near_value():
    services = {"chat": Service("chat", {"namespace": "llm", "pod": "re:^chat-[a-z0-9]{3}$"}),
                "embed": Service("embed", {"namespace": "embed", "pod": "re:^embed-"})}
    pods = [{"namespace": "llm", "pod": "chat-abc"}, {"namespace": "llm", "pod": "chat-abc-canary"},
            {"namespace": "llm", "pod": "gateway-1"}, {"namespace": "batch", "pod": "chat-xyz"}]
    orphans, owned = orphan_pods(_case(services), pods)
    assert [p["pod"] for p in orphans] == ["chat-abc-canary", "gateway-1", "chat-xyz"]
    assert nearest_service(orphans[0], services, owned) == ("chat", "pod")
    assert nearest_service(orphans[1], services, owned) is None   # in chat's namespace, but not near its pods
    assert nearest_service(orphans[2], services, owned) is None   # chat-like name, another namespace: no pods of chat there
    assert len(undeclared_fit(_case(services), orphans, owned)) == 1
    assert undeclared_fit(_case(services), orphans[1:], owned) == []


def _case(services):
    from types import SimpleNamespace
    return SimpleNamespace(services=services)
