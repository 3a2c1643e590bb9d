"""schemas.secrets: urls masked, credentials redacted in messages and log lines, urls that carry
credentials recognised."""
from __future__ import annotations

import base64
import json
import logging

import pytest

from schemas import secrets
from schemas.secrets import MASK, RedactingFilter, mask_url, redact, remember, url_credentials

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SESSION = "FwoGZXIvYXdzEBYaDHhBTEXAMPLEsessiontoken"
PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"


@pytest.mark.parametrize("text, shown", [
    ("http://user:password@prom.example:9090", "http://***@prom.example:9090"),
    ("https://tok3n@prom.example/prometheus", "https://***@prom.example/prometheus"),
    ("http://u:p@ss@host/x?step=1", "http://***@host/x?step=1"),
    ("https://b.s3.amazonaws.com/k.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F2024"
     "&X-Amz-Signature=0f1e2d3c&X-Amz-Expires=60",
     "https://b.s3.amazonaws.com/k.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=***"
     "&X-Amz-Signature=***&X-Amz-Expires=60"),
    ("data/bill.csv?sig=abc123&sv=2022", "data/bill.csv?sig=***&sv=2022"),
    ("https://h/api?access_token=a1&token=b2&key=c3&password=d4&query=up",
     "https://h/api?access_token=***&token=***&key=***&password=***&query=up"),
    ("http://prom.example:9090", "http://prom.example:9090"),
    ("proj.dataset.table", "proj.dataset.table"),
    ("mail alice@example.com about s3://bucket/key", "mail alice@example.com about s3://bucket/key"),
])
def test_mask_url(text, shown):
    assert mask_url(text) == shown


def test_mask_url_takes_paths_and_none():
    from pathlib import Path

    assert mask_url(Path("/data/x.csv?signature=ff00")) == "/data/x.csv?signature=***"
    assert mask_url(None) == ""


@pytest.mark.parametrize("url, carried", [
    ("http://user:password@host:9090", "a user name and password"),
    ("https://token@host", "a user name (or token)"),
    ("https://host/prometheus?token=x", "a 'token' query parameter"),
    ("s3://bucket/key?X-Amz-Signature=00", "a 'X-Amz-Signature' query parameter"),
    ("s3://user:secret@bucket/key", "a user name and password"),
])
def test_url_credentials(url, carried):
    assert url_credentials(url) == carried


@pytest.mark.parametrize("url", ["http://host:9090", "https://mimir.example/prometheus", "s3://b/users/a@b.com/x.csv",
                                 "data/x.csv", "http://127.0.0.1:9050?step=30", "project.dataset.table"])
def test_url_without_credentials(url):
    assert url_credentials(url) is None


@pytest.mark.parametrize("text, secret", [
    ("HTTP 401: bad header Authorization: Bearer s3cr3t-Tok3n.abc (check the token)", "s3cr3t-Tok3n.abc"),
    ("{'Authorization': 'Basic YXVkaXQ6cHc9', 'Accept': 'json'}", "YXVkaXQ6cHc9"),
    ("echo: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
    ("got bearer eyJhbGciOiJIUzI1NiJ9.e30.sig", "eyJhbGciOiJIUzI1NiJ9.e30.sig"),
    ("Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20240101/us-east-1/s3/aws4_request, "
     "SignedHeaders=host, Signature=0123456789abcdef", "0123456789abcdef"),
    ("key id AKIAIOSFODNN7EXAMPLE in use", "AKIAIOSFODNN7EXAMPLE"),
    ("temporary ASIAIOSFODNN7EXAMPLE", "ASIAIOSFODNN7EXAMPLE"),
    (f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET),
    (f'{{"SecretAccessKey": "{AWS_SECRET}", "SessionToken": "{SESSION}"}}', AWS_SECRET),
    (f"{{'X-Amz-Security-Token': b'{SESSION}'}}", SESSION),
    (f"X-Amz-Security-Token: {SESSION}", SESSION),
    (json.dumps({"type": "service_account", "private_key": PEM}), "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"),
    (PEM, "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"),
    (PEM[:45], "MIIEvQIBAD"),  # cut before its end
    ('{"private_key_id": "0123abcd4567ef"}', "0123abcd4567ef"),
    ("token ya29.a0AfH6SMBxExample_token-value", "a0AfH6SMBxExample_token-value"),
    ("key AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI used", "AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI"),
    ("GET http://admin:hunter2pass@prom:9090/api", "hunter2pass"),
])
def test_redact_masks_credentials(text, secret):
    clean = redact(text)
    assert secret not in clean
    assert MASK in clean


@pytest.mark.parametrize("text", [
    "a bearer token is missing; Basic authentication failed",
    "prompt_tokens: 5, max_tokens=7, token_env = X, password_env = Y",
    "no usable AWS credentials (NoCredentialsError)",
    "billing.csv: row 3, column BilledCost: expected a decimal number, got 'abc'",
])
def test_redact_keeps_ordinary_text(text):
    assert redact(text) == text


def test_redact_masks_remembered_and_standard_environment_values(monkeypatch):
    monkeypatch.setattr(secrets, "_remembered", set())
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "plain-secret-value-1")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "plain-session-value-2")
    monkeypatch.setenv("MY_PROM_PASSWORD", "plain-password-3")
    secrets.remember_env(["MY_PROM_PASSWORD"])
    remember("pw")  # too short to mask verbatim: it would mask words
    text = "echo plain-secret-value-1 plain-session-value-2 plain-password-3 pw"
    assert redact(text) == "echo *** *** *** pw"


def test_redact_masks_the_google_credentials_file(tmp_path, monkeypatch):
    path = tmp_path / "sa.json"
    path.write_text(json.dumps({"type": "service_account", "private_key": PEM, "private_key_id": "feed1234beef",
                                "client_secret": "gcp-client-secret-9"}))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    clean = redact("ids feed1234beef and gcp-client-secret-9")
    assert "feed1234beef" not in clean and "gcp-client-secret-9" not in clean


def test_the_log_filter_redacts_message_arguments_and_tracebacks():
    record = logging.LogRecord("connectors.x", logging.WARNING, __file__, 1, "sent %s", ("Bearer abc-123-def",), None)
    try:
        raise RuntimeError("failed with aws_secret_access_key=" + AWS_SECRET)
    except RuntimeError:
        import sys
        record.exc_info = sys.exc_info()
    assert RedactingFilter().filter(record)
    assert record.getMessage() == "sent Bearer ***"
    assert AWS_SECRET not in record.exc_text


def test_guard_logging_masks_what_the_last_resort_handler_prints(capsys):
    logger = logging.getLogger("tests.secrets.unconfigured")
    logger.propagate = True
    secrets.guard_logging()
    handlers = logging.root.handlers or [logging.lastResort]
    assert all(secrets.REDACTING in h.filters for h in handlers)
    token = base64.b64encode(b"auditor:pw-guard-77").decode()
    logging.lastResort.handle(logging.makeLogRecord({"msg": "header Authorization: Basic " + token,
                                                     "levelno": logging.WARNING, "levelname": "WARNING"}))
    assert token not in capsys.readouterr().err


def test_a_path_ending_in_a_label_is_not_masked():
    """/etc/passwd: unknown file extension became "/etc/passwd: *** file extension"."""
    from schemas.secrets import redact

    assert redact("/etc/passwd: unknown file extension '(none)'") == "/etc/passwd: unknown file extension '(none)'"
    assert redact(r"C:\keys\token: not found") == r"C:\keys\token: not found"
    assert redact("passwd: hunter2, token=abc123") == "passwd: ***, token=***"
