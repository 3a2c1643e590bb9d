"""Planted secrets never reach an output, stdout or stderr.

Before: a Prometheus ``url = "http://user:password@host:port"`` was accepted, looked up as a host
name and retried for ~70 s, and the password then appeared in audit.json, report.html, the PDF,
tables/sources.csv and tables.xlsx; an error body echoing the Authorization header was quoted as
it came. Now a url with credentials is refused before any request (exit 1, naming the source and
the option, pointing at username_env / password_env / token_env), every url is shown masked, and
every message, output and log line is redacted (schemas/secrets.py).

The secrets are planted in the environment (token_env, username_env / password_env,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, a GOOGLE_APPLICATION_CREDENTIALS file) and in the
sources' error paths: a url with user:password@, a real HTTP server on 127.0.0.1 that answers
500 or 401 with a body echoing the Authorization header it received (and AWS and Google secrets),
and a billing path whose name holds a signed query string. `costaudit run` writes every format.
"""
from __future__ import annotations

import base64
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from tests.hostile.harness import write_focus
from tests.paths import ROOT

TOKEN = "tok-Planted-7f3a9c1e5b"
USER = "auditor-planted"
PASSWORD = "pw-Planted-4d2e8b6a"
URL_PASSWORD = "urlpw-Planted-9b1c"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPlantedKEY0123"
AWS_SESSION = "FwoGZXIvYXdzEPlantedSessionToken0456"
AWS_KEY_ID = "AKIAPLANTEDEXAMPL3ID"
GOOGLE_KEY_BODY = "MIIEvQPlantedGooglePrivateKeyBody0789"
GOOGLE_KEY_ID = "f00dPlantedKeyId4455"
SIGNATURE = "5ig0fPlanted1a2b3c4d5e6f"
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
PLANTED = (TOKEN, PASSWORD, URL_PASSWORD, AWS_SECRET, AWS_SESSION, AWS_KEY_ID, GOOGLE_KEY_BODY, GOOGLE_KEY_ID,
           SIGNATURE, BASIC)
FORMATS = "pdf,html,json,xlsx,csv"
RUNNER = """
import sys
from connectors.base import Connector
from connectors.telemetry.promhttp import PromClient
PromClient.backoff_seconds = Connector.backoff_seconds = 0.01   # the retries, without their waits
sys.argv = ["costaudit", *sys.argv[1:]]
from audit.cli import main
main()
"""


class Echo(http.server.BaseHTTPRequestHandler):
    """Answers every request with ``server.status`` and a body that echoes the Authorization header
    it received, beside AWS and Google secrets (a proxy dumping its environment): JSON under /json,
    plain text elsewhere."""

    def _answer(self):
        self.server.seen += 1
        leak = (f"Authorization: {self.headers.get('Authorization')}; aws_secret_access_key={AWS_SECRET} "
                f"X-Amz-Security-Token: {AWS_SESSION} key id {AWS_KEY_ID} "
                f"private_key: -----BEGIN PRIVATE KEY-----\\n{GOOGLE_KEY_BODY}\\n-----END PRIVATE KEY-----")
        if self.path.startswith("/json"):
            body = json.dumps({"status": "error", "errorType": "internal" if self.server.status >= 500 else "",
                               "error": "upstream refused " + leak}).encode()
        else:
            body = leak.encode()
        self.send_response(self.server.status)
        self.send_header("Content-Type", "application/json" if self.path.startswith("/json") else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args):
        pass


@pytest.fixture()
def echo():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    server.status, server.seen = 500, 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture()
def planted_env(tmp_path):
    """The environment of the child: every credential variable set to a planted secret."""
    google = tmp_path / "google-sa.json"
    google.write_text(json.dumps({"type": "service_account", "private_key_id": GOOGLE_KEY_ID,
                                  "private_key": f"-----BEGIN PRIVATE KEY-----\n{GOOGLE_KEY_BODY}\n"
                                                 "-----END PRIVATE KEY-----\n"}))
    return {**os.environ, "PYTHONPATH": str(ROOT), "HOSTILE_PROM_TOKEN": TOKEN, "HOSTILE_PROM_USER": USER,
            "HOSTILE_PROM_PASSWORD": PASSWORD, "AWS_ACCESS_KEY_ID": AWS_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": AWS_SECRET, "AWS_SESSION_TOKEN": AWS_SESSION,
            "GOOGLE_APPLICATION_CREDENTIALS": str(google)}


def costaudit(*args, cwd: Path, env: dict, timeout: int = 300) -> subprocess.CompletedProcess:
    """``costaudit ARGS`` in a child process with ``env``."""
    return subprocess.run([sys.executable, "-c", RUNNER, *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=timeout)


def write_case(folder: Path, billing: str, telemetry: str) -> Path:
    """A case with one good FOCUS file under ``billing`` and the ``telemetry`` TOML."""
    folder.mkdir(parents=True, exist_ok=True)
    write_focus(folder / billing)
    (folder / "case.toml").write_text(f'''[case]
name = "secrets"
window = ["2024-09-01", "2024-09-02"]
currency = "USD"
loaded_rate = 150
step = "1h"

[[billing]]
name = "bill"
format = "focus"
path = {json.dumps(billing)}
{telemetry}''')
    return folder


def prometheus(name: str, url: str, **options: str) -> str:
    """The TOML of one prometheus source."""
    extra = "".join(f"{key} = {json.dumps(value)}\n" for key, value in options.items())
    return f'[[telemetry]]\nname = "{name}"\nformat = "prometheus"\nurl = "{url}"\n{extra}'


def texts_of(folder: Path) -> dict[str, str]:
    """Every output file as text: the PDF through pdftotext (and its raw bytes), the workbook's
    XML parts, every other file decoded."""
    out = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = str(path.relative_to(folder))
        raw = path.read_bytes()
        out[name] = raw.decode("latin-1")
        if path.suffix == ".pdf" and shutil.which("pdftotext"):
            out[name + " (text)"] = subprocess.run(["pdftotext", str(path), "-"], capture_output=True,
                                                   text=True, check=True).stdout
        if path.suffix == ".xlsx":
            with zipfile.ZipFile(path) as book:
                for part in book.namelist():
                    out[f"{name}:{part}"] = book.read(part).decode("utf-8", "replace")
    return out


def fragments(secret: str) -> list[str]:
    """The secret and its pieces between separators (a url parser may cut a secret at a '/')."""
    return [secret] + [part for part in re.split(r"[/+:=%]", secret) if len(part) >= 6 and part != secret]


def assert_no_secret(texts: dict[str, str]) -> None:
    """No planted secret, nor a piece of one, in any text, as it is or with its line breaks taken
    out (PDF text wraps)."""
    for where, text in texts.items():
        flat = "".join(text.split())
        for secret in PLANTED:
            for piece in fragments(secret):
                assert piece not in text and piece not in flat, f"{piece!r} (of {secret!r}) appears in {where}"


def one_error(done: subprocess.CompletedProcess) -> str:
    """The run failed with exit 1 and one error line, no traceback; that line."""
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("costaudit: error:")]
    assert len(errors) == 1, done.stderr[-3000:]
    return errors[0]


def test_every_output_of_a_run_is_free_of_the_planted_secrets(tmp_path, echo, planted_env):
    signed = f"bill?X-Amz-Credential={AWS_KEY_ID}%2F20240901&X-Amz-Signature={SIGNATURE}&part=1.csv"
    case = write_case(tmp_path / "case", signed,
                      prometheus("prom-token", echo.url + "/json", token_env="HOSTILE_PROM_TOKEN")
                      + prometheus("prom-basic", echo.url + "/text", username_env="HOSTILE_PROM_USER",
                                   password_env="HOSTILE_PROM_PASSWORD"))
    out = tmp_path / "out"
    done = costaudit("run", case, "--out", out, "--format", FORMATS, cwd=tmp_path, env=planted_env)
    assert done.returncode in (0, 2), done.stderr[-3000:]
    document = json.loads((out / "audit.json").read_text())
    missing = {s["name"]: s for s in document["sources"] if s["status"] == "missing"}
    assert set(missing) == {"prom-token", "prom-basic"}
    for name, scheme in (("prom-token", "Bearer"), ("prom-basic", "Basic")):   # the echo reached the outputs, masked
        reason = missing[name]["reason"]
        assert "HTTP 500" in reason and f"Authorization: {scheme} ***" in reason, reason
    bill = next(s for s in document["sources"] if s["name"] == "bill")
    assert bill["path"] == "bill?X-Amz-Credential=***&X-Amz-Signature=***&part=1.csv"
    texts = texts_of(out)
    assert {"audit.json", "report.html", "report.pdf", "tables.xlsx", "tables/sources.csv"} <= set(texts)
    assert_no_secret({**texts, "stdout": done.stdout, "stderr": done.stderr})
    assert echo.seen >= 2


@pytest.mark.parametrize("command", ["run", "validate"])
def test_a_url_with_credentials_is_refused_before_any_request(tmp_path, echo, planted_env, command):
    url = echo.url.replace("http://", f"http://{USER}:{URL_PASSWORD}@")
    case = write_case(tmp_path / "case", "bill.csv", prometheus("prom", url))
    started = time.monotonic()
    done = costaudit(command, case, *(["--out", tmp_path / "out"] if command == "run" else []),
                     cwd=tmp_path, env=planted_env, timeout=120)
    error = one_error(done)
    assert time.monotonic() - started < 60
    assert echo.seen == 0
    for word in ("'prom'", ".url", "credentials", "***@127.0.0.1", "username_env", "password_env"):
        assert word in error, error
    assert_no_secret({"stdout": done.stdout, "stderr": done.stderr})
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("option, value", [
    ("uri", f"s3://{AWS_KEY_ID}:{AWS_SECRET}@bucket/cur/"),
    ("endpoint_url", f"http://{USER}:{URL_PASSWORD}@127.0.0.1:9/"),
])
def test_object_store_urls_with_credentials_are_refused(tmp_path, planted_env, option, value):
    case = write_case(tmp_path / "case", "bill.csv", "")
    text = (case / "case.toml").read_text()
    location = f'uri = "{value}"' if option == "uri" else f'uri = "s3://bucket/cur/"\nendpoint_url = "{value}"'
    text += f'\n[[billing]]\nname = "s3"\nformat = "cur"\n{location}\n'
    (case / "case.toml").write_text(text)
    done = costaudit("validate", case, cwd=tmp_path, env=planted_env, timeout=120)
    error = one_error(done)
    assert f"'s3'.{option}" in error and "AWS credential chain" in error, error
    assert_no_secret({"stdout": done.stdout, "stderr": done.stderr})


@pytest.mark.parametrize("command", ["run", "validate"])
def test_an_echoed_authorization_header_is_masked_in_errors(tmp_path, echo, planted_env, command):
    echo.status = 401   # fatal: the run stops with one error naming the source
    case = write_case(tmp_path / "case", "bill.csv",
                      prometheus("prom-basic", echo.url + "/json", username_env="HOSTILE_PROM_USER",
                                 password_env="HOSTILE_PROM_PASSWORD"))
    done = costaudit(command, case, *(["--out", tmp_path / "out"] if command == "run" else []),
                     cwd=tmp_path, env=planted_env, timeout=120)
    error = one_error(done)
    assert "HTTP 401" in error and "Authorization: Basic ***" in error, error
    assert echo.seen >= 1
    assert_no_secret({"stdout": done.stdout, "stderr": done.stderr})


def test_an_unset_password_variable_is_named(tmp_path, echo, planted_env):
    env = {k: v for k, v in planted_env.items() if k != "HOSTILE_PROM_PASSWORD"}
    case = write_case(tmp_path / "case", "bill.csv",
                      prometheus("prom", echo.url, username_env="HOSTILE_PROM_USER",
                                 password_env="HOSTILE_PROM_PASSWORD"))
    error = one_error(costaudit("validate", case, cwd=tmp_path, env=env, timeout=120))
    assert "HOSTILE_PROM_PASSWORD" in error and "password_env" in error and "not set" in error, error
    assert echo.seen == 0


def test_collect_refuses_a_target_url_with_credentials(tmp_path, planted_env):
    url = f"http://{USER}:{URL_PASSWORD}@127.0.0.1:9/v1?api_key={TOKEN}"
    done = costaudit("collect", "--out", tmp_path / "bundle", "--url", url, "--no-progress",
                     cwd=tmp_path, env=planted_env, timeout=120)
    error = one_error(done)
    assert "--url http://***@127.0.0.1:9/v1?api_key=***" in error, error
    assert_no_secret({"stdout": done.stdout, "stderr": done.stderr})
    assert not (tmp_path / "bundle").exists()


def test_init_from_a_url_with_credentials_writes_it_masked(tmp_path, echo, planted_env):
    bill = write_focus(tmp_path / "bill.csv")
    url = echo.url.replace("http://", f"http://{USER}:{URL_PASSWORD}@")
    done = costaudit("init", tmp_path / "proposed", "--from", bill, "--from", url, cwd=tmp_path, env=planted_env,
                     timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert echo.seen == 0
    written = (tmp_path / "proposed" / "case.toml").read_text()
    assert "***@127.0.0.1" in written
    assert_no_secret({"case.toml": written, "stdout": done.stdout, "stderr": done.stderr})
