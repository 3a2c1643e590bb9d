"""connectors.objectstore against moto in server mode on 127.0.0.1, faults injected by a proxy.

The session's moto server (tests/connectors/conftest.py) holds the test data, uploaded straight
to it; the code under test talks to a ``FaultProxy`` in front of it (``endpoint_url``), which
counts requests by kind and answers chosen ones with faults (tests/servers/moto.py).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import time
import traceback
import uuid
from datetime import datetime, timezone
from pathlib import Path

import boto3
import pytest

import connectors.objectstore as objectstore
import connectors.objectstore_cache as objectstore_cache
import connectors.objectstore_faults as objectstore_faults
from audit.audit_json import to_dict
from audit.case import load_case
from audit.pipeline import run_audit
from connectors.base import ReadContext, SourceSpec
from connectors.billing.focus import FocusConnector
from connectors.errors import FatalSourceError, InputError, RetriableSourceError
from tests.builders import billing_case
from tests.paths import DATA
from tests.servers.moto import FAKE_KEY_ID, FAKE_SECRET, FAKE_TOKEN, FaultProxy, Moto, ProxyHandler, put, serve_proxy

pytestmark = pytest.mark.services

FOCUS_SAMPLE = DATA / "billing" / "focus_sample_data" / "focus_sample_1000.csv"


@pytest.fixture
def proxy(moto):
    """A FaultProxy on a free port of 127.0.0.1 in front of moto."""
    yield from serve_proxy(moto.port, ProxyHandler)


# --------------------------------------------------------------------------------------------
# helpers


def files_under(folder: Path) -> dict[str, bytes]:
    """relative path → content of every file below ``folder``."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def via(proxy: FaultProxy, **extra) -> dict:
    return {"endpoint_url": proxy.url, **extra}


# --------------------------------------------------------------------------------------------
# objects, prefixes, pagination, cache


def test_single_object_is_downloaded_under_its_own_name(s3, bucket, proxy):
    put(s3, bucket, "exports/focus/sample.csv.gz", b"\x1f\x8b-not-really")
    local = objectstore.materialise(f"s3://{bucket}/exports/focus/sample.csv.gz", via(proxy))
    assert local.name == "sample.csv.gz" and local.read_bytes() == b"\x1f\x8b-not-really"
    assert (proxy.count("head"), proxy.count("get"), proxy.count("list")) == (1, 1, 0)


def test_prefix_becomes_a_folder_laid_out_like_it_with_pagination(s3, bucket, proxy, monkeypatch):
    monkeypatch.setattr(objectstore, "PAGE_SIZE", 2)
    keys = {"a.csv": "1", "b.csv": "2", "sub/c.csv": "3", "sub/deeper/d.csv": "4", "e.csv": "5"}
    for key, body in keys.items():
        put(s3, bucket, f"focus/{key}", body)
    put(s3, bucket, "focus/empty-folder/", b"")  # console folder marker: skipped
    put(s3, bucket, "other/x.csv", "outside")
    for uri in (f"s3://{bucket}/focus/", f"s3://{bucket}/focus"):
        local = objectstore.materialise(uri, via(proxy))
        assert local.name == "focus"
        assert files_under(local) == {k: v.encode() for k, v in keys.items()}
    assert proxy.count("list") == 2 * 3  # six keys, two a page, for each of the two uris
    assert proxy.count("get") == 5       # the second uri read everything from the cache


def test_unchanged_etag_is_not_downloaded_again(s3, bucket, proxy):
    for i in range(3):
        put(s3, bucket, f"p/{i}.csv", f"v1-{i}")
    first = objectstore.materialise(f"s3://{bucket}/p/", via(proxy))
    assert proxy.count("get") == 3
    again = objectstore.materialise(f"s3://{bucket}/p/", via(proxy))
    assert proxy.count("get") == 3 and again == first  # nothing downloaded, same view
    put(s3, bucket, "p/1.csv", "v2-1")  # a new ETag for one object
    third = objectstore.materialise(f"s3://{bucket}/p/", via(proxy))
    assert proxy.count("get") == 4 and third != first
    assert files_under(third)["1.csv"] == b"v2-1" and files_under(first)["1.csv"] == b"v1-1"
    single = objectstore.materialise(f"s3://{bucket}/p/0.csv", via(proxy))
    assert proxy.count("get") == 4 and single.read_bytes() == b"v1-0"  # HEAD only, cache hit
    leftovers = [p for p in Path(os.environ["COSTAUDIT_CACHE"]).rglob("*") if ".part-" in p.name]
    assert leftovers == []


def test_cache_lives_under_costaudit_cache(s3, bucket, proxy):
    put(s3, bucket, "one.csv", "x")
    local = objectstore.materialise(f"s3://{bucket}/one.csv", via(proxy))
    assert Path(os.environ["COSTAUDIT_CACHE"]) / "s3" in local.parents


# --------------------------------------------------------------------------------------------
# Cost and Usage Report exports: the newest manifest decides


def legacy_manifest(bucket: str, report: str, keys: list[str]) -> str:
    return json.dumps({"assemblyId": keys[0].split("/")[-2], "bucket": bucket, "reportKeys": keys,
                       "billingPeriod": {"start": "20240901T000000.000Z", "end": "20241001T000000.000Z"}})


def test_legacy_cur_reads_only_the_newest_assembly(s3, bucket, proxy):
    period = "cur/daily/20240901-20241001"
    old = [f"{period}/asm-old/daily-{i}.csv.gz" for i in (1, 2)]
    new = [f"{period}/asm-new/daily-{i}.csv.gz" for i in (1, 2, 3)]
    for key in old + new:
        put(s3, bucket, key, key)
    put(s3, bucket, f"{period}/daily-Manifest.json", legacy_manifest(bucket, "daily", new))
    put(s3, bucket, "cur/daily/cost_and_usage_data_status/status.parquet", "athena status")
    local = objectstore.materialise(f"s3://{bucket}/cur/", via(proxy))
    rel = sorted(files_under(local))
    assert rel == sorted([k.removeprefix("cur/") for k in new] + ["daily/20240901-20241001/daily-Manifest.json"])
    assert proxy.count("get") == 4  # the manifest and the three files it names, nothing of asm-old


def test_newest_of_several_manifests_wins_per_period(s3, bucket, proxy):
    period = "cur/daily/20240901-20241001"
    old, new = [f"{period}/asm-1/daily-1.csv.gz"], [f"{period}/asm-2/daily-1.csv.gz"]
    for key in old + new:
        put(s3, bucket, key, key)
    put(s3, bucket, f"{period}/asm-1/daily-Manifest.json", legacy_manifest(bucket, "daily", old))
    time.sleep(1.1)  # S3 LastModified has one-second resolution
    put(s3, bucket, f"{period}/asm-2/daily-Manifest.json", legacy_manifest(bucket, "daily", new))
    august = "cur/daily/20240801-20240901/asm-0/daily-1.csv.gz"
    put(s3, bucket, august, "august")
    put(s3, bucket, "cur/daily/20240801-20240901/daily-Manifest.json", legacy_manifest(bucket, "daily", [august]))
    local = objectstore.materialise(f"s3://{bucket}/cur/daily/", via(proxy))
    data = sorted(k for k in files_under(local) if not k.endswith("Manifest.json"))
    assert data == ["20240801-20240901/asm-0/daily-1.csv.gz", "20240901-20241001/asm-2/daily-1.csv.gz"]


def test_cur2_manifest_names_data_files_by_uri(s3, bucket, proxy):
    base = "exports/cur2"
    files = {"2024-09": [f"{base}/data/BILLING_PERIOD=2024-09/cur2-0000{i}.snappy.parquet" for i in (1, 2)],
             "2024-10": [f"{base}/data/BILLING_PERIOD=2024-10/cur2-00001.snappy.parquet"]}
    stale = f"{base}/data/BILLING_PERIOD=2024-09/cur2-00003.snappy.parquet"  # not in the manifest
    for key in [*files["2024-09"], *files["2024-10"], stale]:
        put(s3, bucket, key, key)
    for month, keys in files.items():
        doc = {"executionId": f"exec-{month}", "billingPeriod": month,
               "dataFiles": [f"s3://{bucket}/{k}" for k in keys]}
        put(s3, bucket, f"{base}/metadata/BILLING_PERIOD={month}/cur2-Manifest.json", json.dumps(doc))
    local = objectstore.materialise(f"s3://{bucket}/{base}/", via(proxy))
    data = sorted(k for k in files_under(local) if k.startswith("data/"))
    assert data == sorted(k.removeprefix(f"{base}/") for k in files["2024-09"] + files["2024-10"])
    assert proxy.count("get") == 5


def test_manifest_naming_an_unlisted_file_is_retriable(s3, bucket, proxy):
    put(s3, bucket, "cur/r/20240901-20241001/r-Manifest.json",
        legacy_manifest(bucket, "r", ["cur/r/20240901-20241001/asm/r-1.csv.gz"]))
    with pytest.raises(RetriableSourceError, match="not in the listing"):
        objectstore.materialise(f"s3://{bucket}/cur/", via(proxy))


def test_bad_manifests_are_input_errors_naming_them(s3, bucket, proxy):
    put(s3, bucket, "a/r/20240901-20241001/r-Manifest.json", "{not json")
    with pytest.raises(InputError, match=rf"s3://{bucket}/a/r/20240901-20241001/r-Manifest.json: .*not valid JSON"):
        objectstore.materialise(f"s3://{bucket}/a/", via(proxy))
    put(s3, bucket, "b/r/20240901-20241001/r-Manifest.json", json.dumps({"assemblyId": "x"}))
    with pytest.raises(InputError, match="manifest names no files"):
        objectstore.materialise(f"s3://{bucket}/b/", via(proxy))
    put(s3, bucket, "c/metadata/BILLING_PERIOD=2024-09/c-Manifest.json", json.dumps({"dataFiles": []}))
    local = objectstore.materialise(f"s3://{bucket}/c/", via(proxy))  # a period without charges
    assert list(files_under(local)) == ["metadata/BILLING_PERIOD=2024-09/c-Manifest.json"]


# --------------------------------------------------------------------------------------------
# transient faults, injected at the server side


@pytest.mark.parametrize("kind, fault", [("get", "slowdown"), ("get", "internal"), ("get", "drop"),
                                         ("list", "slowdown"), ("list", "drop"), ("head", "internal")])
def test_transient_faults_are_retried_and_the_download_succeeds(s3, bucket, proxy, kind, fault):
    put(s3, bucket, "p/a.csv", "alpha")
    put(s3, bucket, "p/b.csv", "beta")
    proxy.fail(kind, fault, times=2)
    uri = f"s3://{bucket}/p/a.csv" if kind == "head" else f"s3://{bucket}/p/"
    local = objectstore.materialise(uri, via(proxy))
    content = local.read_bytes() if local.is_file() else files_under(local)
    assert content in (b"alpha", {"a.csv": b"alpha", "b.csv": b"beta"})
    assert proxy.count(kind, fault) == 2 and proxy.count(kind, "forwarded") >= 1


def test_permanently_failing_server_gives_retriable_error_after_the_retries(s3, bucket, proxy):
    put(s3, bucket, "p/a.csv", "alpha")
    proxy.fail("get", "slowdown", times=None)
    with pytest.raises(RetriableSourceError, match=f"s3://{bucket}/p/a.csv.*SlowDown") as caught:
        objectstore.materialise(f"s3://{bucket}/p/", via(proxy))
    assert proxy.count("get") == 3  # the first try and botocore's two standard-mode retries
    assert "after 3 attempts" in str(caught.value)
    assert not [p for p in Path(os.environ["COSTAUDIT_CACHE"]).rglob("*") if p.is_file()]


def test_truncated_body_is_retriable_and_leaves_no_partial_file(s3, bucket, proxy):
    put(s3, bucket, "p/big.csv", "x" * 300_000)
    proxy.fail("get", "truncate", times=1)
    with pytest.raises(RetriableSourceError):
        objectstore.materialise(f"s3://{bucket}/p/big.csv", via(proxy))
    assert not [p for p in Path(os.environ["COSTAUDIT_CACHE"]).rglob("*") if p.is_file()]
    local = objectstore.materialise(f"s3://{bucket}/p/big.csv", via(proxy))  # the next try succeeds
    assert local.stat().st_size == 300_000


def focus_spec(uri: str, proxy: FaultProxy) -> SourceSpec:
    return SourceSpec("focus-s3", "billing", "focus", None, {"uri": uri, "endpoint_url": proxy.url})


CTX = ReadContext(datetime(2024, 9, 1, tzinfo=timezone.utc), datetime(2024, 10, 1, tzinfo=timezone.utc), "USD")


def test_connector_retries_a_fault_botocore_cannot_and_reads(s3, bucket, proxy, monkeypatch):
    put(s3, bucket, "focus/sample.csv", FOCUS_SAMPLE.read_bytes())
    monkeypatch.setattr(FocusConnector, "backoff_seconds", 0.01)
    proxy.fail("get", "truncate", times=1)  # a broken body: botocore does not retry, the base class does
    frame = FocusConnector(focus_spec(f"s3://{bucket}/focus/sample.csv", proxy), CTX).read()
    assert frame.rows == 1000 and len(frame.tables["lines"]) > 0
    assert proxy.count("get", "truncate") == 1 and proxy.count("get", "forwarded") == 1


def test_connector_gives_up_with_retriable_error(s3, bucket, proxy, monkeypatch):
    put(s3, bucket, "focus/sample.csv", FOCUS_SAMPLE.read_bytes())
    monkeypatch.setattr(FocusConnector, "backoff_seconds", 0.01)
    monkeypatch.setattr(FocusConnector, "retries", 1)
    proxy.fail("get", "internal", times=None)
    with pytest.raises(RetriableSourceError, match="InternalError"):
        FocusConnector(focus_spec(f"s3://{bucket}/focus/sample.csv", proxy), CTX).read()
    assert proxy.count("get") == 2 * 3  # two locate attempts of three botocore attempts each


# --------------------------------------------------------------------------------------------
# missing things, access denied


def test_missing_bucket_and_empty_prefix_are_input_errors(s3, bucket, proxy):
    with pytest.raises(InputError, match=r"s3://no-such-bucket-costaudit/x/: .*no such bucket"):
        objectstore.materialise("s3://no-such-bucket-costaudit/x/", via(proxy))
    with pytest.raises(InputError, match=rf"s3://{bucket}/nothing/: no objects"):
        objectstore.materialise(f"s3://{bucket}/nothing", via(proxy))
    with pytest.raises(InputError, match="not an s3:// uri"):
        objectstore.materialise(f"gs://{bucket}/x", via(proxy))


def test_access_denied_on_listing_names_bucket_prefix_and_permission(s3, bucket, proxy):
    put(s3, bucket, "cur/a.csv", "a")
    proxy.fail("list", "denied", times=None)
    with pytest.raises(FatalSourceError) as caught:
        objectstore.materialise(f"s3://{bucket}/cur/", via(proxy))
    text = str(caught.value)
    assert bucket in text and "'cur/'" in text and f"s3:ListBucket on arn:aws:s3:::{bucket}" in text
    assert proxy.count("list") == 1  # a 403 is not retried


def test_access_denied_on_reading_names_the_object_permission(s3, bucket, proxy):
    put(s3, bucket, "cur/a.csv", "a")
    proxy.fail("get", "denied", times=None)
    with pytest.raises(FatalSourceError, match=rf"s3:GetObject on arn:aws:s3:::{bucket}/cur/\*"):
        objectstore.materialise(f"s3://{bucket}/cur/", via(proxy))
    proxy.fail("head", "denied", times=None)
    with pytest.raises(FatalSourceError, match=rf"s3:GetObject on arn:aws:s3:::{bucket}/cur/a.csv"):
        objectstore.materialise(f"s3://{bucket}/cur/a.csv", via(proxy))


@pytest.fixture
def iam_enforced(moto, s3):
    """Make moto enforce IAM (after three unauthenticated set-up calls); restore afterwards.

    Yields a boto3 session holding the keys of an IAM user allowed everything.
    """
    moto.post("/moto-api/reset-auth", b"3")
    try:
        iam = boto3.client("iam", endpoint_url=moto.url, region_name="us-east-1")
        iam.create_user(UserName="admin")
        iam.put_user_policy(UserName="admin", PolicyName="all", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="admin")["AccessKey"]
        iam.close()
        admin = boto3.session.Session(aws_access_key_id=key["AccessKeyId"],
                                      aws_secret_access_key=key["SecretAccessKey"], region_name="us-east-1")
        yield admin
    finally:
        moto.post("/moto-api/reset-auth", b"inf")


def iam_user(admin, moto: Moto, name: str, statements: list[dict]) -> dict:
    """An IAM user with ``statements`` as its only policy; returns its access key."""
    iam = admin.client("iam", endpoint_url=moto.url)
    try:
        iam.create_user(UserName=name)
        iam.put_user_policy(UserName=name, PolicyName="read", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": statements}))
        return iam.create_access_key(UserName=name)["AccessKey"]
    finally:
        iam.close()


def test_iam_policies_enforced_by_moto_name_the_missing_permission(moto, iam_enforced, proxy, monkeypatch):
    name = f"costaudit-iam-{uuid.uuid4().hex[:8]}"
    admin_s3 = iam_enforced.client("s3", endpoint_url=moto.url)
    admin_s3.create_bucket(Bucket=name)
    put(admin_s3, name, "cur/a.csv", "a")
    admin_s3.close()
    get_only = iam_user(iam_enforced, moto, "get-only", [
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{name}/cur/*"}])
    list_only = iam_user(iam_enforced, moto, "list-only", [
        {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{name}"}])
    monkeypatch.delenv("AWS_SESSION_TOKEN")
    use_keys(monkeypatch, get_only)
    assert objectstore.materialise(f"s3://{name}/cur/a.csv", via(proxy)).read_bytes() == b"a"
    with pytest.raises(FatalSourceError, match=rf"listing s3://{name}/cur/.*s3:ListBucket on arn:aws:s3:::{name}"):
        objectstore.materialise(f"s3://{name}/cur/", via(proxy))
    use_keys(monkeypatch, list_only)
    _clear_cache()  # else the copy fetched above is served: its ETag has not changed
    denied_read = rf"reading s3://{name}/cur/a.csv.*s3:GetObject on arn:aws:s3:::{name}/cur/\*"
    with pytest.raises(FatalSourceError, match=denied_read):
        objectstore.materialise(f"s3://{name}/cur/", via(proxy))


def use_keys(monkeypatch, key: dict) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])


# --------------------------------------------------------------------------------------------
# credentials: only from the chain, never shown


def exception_texts(exc: BaseException) -> str:
    """str, repr and the full formatted traceback (causes and contexts included)."""
    return "\n".join([str(exc), repr(exc), "".join(traceback.format_exception(exc))])


def test_credentials_never_appear_in_errors_or_logs(s3, bucket, proxy, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setattr(objectstore_faults, "MAX_RETRIES", 1)
    put(s3, bucket, "p/a.csv", "alpha")
    objectstore.materialise(f"s3://{bucket}/p/", via(proxy))  # a success, with DEBUG logs
    texts = []
    scenarios = [
        (lambda: proxy.fail("list", "denied"), f"s3://{bucket}/p/"),
        (lambda: proxy.fail("get", "slowdown", times=None), f"s3://{bucket}/p/a.csv"),
        (lambda: proxy.fail("head", "drop", times=None), f"s3://{bucket}/p/a.csv"),
        (lambda: None, "s3://no-such-bucket-costaudit/p/"),
    ]
    for arrange, uri in scenarios:
        proxy.reset()
        arrange()
        _clear_cache()  # so that every scenario reaches the server
        with pytest.raises((FatalSourceError, RetriableSourceError, InputError)) as caught:
            objectstore.materialise(uri, via(proxy))
        texts.append(exception_texts(caught.value))
    logged = caplog.text + "\n".join(r.getMessage() for r in caplog.records)
    assert "botocore.auth" in {r.name for r in caplog.records}  # the signing was logged, and masked
    assert "Credential=***" in logged
    for secret in (FAKE_KEY_ID, FAKE_SECRET, FAKE_TOKEN, FAKE_TOKEN[:24], FAKE_SECRET[:16]):
        assert secret not in logged
        for text in texts:
            assert secret not in text


def _clear_cache() -> None:
    """Empty the cache of this test."""
    shutil.rmtree(objectstore_cache.cache_root(), ignore_errors=True)


def test_credentials_in_options_are_refused_without_echoing_them(proxy):
    with pytest.raises(InputError) as caught:
        objectstore.materialise("s3://bucket-x/k.csv", {"aws_secret_access_key": FAKE_SECRET})
    assert "never reads credentials" in str(caught.value) and FAKE_SECRET not in exception_texts(caught.value)
    with pytest.raises(InputError, match="credentials may not be written into the uri") as caught:
        objectstore.materialise(f"s3://{FAKE_KEY_ID}:{FAKE_SECRET}@bucket-x/k.csv", {})
    assert FAKE_SECRET not in exception_texts(caught.value) and FAKE_KEY_ID not in exception_texts(caught.value)


def test_profile_from_shared_config_is_used(s3, bucket, proxy, tmp_path, monkeypatch):
    put(s3, bucket, "p/a.csv", "alpha")
    (tmp_path / "credentials").write_text(
        f"[audit]\naws_access_key_id = {FAKE_KEY_ID}\naws_secret_access_key = {FAKE_SECRET}\n")
    (tmp_path / "config").write_text("[profile audit]\nregion = eu-west-1\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    local = objectstore.materialise(f"s3://{bucket}/p/a.csv", via(proxy, profile="audit"))
    assert local.read_bytes() == b"alpha"
    with pytest.raises(InputError, match="AWS profile 'nope' not found"):
        objectstore.materialise(f"s3://{bucket}/p/a.csv", via(proxy, profile="nope"))
    with pytest.raises(FatalSourceError, match="no usable AWS credentials"):
        objectstore.materialise(f"s3://{bucket}/p/a.csv", via(proxy))


# --------------------------------------------------------------------------------------------
# end to end: a case whose invoice lies in S3


def test_case_with_s3_invoice_audits_to_the_provenance_total(s3, bucket, moto, tmp_path):
    put(s3, bucket, "focus_sample_1000.csv", FOCUS_SAMPLE.read_bytes())
    billing_case(tmp_path, "focus-s3", ("2024-09-01", "2024-10-01"), "billed", format="focus",
                 uri=f"s3://{bucket}/focus_sample_1000.csv", endpoint_url=moto.url)
    doc = to_dict(run_audit(load_case(tmp_path)))
    assert doc["total"] == "20.52" and doc["invoice_total"] == "20.52"
