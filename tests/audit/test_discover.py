"""Discovery (`costaudit init --from`): each real format sniffed, workloads from pod names, the
demo's services found again from its raw files, and fitted cases on the shared real data that
validate and run."""
from __future__ import annotations

import gzip
import json
import tomllib
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pytest

from audit.discover import discover
from audit.discover.billing import GpuResource
from audit.discover.nodes import Node, fit_nodes
from audit.discover.read import covered_days
from audit.discover.sniff import sniff
from audit.discover.workloads import Workload, fit_matchers, workload_of
from connectors.errors import InputError
from tests.paths import DATA, DEMO, FIXTURES

BILLING = DATA / "billing"
SNIFFED = [
    (BILLING / "focus_sample_data" / "focus_sample_1000.csv", "focus"),
    (BILLING / "focus_spec_examples" / "commitment_discount_usage_scenario_1.csv", "focus"),
    (BILLING / "focus_converters" / "aws_cur1_anonymized_2023-11.csv", "cur"),
    (BILLING / "focus_converters" / "azure_ea_anonymized_cad.csv", "azure"),
    (BILLING / "msft_finops_toolkit" / "EA_AmortizedCost_Small.csv", "azure"),
    (BILLING / "aws_wa_labs" / "Oct2018-WorkshopCUR-00001.snappy.parquet", "cur"),
    (BILLING / "aws_wa_labs" / "workload_efficiency_step1_cur_2019-11-26.csv.gz", "cur"),
    (BILLING / "aws_wa_labs" / "workload_efficiency_step1_accesslog_2019-11-26.parquet", "access_log"),
    (DATA / "metrics" / "datadog-integrations-core" / "dcgm_exporter_excerpt.prom", "openmetrics"),
    (DATA / "metrics" / "datadog-integrations-core" / "vllm_metrics_excerpt.prom", "openmetrics"),
    (DATA / "metrics" / "datadog-integrations-core" / "triton_metrics_excerpt.prom", "openmetrics"),
    (DATA / "metrics" / "datadog-integrations-core" / "tgi_metrics_excerpt.prom", "openmetrics"),
    (DATA / "traces" / "kineto" / "resnet50_v100_num_workers_0.pt.trace.json.gz", "kineto"),
    (DATA / "traces" / "tracelens" / "h100_bert-small-uncased.json.gz", "kineto"),
    (DATA / "traces" / "hta" / "alexnet_a100_cuda_sync.json.gz", "kineto"),
    (DATA / "traces" / "nsys-extrap" / "con_kernel.sqlite", "nsys"),
    (DEMO / "billing" / "focus_2026-09.csv.gz", "focus"),
    (DEMO / "telemetry" / "metrics.om.gz", "openmetrics"),
    (DEMO / "profiles" / "h100_qwen1.5-0.5b-chat.json.gz", "kineto"),
    (FIXTURES / "telemetry_small" / "cluster.om", "openmetrics"),
    (FIXTURES / "offline_telemetry" / "nvidia_smi.csv", "nvidia_smi"),
    (FIXTURES / "offline_telemetry" / "dcgmi_dmon.txt", "dcgmi"),
    (FIXTURES / "offline_telemetry" / "sacct.txt", "sacct"),
    (FIXTURES / "offline_telemetry" / "opencost_allocation.json", "opencost"),
    (FIXTURES / "azure_synthetic" / "mca_amortized_gpu.csv", "azure"),
    (FIXTURES / "focus_dialects" / "focus12_dialect.csv", "focus"),
]


@pytest.mark.parametrize("path, fmt", SNIFFED, ids=[p.name for p, _ in SNIFFED])
def test_every_real_format_is_sniffed(path, fmt):
    assert sniff(str(path)).format == fmt


def test_dumps_bundles_logs_and_urls_are_sniffed(tmp_path):
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}}))
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "profile.json").write_text("{}")
    log = tmp_path / "access.log.gz"
    line = '10.0.0.1 - - [01/Sep/2026:10:00:00 +0000] "GET /v1/chat HTTP/1.1" 200 512 "-" "curl/8"\n'
    log.write_bytes(gzip.compress((line * 3).encode()))
    assert sniff(str(dump)).format == "prom_dump"
    assert sniff(str(bundle)).format == "profile_bundle"
    assert sniff(str(log)).format == "access_log"
    url = sniff("http://127.0.0.1:9090")
    assert (url.format, url.kind, url.options) == ("prometheus", "telemetry", {"url": "http://127.0.0.1:9090"})


@pytest.mark.parametrize("path", [DATA / "traffic" / "AzureLLMInferenceTrace_code.csv", BILLING / "PROVENANCE.md"])
def test_a_path_that_fits_no_format_is_named_with_what_was_tried(path):
    with pytest.raises(InputError) as caught:
        sniff(str(path))
    text = str(caught.value)
    assert str(path) in text and "cannot tell its format" in text
    for tried in ("openmetrics", "nvidia_smi", "sacct", "access_log", "billing exports"):
        assert tried in text
    assert "pass --format" not in text


def test_an_empty_file_and_a_missing_one_are_named(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(InputError, match="the file is empty"):
        sniff(str(empty))
    with pytest.raises(InputError, match="file not found"):
        sniff(str(tmp_path / "nope.csv"))
    with pytest.raises(InputError, match="local files and Prometheus urls only"):
        sniff("s3://bucket/key.csv")


@pytest.mark.parametrize("pod, slurm, expected", [
    ("chat-7c9d5f8b6d-x2kqz", False, ("chat", "deployment")),
    ("tgi-llama-5d8b6-xyz12", False, ("tgi-llama", "deployment")),
    ("embed-5b7f9c6d48-4hj5p", False, ("embed", "deployment")),
    ("ranker-bcdfghjk-wxzbc", False, ("ranker", "deployment")),   # a hash of safe letters only
    ("vllm-0", False, ("vllm", "statefulset")),
    ("trainer-12", False, ("trainer", "statefulset")),
    ("exporter-x2kqz", False, ("exporter", "generated")),          # DaemonSet / Job suffix
    ("chat-model", False, ("chat-model", "pod")),                   # a word, not a suffix
    ("chat-api-abcde", False, ("chat-api-abcde", "pod")),
    ("101-train", True, ("train", "slurm")),
    ("4242_7-eval", True, ("eval", "slurm")),
])
def test_generated_suffixes_are_stripped(pod, slurm, expected):
    assert workload_of(pod, slurm) == expected


def test_matchers_are_tightened_where_another_workload_shares_the_prefix():
    vllm = Workload("serve", "vllm", "statefulset", pods={"vllm-0", "vllm-1"}, gpu_hours=2.0)
    opt = Workload("serve", "vllm-opt", "deployment", pods={"vllm-opt-6f7d9-qwert"})
    chat = Workload("llm", "chat", "deployment", pods={"chat-7c9d5f8b6d-x2kqz"})
    fit_matchers([vllm, opt, chat])
    assert vllm.matcher == {"namespace": "serve", "pod": "re:^vllm-[0-9]+$"}
    assert opt.matcher == {"namespace": "serve", "pod": "re:^vllm-opt-"}
    assert chat.matcher == {"namespace": "llm", "pod": "re:^chat-"}


def test_covered_days_are_whole_utc_days():
    utc = timezone.utc
    span = covered_days([(datetime(2026, 9, 1, 0, 0, tzinfo=utc), datetime(2026, 9, 30, 23, 0, tzinfo=utc)),
                         (datetime(2026, 9, 2, 5, 0, tzinfo=utc), datetime(2026, 10, 1, 0, 0, tzinfo=utc))])
    assert span == (datetime(2026, 9, 1, tzinfo=utc), datetime(2026, 10, 1, tzinfo=utc))
    assert covered_days([(datetime(2026, 9, 1, 10, tzinfo=utc), datetime(2026, 9, 1, 11, tzinfo=utc))]) == (
        datetime(2026, 9, 1, tzinfo=utc), datetime(2026, 9, 2, tzinfo=utc))
    assert covered_days([(None, None)]) is None


def test_nodes_are_tied_by_instance_name_and_by_a_unique_instance_type():
    gcp = GpuResource("//compute.googleapis.com/projects/p/zones/z/instances/7311289012345678901",
                      "//compute.googleapis.com/projects/p/zones/z/instances/7311289012345678901",
                      resource_name="gke-a3-pool-1", instance_type="a3-highgpu-8g", gpus=8)
    lone = GpuResource("i-0aaa", "i-0aaa", instance_type="p5.48xlarge", gpus=8, gpu_hours=Decimal(720))
    twins = [GpuResource(f"i-0b{i}", f"i-0b{i}", instance_type="g6e.12xlarge", gpus=4) for i in range(2)]
    resources = {r.key: r for r in [gcp, lone, *twins]}
    nodes = {"gke-a3-pool-1": Node("gke-a3-pool-1", "gce://p/z/gke-a3-pool-1", "gke-a3-pool-1", "a3-highgpu-8g", {"g0"}),
             "gpu-host": Node("gpu-host", instance_type="p5.48xlarge", gpus={f"g{i}" for i in range(8)}),
             "n1": Node("n1", instance_type="g6e.12xlarge", gpus={"a"}),
             "n2": Node("n2", instance_type="g6e.12xlarge", gpus={"b"})}
    fit = fit_nodes(resources, nodes, {})
    links = {link.node: link.resource_id for link in fit.links}
    assert links == {"gke-a3-pool-1": gcp.resource_id, "gpu-host": "i-0aaa"}
    assert sum("meets no billed GPU machine" in u for u in fit.unmet) == 2
    assert sum("meets no telemetry node" in u for u in fit.unmet) == 2


# ---- whole proposals --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def demo_proposal(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("fitted")
    found = discover([str(DEMO / "billing" / "focus_2026-09.csv.gz"), str(DEMO / "telemetry" / "metrics.om.gz"),
                      str(DEMO / "profiles" / "h100_qwen1.5-0.5b-chat.json.gz")], folder, "fitted")
    (folder / "case.toml").write_text(found.text)
    return {"folder": folder, "toml": tomllib.loads(found.text), "text": found.text}


@pytest.mark.slow
def test_the_demo_services_are_found_from_its_raw_files(demo_proposal):
    demo = tomllib.loads((DEMO / "case.toml").read_text())
    got = demo_proposal["toml"]
    key = ("namespace", "pod", "gpus_per_replica")
    assert {n: tuple(s[k] for k in key) for n, s in got["services"].items()} == \
        {n: tuple(s[k] for k in key) for n, s in demo["services"].items()}
    assert got["case"]["window"] == demo["case"]["window"]
    assert got["case"]["currency"] == demo["case"]["currency"]
    assert got["scope"]["accounts"] == demo["scope"]["accounts"]
    assert got["profiles"][0]["service"] == "chat"
    text = demo_proposal["text"]
    assert "9,360.0 GPU-hours in the window" in text and "13 pod(s) in namespace llm" in text
    assert "5,760.0 GPU-hours in the window" in text and "no GPU spend" in text


@pytest.mark.slow
def test_the_fitted_demo_case_validates_and_runs(demo_proposal):
    from audit.audit_json import to_dict
    from audit.case import load_case
    from audit.collect import check
    from audit.normalise import billing_lines
    from audit.pipeline import run_audit

    case = load_case(demo_proposal["folder"])
    assert check(case, case_checks=billing_lines) == []
    doc = to_dict(run_audit(case))
    demo = json.loads((DEMO / "truth.json").read_text())
    assert doc["total"] == demo["total"]
    assert set(doc["services"]) == {"chat", "embed"}
    assert Decimal(doc["services"]["chat"]["gpu_hours"]) > 0
    assert sum(Decimal(b["amount"]) for b in doc["buckets"].values()) == Decimal(doc["total"])


REAL_CASES = {
    "focus-sample+dcgm+kineto": [BILLING / "focus_sample_data" / "focus_sample_1000.csv",
                                 DATA / "metrics" / "datadog-integrations-core" / "dcgm_exporter_excerpt.prom",
                                 DATA / "traces" / "kineto" / "resnet50_v100_num_workers_0.pt.trace.json.gz"],
    "cur+access-log": [BILLING / "aws_wa_labs" / "workload_efficiency_step1_cur_2019-11-26.csv.gz",
                       BILLING / "aws_wa_labs" / "workload_efficiency_step1_accesslog_2019-11-26.parquet"],
    "focus-sample+vllm": [BILLING / "focus_sample_data" / "focus_sample_1000.csv",
                          DATA / "metrics" / "datadog-integrations-core" / "vllm_metrics_excerpt.prom"],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(REAL_CASES))
def test_a_case_fitted_to_shared_real_data_validates_and_runs(tmp_path, name):
    from audit.audit_json import to_dict
    from audit.case import load_case
    from audit.collect import check
    from audit.normalise import billing_lines
    from audit.pipeline import run_audit

    found = discover([str(p) for p in REAL_CASES[name]], tmp_path, name)
    (tmp_path / "case.toml").write_text(found.text)
    case = load_case(tmp_path)
    assert check(case, case_checks=billing_lines) == []
    doc = to_dict(run_audit(case))
    assert sum(Decimal(b["amount"]) for b in doc["buckets"].values()) == Decimal(doc["total"])
    if name == "cur+access-log":  # the request log is a service of its own, its requests counted
        assert list(case.services) == ["workload-efficiency-step1"]
        assert doc["services"]["workload-efficiency-step1"]["requests"] == 108492
    if name.startswith("focus-sample"):  # the GPU account is the scope; the snapshot is named
        assert case.scope["accounts"] == ["11353890204"]
        assert "single scrape" in found.text or name.endswith("vllm")


def test_several_currencies_choose_none(tmp_path):
    from audit.case import load_case
    from audit.errors import ConfigError

    found = discover([str(BILLING / "focus_converters" / "azure_ea_anonymized_cad.csv"),
                      str(BILLING / "focus_sample_data" / "focus_sample_1000.csv")], tmp_path, "mixed")
    assert "several currencies: USD (1,000 lines), CAD (27 lines)" in found.text
    (tmp_path / "case.toml").write_text(found.text)
    with pytest.raises(ConfigError, match="currency"):
        load_case(tmp_path)


NO_CURRENCY = BILLING / "focus_spec_examples" / "zero_percent_utilization_without_commitment_discount_flexibility.csv"


def test_a_file_naming_no_currency_is_proposed_in_an_assumed_one_said_so(tmp_path):
    """The spec example has no BillingCurrency column (mandatory in FOCUS): before, init wrote "the billing's
    currency (3 lines)" above currency = "USD", as if the file named it; now the comment says it names none."""
    found = discover([str(NO_CURRENCY)], tmp_path, "nocur")
    assert ('# the billing names no currency (zero_percent_utilization_without_commitment_discount_flexibility: '
            'no BillingCurrency column): USD is the case\'s assumption, not the file\'s; write the currency it '
            'bills in\ncurrency = "USD"\n') in found.text


def test_a_file_naming_no_currency_beside_one_that_does_takes_its_currency_and_says_so(tmp_path):
    found = discover([str(NO_CURRENCY), str(BILLING / "focus_sample_data" / "focus_sample_1000.csv")], tmp_path, "two")
    assert ("# the billing's currency (1,000 lines); zero_percent_utilization_without_commitment_discount_flexibility "
            "names none (no BillingCurrency column) and is read in it, assumed\ncurrency = \"USD\"\n") in found.text


def test_telemetry_alone_gives_the_window_and_services_from_pods(tmp_path):
    found = discover([str(FIXTURES / "telemetry_small" / "cluster.om"),
                      str(FIXTURES / "offline_telemetry" / "sacct.txt")], tmp_path, "tele")
    got = tomllib.loads(found.text)
    assert got["case"]["window"] == ["2025-01-01", "2026-09-02"]
    assert got["services"]["vllm"] == {"namespace": "serving", "pod": "re:^vllm-", "gpus_per_replica": 2,
                                       "min_replicas": 1}
    assert got["services"]["train"]["pod"] == "re:^[0-9_+]+-train$"
    assert got["services"]["train"]["gpus_per_replica"] == 4
    assert any("no billing source" in w for w in found.warnings)


def test_a_source_that_needs_options_is_written_commented_out(tmp_path):
    found = discover([str(BILLING / "focus_sample_data" / "focus_sample_1000.csv"),
                      str(FIXTURES / "offline_telemetry" / "dcgmi_dmon.txt")], tmp_path, "dmon")
    assert '# format = "dcgmi"' in found.text and "interval_ms" in found.text
    assert "telemetry" not in tomllib.loads(found.text)


def test_a_prometheus_url_needs_a_window(tmp_path):
    from schemas.errors import UsageError

    with pytest.raises(UsageError, match="--window"):
        discover(["http://127.0.0.1:1"], tmp_path, "prom")


def test_paths_inside_the_case_folder_are_relative(tmp_path):
    (tmp_path / "data").mkdir()
    local = tmp_path / "data" / "cluster.om"
    local.write_bytes((FIXTURES / "telemetry_small" / "cluster.om").read_bytes())
    found = discover([str(local)], tmp_path, "rel")
    assert tomllib.loads(found.text)["telemetry"][0]["path"] == str(Path("data") / "cluster.om")


def test_a_single_scrape_has_no_step_measured(tmp_path):
    """A scrape without timestamps has no spacing between samples: its step was written "1m" (the
    reader's default) and proposed as "their own steps: scrape 60s"; now it is said not measured.
    Two scrapes 5 minutes apart still give their step."""
    samples = ['vllm:request_success_total{model_name="m",finished_reason="stop"} 3',
               'vllm:num_requests_running{model_name="m"} 1']
    window = (datetime(2026, 1, 1, tzinfo=timezone.utc), datetime(2026, 2, 1, tzinfo=timezone.utc))
    (tmp_path / "scrape.prom").write_text("# TYPE vllm:request_success counter\n" + "\n".join(samples) + "\n# EOF\n")
    found = discover([str(tmp_path / "scrape.prom")], tmp_path / "one", "one", window)
    assert "# read: 2 rows, no time span, step unknown (not measured: no spacing between samples)\n" in found.text
    assert "# no telemetry step was measured: each source keeps its own\n" in found.text
    assert "their own steps" not in found.text and "step = " not in found.text
    t0 = int(window[0].timestamp())
    stamped = [f"{s} {t0 + t}" for t in (0, 300) for s in samples]
    (tmp_path / "two.om").write_text("# TYPE vllm:request_success counter\n" + "\n".join(stamped) + "\n# EOF\n")
    found = discover([str(tmp_path / "two.om")], tmp_path / "two", "two", window)
    assert "step 5m\n" in found.text and "(their own steps: two 300s)" in found.text


def test_a_request_log_service_claims_its_tag_and_no_pod(tmp_path):
    """A service fitted from a request log alone (no GPU, no pod) is written as a CPU tier: a tags
    claim of the tag the most spend on instances without GPUs carries, no pod matcher. Before: it was
    written pod = "workload-efficiency-step1" (the log's file name, no pod's), and the untouched case
    warned at once 'service workload-efficiency-step1: telemetry names no pod …'."""
    import subprocess
    import sys

    from tests.paths import ROOT

    found = discover([str(p) for p in REAL_CASES["cur+access-log"]], tmp_path, "c4")
    (tmp_path / "case.toml").write_text(found.text)
    assert tomllib.loads(found.text)["services"] == {"workload-efficiency-step1": {
        "tags": {"application": "ordering"}}}
    assert ("# no pod serves it (a CPU tier): it claims the lines tagged application = ordering, the tag the most "
            "spend on instances without GPUs carries (35.72 of 65.93) (also on 20.31 of GPU lines and lines of no "
            "instance); others: tier = front 18.88 (also on 12.23 of GPU lines and lines of no instance), tier = middle "
            "16.56 (also on 2.32 of GPU lines and lines of no instance), environment = Production 8.87 (also on 0.45 "
            "of GPU lines and lines of no instance)") in found.text
    done = subprocess.run([sys.executable, "-m", "audit", "validate", str(tmp_path)], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert done.returncode == 0
    assert [w for w in done.stderr.splitlines() if "service workload-efficiency-step1" in w] == []


def test_a_request_log_service_without_an_instance_tag_is_written_commented_out():
    """No instance line carries a tag: no claim the data holds, so the service is written commented out
    with what to write (before: pod = "<the log's name>", a matcher no pod carries)."""
    from audit.discover.billing import Billing
    from audit.discover.propose import ServiceEntry, _log_claim
    from audit.discover.write import _service

    entry = ServiceEntry("web", {})
    _log_claim(entry, Billing(), [])
    assert _service(entry) == (
        "# no pod serves it and no instance line carries a tag: write its claim (tags = { … } or resource_ids = [ … ], "
        "the billing lines it owns) and uncomment\n# [services.web]\n")


def test_a_request_log_service_claims_the_node_group_tag_not_the_clusters(tmp_path):
    """cloudgen EKS 8011: the gateway's c7i nodes carry eks:cluster-name = inference-prod and
    eks:nodegroup-name = cpu-gateway, 17.14 each; the GPU nodes and the control plane carry the cluster's
    tag too. Before: tags = { "eks:cluster-name" = "inference-prod" } ('17.14 of 21.97', the 21.97 with the
    out-of-scope account's 4.84) and gpus_per_replica = 1, and validate warned that its claims match 144
    lines, 72 of them gpu_compute (2893.75 USD); now the node group's tag, of the scope's 17.14, no
    gpus_per_replica, and validate warns nothing about the gateway."""
    import decimal
    import subprocess
    import sys

    from benchmarks.cloudgen.generate import generate
    from tests.paths import ROOT

    made = tmp_path / "eks"
    with decimal.localcontext():  # cloudgen sets its own precision
        generate("eks", 8011, made)
    paths = ["billing/focus_aws.csv", "telemetry/metrics.om.gz", "telemetry/gateway-access.log",
             "profiles/h100_qwen1.5-0.5b-chat.json.gz"]
    (tmp_path / "init").mkdir()
    found = discover([str(made / p) for p in paths], tmp_path / "init", "eks")
    (tmp_path / "init" / "case.toml").write_text(found.text)
    assert tomllib.loads(found.text)["services"]["gateway"] == {"tags": {"eks:nodegroup-name": "cpu-gateway"}}
    assert ("# no pod serves it (a CPU tier): it claims the lines tagged eks:nodegroup-name = cpu-gateway, the tag "
            "the most spend on instances without GPUs carries (17.14 of 17.14 in scope); others: eks:cluster-name = "
            "inference-prod 17.14 (also on 2,896.15 of GPU lines and lines of no instance)") in found.text
    done = subprocess.run([sys.executable, "-m", "audit", "validate", str(tmp_path / "init")], capture_output=True,
                          text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0
    assert [w for w in done.stderr.splitlines() if "gateway" in w] == []


def test_an_account_s_gpu_share_sets_charges_against_charges_before_credits_and_tax(tmp_path):
    """cloudgen EKS 9621 with credits and tax. From the raw file (EffectiveCost), account 111111111111:
    GPU instance-hours 2641.92 (p5.48xlarge) + 251.832 (g6e.12xlarge) = 2,893.75; its charges 2,947.92
    before its credits (−727.722, −723.438 of them on the GPU instances) and tax (+260.289), 2,480.49
    after them. Before: "GPU 2,893.75 of 2,480.49 USD", the GPU lines before their credits against the
    account after its credits and tax (a share above 1); and the GPU instances' credits counted as spend
    on instances without GPUs (the gateway's claim: "12.85 of -710.59", its c7i credit netted). Now both sides of each share
    are charges before credits and tax, the total after them beside."""
    import decimal

    from benchmarks.cloudgen.generate import generate

    made = tmp_path / "eks"
    with decimal.localcontext():  # cloudgen sets its own precision
        generate("eks", 9621, made, adjustments=True)
    (tmp_path / "init").mkdir()
    found = discover([str(made / p) for p in ("billing/focus_aws.csv", "telemetry/gateway-access.log")],
                     tmp_path / "init", "eks")
    assert ("#   111111111111: GPU 2,893.75 of 2,947.92 USD before credits and tax (2,480.49 after them), "
            "480.0 GPU-hours\n#   222222222222: no GPU spend, 4.84 USD before credits and tax (4.06 after them), "
            "outside the scope\n") in found.text
    assert "the tag the most spend on instances without GPUs carries (17.14 of 17.14 in scope)" in found.text


@pytest.mark.parametrize("billing, path", [("focus", "billing/focus_gcp.csv"),
                                           ("native", "billing/gcp_billing_export_resource_v1.jsonl")])
def test_gke_gpu_spend_is_the_audit_s_gpu_compute_and_its_node_pool_is_claimed(tmp_path, billing, path):
    """cloudgen GKE 10206, machines billed in parts: the audit's gpu_compute is 4,414.78 (H100 GPU
    3,761.875584 + L4 GPU 53.76384 + A3 Core 252.3456 + A3 Ram 304.521984 + G2 Core 28.786176 + G2 Ram
    13.487616). Before, on the FOCUS bill (no machine type named), "GPU 3,815.64", the GPU meters alone:
    the A3 / G2 Core and Ram lines are the GPU machines' parts only by the telemetry's nodes, which the
    audit classifies by and init did not. And on both forms the gateway was written commented out ("no
    instance line carries a tag"): the n2 default-pool's Core and Ram lines name no instance type (they
    are instance lines by their ResourceId, a compute instance); now its node pool's tag is claimed, as
    the generator's case.toml has it."""
    import decimal

    from benchmarks.cloudgen.generate import generate

    made = tmp_path / "gke"
    with decimal.localcontext():  # cloudgen sets its own precision
        generate("gke", 10206, made, billing=billing)
    (tmp_path / "init").mkdir()
    found = discover([str(made / p) for p in (path, "telemetry/metrics.om.gz", "telemetry/gateway-access.log")],
                     tmp_path / "init", "gke")
    assert "#   acme-inference-prod: GPU 4,414.78 of 4,484.44 USD, 480.0 GPU-hours\n" in found.text
    assert tomllib.loads(found.text)["services"]["gateway"] == {"tags": {"goog-k8s-node-pool-name": "default-pool"}}
    assert ("# no pod serves it (a CPU tier): it claims the lines tagged goog-k8s-node-pool-name = default-pool, the "
            "tag the most spend on instances without GPUs carries (18.65 of 18.65 in scope); others: "
            "goog-k8s-cluster-name = inference 18.65 (also on 4,414.78 of GPU lines and lines of no instance)\n"
            ) in found.text


def test_aks_cpu_tier_claims_its_pool_of_its_vms_spend_not_an_operation_id(tmp_path):
    """cloudgen AKS 10202 with a reservation: the system pool's D8ads v5 VMs, 19.776, carry
    aks-managed-poolName = system and aks-managed-createOperationID = 59115b41 alike. Before: "19.78 of
    106.67 in scope", every Azure line of the scope counted as an instance's (a meter name reads as an
    instance type: NAT gateway, Log Analytics, load balancer, the AKS fee, bandwidth, the unused
    reservation), and the operation id claimed (the first key of the same spend); now the VMs' hours
    alone, and the pool's name (an operation id or hash is volatile: it changes with the nodes)."""
    import decimal

    from benchmarks.cloudgen.generate import generate

    made = tmp_path / "aks"
    with decimal.localcontext():  # cloudgen sets its own precision
        generate("aks", 10202, made, commitments=True)
    (tmp_path / "init").mkdir()
    paths = ("billing/focus_azure.csv", "telemetry/metrics.om.gz", "telemetry/gateway-access.log")
    found = discover([str(made / p) for p in paths], tmp_path / "init", "aks")
    assert tomllib.loads(found.text)["services"]["gateway"] == {"tags": {"aks-managed-poolName": "system"}}
    assert ("# no pod serves it (a CPU tier): it claims the lines tagged aks-managed-poolName = system, the tag the "
            "most spend on instances without GPUs carries (19.78 of 19.78 in scope); others: "
            "aks-managed-createOperationID = 59115b41 19.78 (volatile), aks-managed-orchestrator = Kubernetes:1.31.4 "
            "19.78 (also on 3,934.16 of GPU lines and lines of no instance)\n") in found.text
