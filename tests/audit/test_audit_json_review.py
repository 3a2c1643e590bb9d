"""The audit.json sections a later review reads (METHOD §10): components, composition, days, ids,
scope, [[shipped]], lines; on a small in-memory case of two services over two days."""
from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from decimal import Decimal

import pandas as pd
import pytest

from audit.audit_json import to_dict
from audit.case import Rule, Service, load_case
from audit.collected import Collected
from audit.errors import ConfigError
from audit.pipeline import audit_collected
from tests.builders import activity, frame, line, lines_frame, make_case, window

START, END = window("2026-08-31", "2026-09-02")  # two days, one in August, one in September
HOURS = 48
GPU_LINE = "$98 per On Demand Linux p5.48xlarge Instance Hour"


def hour(h: int) -> pd.Timestamp:
    return pd.Timestamp("2026-08-31T00:00:00Z") + pd.Timedelta(hours=h)


def billing_rows() -> list[dict]:
    rows, n = [], 0
    for h in range(HOURS):
        common = dict(start=hour(h), end=hour(h + 1))
        for resource, cost in (("i-gpu0", Decimal("40.000001")), ("i-gpu1", Decimal("20.5"))):
            n += 1
            rows.append(line(n, resource_id=resource, charge_description=GPU_LINE, pricing_unit="Hours",
                             pricing_quantity=Decimal(1), contracted_unit_price=cost, billed_cost=cost,
                             effective_cost=cost, sku_id="SKU-GPU", **common))
        for service, cost in (("Elastic Load Balancing", "0.37"), ("AmazonCloudWatch", "0.213")):
            n += 1
            rows.append(line(n, service_name=service, billed_cost=Decimal(cost), effective_cost=Decimal(cost),
                             charge_description=f"{service} hour", **common))
    return rows


def telemetry_tables() -> dict:
    acts, traffic = [], []
    for h in range(HOURS):
        for node, gpus in (("n0", 4), ("n1", 2)):
            for g in range(gpus):
                pod, ns = (("chat-" + str(g), "llm") if node == "n0" and g < 3 else
                           ("embed-0", "emb") if node == "n0" else ("", ""))
                acts.append({"node": node, "gpu": str(g), "ts": hour(h), "pod": pod, "namespace": ns,
                             "busy_fraction": ((g + 1) * 0.13 + h * 0.007) % 0.9})
        for pod, ns, count in (("chat-0", "llm", 1000 + 10 * h), ("embed-0", "emb", 300 + h)):
            traffic.append({"ts": hour(h), "model_name": "", "namespace": ns, "pod": pod, "requests": float(count),
                            "prompt_tokens": float(count * 50), "generated_tokens": float(count * 20)})
    nodes = pd.DataFrame([{"node": n, "provider_id": f"aws:///z/{r}", "resource_id": r, "instance_type": ""}
                          for n, r in (("n0", "i-gpu0"), ("n1", "i-gpu1"))])
    traffic_frame = pd.DataFrame(traffic)
    traffic_frame["ts"] = pd.to_datetime(traffic_frame["ts"], utc=True).astype("datetime64[ns, UTC]")
    return {"gpu_activity": activity(acts), "node_info": nodes, "traffic": traffic_frame}


def profile_frame():
    profile = pd.DataFrame([{"trace": "t", "device": "H100", "gpu_window_us": 110.0, "kernel_active_us": 100.0,
                             "busy_us": 100.0, "idle_us": 10.0, "gap_ratio": 0.1, "gap_basis": "gpu_window",
                             "kernels": 3, "sync_us": 0.0}])
    return frame("profiles", "kineto", {"profile": profile, "kernels": pd.DataFrame(), "categories": pd.DataFrame()},
                 name="chat-profile", service="chat", requests=10)


def two_day_case(start=START, end=END):
    services = {"chat": Service("chat", {"namespace": "llm"}, 1, 1, 3600),
                "embed": Service("embed", {"namespace": "emb"}, 1, 1, 3600)}
    rules = (Rule({"ServiceName": "Elastic Load Balancing"}, "serving_network", "load balancer of chat",
                  service="chat"),)
    return dataclasses.replace(make_case(), start=start, end=end, services=services, rules=rules)


def two_day_collected() -> Collected:
    return Collected((frame("billing", "focus", {"lines": lines_frame(billing_rows())}),
                      frame("telemetry", "openmetrics", telemetry_tables()), profile_frame()))


@pytest.fixture(scope="module")
def audited():
    result = audit_collected(two_day_case(), two_day_collected())
    return result, to_dict(result)


def test_components_sum_to_own_plus_shared(audited):
    result, doc = audited
    for name, entry in doc["services"].items():
        uc = result.unit_costs[name]
        total = sum((Decimal(c["cost"]) for c in entry["components"].values()), Decimal(0))
        assert abs(total - (uc.own + uc.shared)) < Decimal("1e-10"), name
        # total_cost is the service's composition figure (audit/audit_json_cents.py), its exact cost to
        # the cent
        assert entry["total_cost"] == doc["composition"]["services"][name]
        assert abs(Decimal(entry["total_cost"]) - (uc.own + uc.shared)) < Decimal("0.01")
    chat = doc["services"]["chat"]["components"]
    assert {"gpu_busy", "gpu_idle", "line:serving_network", "shared:observability", "shared:unallocated"} <= set(chat)
    assert chat["gpu_busy"]["unit"] == "gpu_second" and chat["line:serving_network"]["unit"] == "currency"
    assert Decimal(chat["line:serving_network"]["cost"]) == Decimal("0.37") * HOURS
    busy = sum((iv.busy_seconds for iv in result.intervals if iv.service == "chat"), Decimal(0))
    paid = sum((iv.paid_seconds for iv in result.intervals if iv.service == "chat"), Decimal(0))
    assert Decimal(chat["gpu_busy"]["quantity"]) == busy.quantize(Decimal("1e-6"))
    assert Decimal(chat["gpu_idle"]["quantity"]) == (paid - busy).quantize(Decimal("1e-6"))
    # embed has no profile: its kernel time is unattributed, so its busy component costs nothing
    embed = doc["services"]["embed"]["components"]
    assert Decimal(embed["gpu_busy"]["cost"]) == 0 and Decimal(embed["gpu_busy"]["quantity"]) > 0


def test_composition_sums_exactly_to_the_total(audited):
    _, doc = audited
    comp = doc["composition"]
    members = [Decimal(v) for v in comp["services"].values()] + [Decimal(comp["unattributed"]),
                                                                Decimal(comp["unallocated"])]
    assert sum(members, Decimal(0)) == Decimal(comp["total"]) == Decimal(doc["total"])
    assert Decimal(comp["unattributed"]) == Decimal(doc["buckets"]["unattributed"]["amount"])


def test_daily_parts_sum_to_the_window_s_parts(audited):
    result, doc = audited
    for name, entry in doc["services"].items():
        days = entry["daily"]
        assert [d["day"] for d in days] == ["2026-08-31", "2026-09-01"]
        sums: dict[str, Decimal] = {}
        for d in days:
            parts = sum((Decimal(p["cost"]) for p in d["parts"].values()), Decimal(0))
            assert abs(parts - Decimal(d["gpu_cost"])) < Decimal("1e-10")
            for key, p in d["parts"].items():
                sums[key] = sums.get(key, Decimal(0)) + Decimal(p["cost"])
        for key, amount in sums.items():
            bucket, part = key.split(".")
            assert abs(amount - result.ledger.parts[(bucket, part, name)].amount) < Decimal("1e-9"), key
        requests = sum(int(d["requests"]) for d in days)
        assert requests == doc["services"][name]["requests"]
    chat_day = doc["services"]["chat"]["daily"][0]
    seconds = sum((Decimal(p["gpu_seconds"]) for p in chat_day["parts"].values()), Decimal(0))
    assert abs(seconds - Decimal(chat_day["paid_gpu_seconds"])) < Decimal("1e-9")


def test_parts_and_findings_have_stable_ids(audited):
    _, doc = audited
    ids = [p["id"] for b in doc["buckets"].values() for p in b["parts"]]
    assert len(ids) == len(set(ids))
    assert "model_compute.kernel_active/chat" in ids and "platform_overhead.unallocated/-" in ids
    again = to_dict(audit_collected(two_day_case(), two_day_collected()))
    assert [p["id"] for b in again["buckets"].values() for p in b["parts"]] == ids
    assert doc["meta"]["method"] == "2026-12"


def test_scope_and_lines(audited):
    _, doc = audited
    assert doc["scope"] == {"accounts": ["111"], "tags": None, "services": None,
                            "declared_services": ["chat", "embed"]}
    lines = doc["lines"]
    skus = {s["id"]: s["amount"] for s in lines["skus"]}
    assert skus["Amazon Elastic Compute Cloud|SKU-GPU"] == str(((Decimal("40.000001") + Decimal("20.5")) * HOURS)
                                                               .quantize(Decimal("0.01")))
    assert sum((Decimal(v) for v in skus.values()), Decimal(lines["other_skus"])) == Decimal(doc["total"])
    assert lines["accounts"] == [{"account": "111", "amount": doc["total"]}]
    assert doc["shipped"] == [] and doc["months"] is None


def _case_file(tmp_path, shipped: str):
    (tmp_path / "bill.csv").write_text("x\n")
    (tmp_path / "case.toml").write_text(
        '[case]\nwindow = ["2026-09-01", "2026-10-01"]\ncurrency = "USD"\nloaded_rate = 100\n'
        '[[billing]]\nformat = "focus"\npath = "bill.csv"\n'
        '[services.chat]\nnamespace = "llm"\n' + shipped)
    return tmp_path


def test_shipped_entries_are_read_and_written(tmp_path):
    case = load_case(_case_file(tmp_path, '[[shipped]]\noption = "right_size_replicas"\nservice = "chat"\n'
                                          'date = 2026-09-15\nnote = "HPA at 0.8"\n'
                                          '[[shipped]]\noption = "quantise"\nservice = "chat"\n'
                                          'date = "2026-09-20T12:00:00Z"\n'))
    assert [(s.option, s.service, s.date, s.note) for s in case.shipped] == [
        ("right_size_replicas", "chat", datetime(2026, 9, 15, tzinfo=timezone.utc), "HPA at 0.8"),
        ("quantise", "chat", datetime(2026, 9, 20, 12, tzinfo=timezone.utc), None)]
    result = audit_collected(dataclasses.replace(two_day_case(), shipped=case.shipped), two_day_collected())
    assert to_dict(result)["shipped"] == [
        {"option": "right_size_replicas", "service": "chat", "date": "2026-09-15", "note": "HPA at 0.8"},
        {"option": "quantise", "service": "chat", "date": "2026-09-20T12:00:00Z", "note": None}]


def test_a_shipped_service_not_declared_names_the_nearest(tmp_path):
    with pytest.raises(ConfigError) as raised:
        load_case(_case_file(tmp_path, '[[shipped]]\noption = "right_size_replicas"\nservice = "chatt"\n'
                                       'date = 2026-09-15\n'))
    assert "[[shipped]] #1.service: 'chatt' is not a declared [services] entry; did you mean 'chat'?" in str(raised.value)


def test_a_bad_shipped_date_names_the_entry(tmp_path):
    with pytest.raises(ConfigError) as raised:
        load_case(_case_file(tmp_path, '[[shipped]]\noption = "x"\nservice = "chat"\ndate = "mid-August"\n'
                                       '[[shipped]]\noption = "y"\nservice = "chat"\nwhen = 2026-09-01\n'))
    text = str(raised.value)
    assert "[[shipped]] #1.date: expected an ISO date such as 2026-09-01, got 'mid-August'" in text
    assert "unknown key 'when' in [[shipped]] #2" in text and "[[shipped]] #2: needs 'date'" in text


def test_right_size_carries_its_saving_per_service(audited):
    _, doc = audited
    options = {o["id"]: o for o in doc["options"]}
    right = options["right_size_replicas"]
    assert right["basis"] == "modelled" and set(right["by_service"]) == {"chat"}  # embed has no serving split
    assert Decimal(right["by_service"]["chat"]["expected"]) > 0
    for band in ("low", "expected", "high"):
        summed = sum((Decimal(v[band]) for v in right["by_service"].values()), Decimal(0))
        assert abs(summed - Decimal(right["monthly_saving"][band])) <= Decimal("0.01")
    assert all(o["by_service"] is None for i, o in options.items() if i != "right_size_replicas")
