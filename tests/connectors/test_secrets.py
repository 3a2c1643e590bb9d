"""Connectors and secrets: a SourceSpec shows its url masked, a url with credentials is refused
before any request, Prometheus basic auth comes from the variables username_env / password_env
name, and the collector's HTTP target refuses credentials in its url."""
from __future__ import annotations

import base64
import socket
from datetime import datetime, timezone
from pathlib import Path

import pytest

from collector.http_target import HttpTarget
from connectors.base import ReadContext, SourceSpec, url_credential_problems
from connectors.errors import InputError
from connectors.telemetry.prometheus import PrometheusConnector
from connectors.telemetry.promhttp import PromClient, auth_headers
from schemas.errors import UsageError

SECRET = "pw-Connector-5e1d"
URL = f"http://auditor:{SECRET}@127.0.0.1:9/prometheus?token=t0k-Connector"
CTX = ReadContext(datetime(2024, 9, 1, tzinfo=timezone.utc), datetime(2024, 9, 2, tzinfo=timezone.utc), "USD")


def test_a_spec_shows_its_url_and_path_masked():
    spec = SourceSpec("prom", "telemetry", "prometheus", None, {"url": URL, "token_env": "X"})
    assert spec.where == "http://***@127.0.0.1:9/prometheus?token=***"
    assert SECRET not in repr(spec) and SECRET not in str(spec) and "t0k-Connector" not in repr(spec)
    assert "token_env': 'X'" in repr(spec)
    signed = SourceSpec("bill", "billing", "focus", Path("/data/x.csv?X-Amz-Signature=ab12cd"), {})
    assert signed.where == "/data/x.csv?X-Amz-Signature=***"
    assert "ab12cd" not in repr(signed)


def test_a_url_with_credentials_is_refused_before_any_request(monkeypatch):
    def no_connection(*args, **kwargs):
        raise AssertionError("a connection was attempted")
    monkeypatch.setattr(socket, "create_connection", no_connection)
    spec = SourceSpec("prom", "telemetry", "prometheus", None, {"url": URL})
    with pytest.raises(InputError) as caught:
        PrometheusConnector(spec, CTX).read()
    text = str(caught.value)
    assert "source 'prom'" in text and "column url" in text and "username_env" in text, text
    assert SECRET not in text and "t0k-Connector" not in text
    with pytest.raises(InputError, match="credentials may not be written"):
        PromClient(URL, {})


@pytest.mark.parametrize("options, option", [
    ({"uri": "s3://AKIAEXAMPLE:abc/def@bucket/x/"}, "uri"),
    ({"uri": "s3://bucket/x/", "endpoint_url": "https://k:s@minio.local"}, "endpoint_url"),
    ({"api_endpoint": "https://bq.local/?key=abc"}, "api_endpoint"),
    ({"table": "d.t", "output_location": "s3://u:p@bucket/results/"}, "output_location"),
])
def test_every_url_option_is_checked(options, option):
    problems = url_credential_problems(options)
    assert [key for key, _ in problems] == [option]
    assert "abc" not in problems[0][1] and ":s@" not in problems[0][1] and ":p@" not in problems[0][1]


def test_basic_auth_from_the_named_variables():
    env = {"U": "auditor", "P": "pw-basic", "COSTAUDIT_PROMETHEUS_TOKEN": "default-token"}
    headers = auth_headers({"username_env": "U", "password_env": "P"}, env)
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"auditor:pw-basic").decode()
    assert auth_headers({}, env)["Authorization"] == "Bearer default-token"
    assert auth_headers({"token_env": "T"}, {"T": "tok"})["Authorization"] == "Bearer tok"


def test_a_named_variable_that_is_unset_is_an_error():
    with pytest.raises(InputError, match="password_env names is not set"):
        auth_headers({"username_env": "U", "password_env": "P"}, {"U": "auditor"})
    with pytest.raises(InputError, match="basic auth needs a user name"):
        auth_headers({"password_env": "P"}, {"P": "pw"})


@pytest.mark.parametrize("url", [f"http://auditor:{SECRET}@127.0.0.1:8000", "http://127.0.0.1:8000/v1?api_key=k3y-v4lue"])
def test_the_http_target_refuses_credentials_in_its_url(url):
    with pytest.raises(UsageError) as caught:
        HttpTarget(url)
    assert SECRET not in str(caught.value) and "k3y-v4lue" not in str(caught.value)
    assert "***" in str(caught.value)


def test_the_case_checks_the_credential_options(tmp_path):
    from audit.case import load_case
    from audit.errors import ConfigError

    (tmp_path / "bill.csv").write_text("x\n")
    (tmp_path / "case.toml").write_text('''[case]
name = "c"
window = ["2024-09-01", "2024-09-02"]
currency = "USD"
loaded_rate = 150
[[billing]]
name = "bill"
format = "focus"
path = "bill.csv"
[[telemetry]]
name = "both"
format = "prometheus"
url = "http://127.0.0.1:9"
token_env = "T"
username_env = "U"
[[telemetry]]
name = "odd"
format = "prometheus"
url = "http://127.0.0.1:9"
password_env = "not a name"
''')
    with pytest.raises(ConfigError) as caught:
        load_case(tmp_path)
    problems = caught.value.problems
    assert any("'both'" in p and "not both" in p for p in problems), problems
    assert any("'odd'.password_env: expected the name of an environment variable" in p for p in problems), problems
