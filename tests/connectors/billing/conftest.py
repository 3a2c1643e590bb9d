"""Fixtures of the Athena tests: moto's Glue table and a fault-injecting proxy in front of moto."""
from __future__ import annotations

import botocore.retries.standard
import pytest

import connectors.billing.athena as athena
from tests.servers.athena import OUTPUT, JsonProxyHandler, create_bucket, create_table, scratch_seeder
from tests.servers.moto import serve_proxy


@pytest.fixture
def glue(moto, aws_env, monkeypatch):
    """The Glue table (the Parquet's columns as Glue types) and the bucket of the output location
    in moto; retries and polls without waits."""
    monkeypatch.setattr(athena, "MAX_RETRIES", 2)
    monkeypatch.setattr(athena, "POLL_FIRST_S", 0.01)
    monkeypatch.setattr(athena.AthenaConnector, "backoff_seconds", 0.0)
    # botocore's standard-mode backoff (up to seconds): counted below, not waited for
    monkeypatch.setattr(botocore.retries.standard.ExponentialBackoff, "delay_amount", lambda self, context: 0.01)
    create_table(moto)
    create_bucket(moto, OUTPUT)


@pytest.fixture
def proxy(moto):
    """A FaultProxy for Athena / Glue requests on a free port of 127.0.0.1, in front of moto."""
    yield from serve_proxy(moto.port, JsonProxyHandler, results={})


@pytest.fixture
def scratch_proxy(moto):
    """The proxy, its scratch queries (the GPU split run in place) answered by DuckDB over the objects
    the audit wrote (``state.hear``: what it heard)."""
    hear = scratch_seeder(moto)
    for state in serve_proxy(moto.port, JsonProxyHandler, results={}, starts=(hear,)):
        state.hear = hear
        yield state
