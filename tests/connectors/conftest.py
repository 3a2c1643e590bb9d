"""The real local servers the connector tests query, each started at most once per session.

``prom``: one Prometheus holding every data set the tests read (tests/servers/prometheus.py).
``moto``: moto in server mode (S3, Glue, Athena, IAM), with ``aws_env`` giving a test fake
credentials and a cache of its own, ``s3`` a client straight to moto and ``bucket`` a fresh bucket.
``emulator``: bqemulator, yielding its port. A server starts when the first test asking for it
runs, and stops at the end of the session.
"""
from __future__ import annotations

import uuid

import boto3
import pytest

from tests.servers import bigquery, prometheus
from tests.servers import moto as moto_server


@pytest.fixture(scope="session")
def prom(tmp_path_factory):
    """Prometheus on 127.0.0.1 holding the scenarios, telemetry_small, telemetry_serving and the demo."""
    served = prometheus.load(tmp_path_factory.mktemp("prometheus"))
    yield served
    served.server.stop()


@pytest.fixture(scope="session")
def moto(tmp_path_factory):
    """moto in server mode on 127.0.0.1."""
    with moto_server.start(tmp_path_factory.mktemp("moto")) as server:
        yield server


@pytest.fixture(scope="session")
def emulator(tmp_path_factory):
    """bqemulator on 127.0.0.1 (in-memory); its port."""
    with bigquery.start(tmp_path_factory.mktemp("bqemu")) as port:
        yield port


@pytest.fixture
def aws_env(monkeypatch, tmp_path):
    """Fake credentials in the environment, no shared config, the cache in tmp_path."""
    moto_server.aws_environment(monkeypatch, tmp_path)


@pytest.fixture
def s3(moto, aws_env):
    """A boto3 client talking to moto directly (test set-up, never through a proxy)."""
    client = boto3.client("s3", endpoint_url=moto.url, region_name="us-east-1")
    yield client
    client.close()


@pytest.fixture
def bucket(s3) -> str:
    """A fresh bucket."""
    name = f"costaudit-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name
