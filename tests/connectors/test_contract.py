"""Every registered connector passes the same contract (STYLE habit 14).

The suite runs over ``connectors.registry.names()``. Each format reads a small sample: the formats
in OFFLINE a file (or a folder) from fixtures/, tests/ or the shared data, or one built from them;
the formats in REMOTE also, or only, through a real local server of the session (Prometheus, moto's
Athena, the BigQuery emulator); the formats in VIA_S3 also from an object in moto's S3. A format
that is registered but in neither OFFLINE nor REMOTE fails the suite, so that a new connector
cannot be forgotten.

On every sample: its tables validate against their schemas (the base class validates on read), the
window is respected, a transient fault is retried, and a secret planted in every environment
variable a connector reads credentials from appears nowhere: not in the repr or str of the
connector, of what it holds, or of its spec, not in an error (read or check) nor in a log line.
A secret written into an S3 uri is masked in the error that refuses it.
"""
from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import pytest

from connectors import registry
from connectors.base import Connector, ReadContext, SourceSpec
from connectors.errors import RetriableSourceError, SourceError
from tests.builders import profile_bundle, query_range_dump
from tests.paths import DATA, FIXTURES
from tests.servers import athena, bigquery
from tests.servers.gcp_export import JUNE, MAY, as_float_json, bq_schema, export_rows, write_ndjson
from tests.servers.moto import FAKE_KEY_ID, put
from tests.servers.prometheus import SERVING, SMALL, FaultProxy

UTC = timezone.utc
WIDE = (datetime(2000, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC))
HOUR_2025 = (datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 1, 1, 1, tzinfo=UTC))
FOCUS_SAMPLE = DATA / "billing" / "focus_sample_data" / "focus_sample_1000.csv"
KINETO_SAMPLE = DATA / "traces" / "tracelens" / "h100_bert-small-uncased.json.gz"
OFFLINE_TELEMETRY = FIXTURES / "offline_telemetry"
SECRET = "s3cr3t-Contract-9f2c"
TOKEN_ENV = "COSTAUDIT_CONTRACT_TOKEN"
#: every variable a connector takes credentials from (token_env names the first)
SECRET_VARIABLES = (TOKEN_ENV, "COSTAUDIT_PROMETHEUS_TOKEN", "COSTAUDIT_PROMETHEUS_PASSWORD",
                    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
GCP_TABLE = f"{bigquery.PROJECT}.{bigquery.DATASET}.contract_export"


@dataclass(frozen=True)
class Sample:
    """A local sample: ``path`` is a file or folder, or builds one in the folder it is given."""

    kind: str
    path: Path | Callable[[Path], Path]
    window: tuple[datetime, datetime] = WIDE
    options: tuple[tuple[str, object], ...] = ()
    step: int | None = None

    def where(self, folder: Path) -> Path:
        """The sample's path (built into ``folder`` when it is built)."""
        return self.path if isinstance(self.path, Path) else self.path(folder)


def gcp_rows() -> list[dict]:
    """Sixty rows of the synthetic GCP export, plus its two rows outside May 2024."""
    rows = export_rows()
    return rows[:60] + rows[-2:]


OFFLINE: dict[str, Sample] = {
    "focus": Sample("billing", FOCUS_SAMPLE, (datetime(2024, 9, 10, tzinfo=UTC), datetime(2024, 9, 20, tzinfo=UTC))),
    "cur": Sample("billing", DATA / "billing" / "focus_converters" / "aws_cur1_anonymized_2023-11.csv",
                  (datetime(2023, 11, 5, tzinfo=UTC), datetime(2023, 11, 20, tzinfo=UTC))),
    "azure": Sample("billing", DATA / "billing" / "msft_finops_toolkit" / "EA_AmortizedCost_Small.csv",
                    (datetime(2023, 9, 4, tzinfo=UTC), datetime(2023, 9, 10, tzinfo=UTC))),
    "gcp_billing": Sample("billing", lambda folder: write_ndjson(gcp_rows(), folder / "export-000000000000.json"),
                          (MAY, JUNE)),
    "openmetrics": Sample("telemetry", SMALL),
    "prom_dump": Sample("telemetry", lambda folder: query_range_dump(SERVING, folder / "dump.json"), HOUR_2025,
                        step=300),
    "nvidia_smi": Sample("telemetry", OFFLINE_TELEMETRY / "nvidia_smi.csv", options=(("node", "n1"),)),
    "dcgmi": Sample("telemetry", OFFLINE_TELEMETRY / "dcgmi_dmon.txt",
                    options=(("start", "2026-09-01T08:00:10Z"), ("interval_ms", 30000))),
    "sacct": Sample("telemetry", OFFLINE_TELEMETRY / "sacct.txt"),
    "opencost": Sample("telemetry", OFFLINE_TELEMETRY / "opencost_allocation.json"),
    "access_log": Sample("telemetry",
                         DATA / "billing" / "aws_wa_labs" / "workload_efficiency_step1_accesslog_2019-11-26.parquet",
                         (datetime(2019, 11, 26, 1, tzinfo=UTC), datetime(2019, 11, 26, 5, tzinfo=UTC)),
                         (("service", "web"),)),
    "kineto": Sample("profiles", KINETO_SAMPLE, options=(("service", "x"),)),
    "nsys": Sample("profiles", DATA / "traces" / "nsys-extrap" / "profile16.sqlite", options=(("service", "x"),)),
    "profile_bundle": Sample("profiles", lambda folder: profile_bundle(KINETO_SAMPLE, folder / "bundle"),
                             options=(("service", "x"),)),
}
#: the formats read through a remote service (in place): each reads from a real local server
REMOTE = ("prometheus", "athena", "gcp_billing")
#: file formats also read from an s3:// uri (moto)
VIA_S3 = ("focus", "cur")


@dataclass
class Source:
    """How a test gets connectors of one sample: ``make`` a working one (extra options given),
    ``broken`` one whose read fails."""

    make: Callable[[dict], Connector]
    broken: Callable[[], Connector]


def connector(name: str, spec: SourceSpec, window, step: int | None = None) -> Connector:
    """The registered connector ``name`` over ``spec`` and ``window``, in USD."""
    return registry.resolve(name)(spec, ReadContext(window[0], window[1], "USD", step))


def offline(name: str, folder: Path) -> Source:
    """The local sample of ``name``, and a copy of it with garbage for content."""
    sample = OFFLINE[name]
    path = sample.where(folder)

    def make(extra: dict) -> Connector:
        spec = SourceSpec(f"{name}-sample", sample.kind, name, path, {**dict(sample.options), **extra})
        return connector(name, spec, sample.window, sample.step)

    def broken() -> Connector:
        spec = SourceSpec(f"{name}-broken", sample.kind, name, garbage(path, folder / "garbage"), dict(sample.options))
        return connector(name, spec, sample.window, sample.step)
    return Source(make, broken)


def garbage(path: Path, folder: Path) -> Path:
    """A file of the sample's name holding no such data (in a folder of that name, for a folder)."""
    folder.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        (folder / path.name).mkdir(exist_ok=True)
        (folder / path.name / "profile.json").write_text("{not json")
        return folder / path.name
    (folder / path.name).write_bytes(b"\x00\x01 this is not a sample at all\n" * 3)
    return folder / path.name


# --- the remote samples ------------------------------------------------------------------------

def over_prometheus(request) -> Source:
    """fixtures/telemetry_small in the session's Prometheus; broken: every answer a 401."""
    prom = request.getfixturevalue("prom")

    def spec(url: str, extra: dict) -> SourceSpec:
        return SourceSpec("prom", "telemetry", "prometheus", None, {"url": url, **extra})

    def broken() -> Connector:
        front = FaultProxy(prom.url)
        front.always = (401, b'{"status": "error", "errorType": "unauthorized", "error": "bad token"}')
        request.addfinalizer(front.close)
        return connector("prometheus", spec(front.url, {"token_env": TOKEN_ENV}), HOUR_2025, 900)
    return Source(lambda extra: connector("prometheus", spec(prom.url, extra), HOUR_2025, 900), broken)


def over_athena(request) -> Source:
    """The workshop CUR's hour through moto's Athena (results seeded); broken: a missing table."""
    moto = request.getfixturevalue("moto")
    request.getfixturevalue("aws_env")
    monkeypatch = request.getfixturevalue("monkeypatch")
    monkeypatch.setattr("connectors.billing.athena.POLL_FIRST_S", 0.01)
    athena.create_table(moto)

    def make(extra: dict) -> Connector:
        athena.seed(moto, *athena.local_rows(athena.HOUR))  # one answer for the one query a read runs
        spec = SourceSpec("athena-cur", "billing", "athena", None, athena.options(moto.url, **extra))
        return connector("athena", spec, athena.HOUR)

    def broken() -> Connector:
        options = athena.options(moto.url, table=f"{athena.DATABASE}.no_such_table")
        return connector("athena", SourceSpec("athena-cur", "billing", "athena", None, options), athena.HOUR)
    return Source(make, broken)


@pytest.fixture(scope="module")
def gcp_table(emulator) -> int:
    """The GCP sample rows as a table in the session's BigQuery emulator; the emulator's port."""
    client = bigquery.client_for(emulator)
    try:
        client.create_dataset(f"{bigquery.PROJECT}.{bigquery.DATASET}", exists_ok=True)
        bigquery.load_table(client, GCP_TABLE, [as_float_json(r) for r in gcp_rows()], bq_schema())
    finally:
        client.close()
    return emulator


def over_bigquery(request) -> Source:
    """The GCP sample rows read in place from the BigQuery emulator; broken: a missing table."""
    port = request.getfixturevalue("gcp_table")

    def spec(table: str, extra: dict) -> SourceSpec:
        options = {"table": table, "project": bigquery.PROJECT, "api_endpoint": f"http://127.0.0.1:{port}"}
        return SourceSpec("gcp", "billing", "gcp_billing", None, {**options, **extra})

    def broken() -> Connector:
        return connector("gcp_billing", spec(f"{bigquery.PROJECT}.{bigquery.DATASET}.no_such_table", {}), (MAY, JUNE))
    return Source(lambda extra: connector("gcp_billing", spec(GCP_TABLE, extra), (MAY, JUNE)), broken)


REMOTE_SOURCES = {"prometheus": over_prometheus, "athena": over_athena, "gcp_billing": over_bigquery}


def over_s3(name: str, request) -> Source:
    """The local sample as an object in moto's S3; broken: credentials written into the uri."""
    moto, s3, bucket = (request.getfixturevalue(f) for f in ("moto", "s3", "bucket"))
    sample = OFFLINE[name]
    path = sample.where(request.getfixturevalue("tmp_path"))
    put(s3, bucket, path.name, path.read_bytes())

    def spec(uri: str, extra: dict) -> SourceSpec:
        return SourceSpec(f"{name}-s3", sample.kind, name, None,
                          {**dict(sample.options), "uri": uri, "endpoint_url": moto.url, **extra})

    def broken() -> Connector:
        uri = f"s3://{FAKE_KEY_ID}:{SECRET}@{bucket}/{path.name}"
        return connector(name, spec(uri, {}), sample.window, sample.step)
    return Source(lambda extra: connector(name, spec(f"s3://{bucket}/{path.name}", extra), sample.window,
                                          sample.step), broken)


def contract_cases():
    """One case per registered format and way of reading it; a format with none gets 'unlisted'."""
    for name in registry.names():
        ways = [way for way, listed in (("offline", OFFLINE), ("remote", REMOTE), ("s3", VIA_S3)) if name in listed]
        for way in ways or ["unlisted"]:
            marks = [pytest.mark.services] if way in ("remote", "s3") else []
            yield pytest.param((name, way), id=f"{name}-{way}", marks=marks)


CASES = list(contract_cases())


@pytest.fixture
def source(request) -> Source:
    """The sample of one (format, way) case."""
    name, way = request.param
    if way == "offline":
        return offline(name, request.getfixturevalue("tmp_path"))
    if way == "remote":
        return REMOTE_SOURCES[name](request)
    if way == "s3":
        return over_s3(name, request)
    pytest.fail(f"format {name!r} is registered but has no sample: add it to OFFLINE or REMOTE in {__name__}")


# --- the contract ------------------------------------------------------------------------------

def test_every_registered_format_has_a_sample_and_every_sample_a_format():
    registered = set(registry.names())
    assert registered - set(OFFLINE) - set(REMOTE) == set(), "registered formats without a sample"
    assert (set(OFFLINE) | set(REMOTE) | set(VIA_S3)) - registered == set(), "samples of unregistered formats"
    assert set(REMOTE) == set(REMOTE_SOURCES) and set(VIA_S3) <= set(OFFLINE)


@pytest.mark.parametrize("source", CASES, indirect=True)
def test_reads_and_validates(source):
    frame = source.make({}).read()
    assert frame.rows > 0 and len(frame.sha256) == 64
    assert any(len(t) for t in frame.tables.values())


@pytest.mark.parametrize("source", CASES, indirect=True)
def test_window_is_respected(source):
    reader = source.make({})
    frame = reader.read()
    lines = frame.tables.get("lines")
    if lines is not None:
        assert (lines["end"] > reader.ctx.start).all() and (lines["start"] < reader.ctx.end).all()
    for table in ("gpu_activity", "traffic"):
        found = frame.tables.get(table)
        if found is not None and len(found):
            assert (found["ts"] >= reader.ctx.start).all() and (found["ts"] < reader.ctx.end).all()


@pytest.mark.parametrize("source", CASES, indirect=True)
def test_a_transient_fault_is_retried(source, monkeypatch):
    reader = source.make({})
    monkeypatch.setattr(type(reader), "backoff_seconds", 0.0)
    calls = {"n": 0}
    real = reader.fetch

    def flaky():
        calls["n"] += 1
        if calls["n"] == 1:
            raise RetriableSourceError("503 Slow Down")
        return real()
    monkeypatch.setattr(reader, "fetch", flaky)
    assert reader.read().rows > 0 and calls["n"] == 2


def plant_secret(monkeypatch) -> None:
    """SECRET in every variable a connector takes credentials from."""
    for variable in SECRET_VARIABLES:
        monkeypatch.setenv(variable, SECRET)


def shown(reader: Connector) -> str:
    """What a connector shows of itself: its repr and str, those of each thing it holds, its spec."""
    texts = [repr(reader), str(reader), repr(reader.spec), str(reader.spec)]
    for value in vars(reader).values():
        texts += [repr(value), str(value)]
    return "\n".join(texts)


def error_texts(exc: BaseException) -> str:
    """str, repr and the whole formatted traceback (causes and contexts included)."""
    return "\n".join([str(exc), repr(exc), "".join(traceback.format_exception(exc))])


@pytest.mark.parametrize("source", CASES, indirect=True)
def test_no_secret_in_repr(source, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    plant_secret(monkeypatch)
    reader = source.make({"token_env": TOKEN_ENV})
    frame = reader.read()
    assert SECRET not in shown(reader) + repr(frame.spec) + str(frame.covered)
    assert SECRET not in caplog.text


@pytest.mark.parametrize("source", CASES, indirect=True)
def test_no_secret_in_errors(source, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    plant_secret(monkeypatch)
    with pytest.raises(SourceError) as caught:
        source.broken().read()
    errors = source.broken().check()
    assert errors, "check() found nothing wrong with a broken source"
    texts = [error_texts(caught.value), *(error_texts(e) for e in errors)]
    assert SECRET not in "\n".join(texts)
    assert SECRET not in caplog.text


def test_every_registered_connector_resolves_or_names_what_is_missing():
    for name in registry.names():
        try:
            cls = registry.resolve(name)
        except ImportError as exc:  # an optional dependency (boto3, google) not installed
            pytest.fail(f"{name}: {exc}")
        assert cls.format_name == name and cls.kind in ("billing", "telemetry", "profiles")
