"""A case whose S3 invoice cannot be read: the run stops on that source, naming it and the last
error, before any later check (the billing window) could misread the gap as "no billing line".

Real moto server on 127.0.0.1 behind the fault proxy of tests/servers/moto.py.
"""
from __future__ import annotations

import pytest

from audit.case import load_case
from audit.pipeline import run_audit
from connectors.billing.focus import FocusConnector
from connectors.errors import InputErrors
from tests.builders import billing_case
from tests.paths import DATA
from tests.servers.moto import ProxyHandler, put, serve_proxy

pytestmark = pytest.mark.services

FOCUS_SAMPLE = DATA / "billing" / "focus_sample_data" / "focus_sample_1000.csv"


@pytest.fixture
def proxy(moto):
    """A FaultProxy on a free port of 127.0.0.1 in front of moto."""
    yield from serve_proxy(moto.port, ProxyHandler)


def test_persistently_failing_s3_invoice_is_named_with_its_last_error(s3, bucket, proxy, tmp_path, monkeypatch):
    put(s3, bucket, "focus/sample.csv", FOCUS_SAMPLE.read_bytes())
    monkeypatch.setattr(FocusConnector, "backoff_seconds", 0.01)
    monkeypatch.setattr(FocusConnector, "retries", 1)
    proxy.fail("get", "internal", times=None)
    uri = f"s3://{bucket}/focus/sample.csv"
    billing_case(tmp_path, "focus-s3", ("2024-09-01", "2024-10-01"), "billed", format="focus",
                 uri=uri, endpoint_url=proxy.url)
    with pytest.raises(InputErrors) as caught:
        run_audit(load_case(tmp_path))
    text = str(caught.value)
    assert uri in text and "'focus-s3' could not be read after retries" in text and "InternalError" in text
    assert "no billing line" not in text
