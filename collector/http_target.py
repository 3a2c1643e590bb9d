"""The HTTP target: OpenAI-compatible completions / chat completions (streamed SSE) or a JSON POST.

Streaming requests measure time to first token (from the scheduled send time) and inter-token
latency (gaps between content chunks). Tokens are read from the final ``usage`` chunk when the
server sends one (``stream_options.include_usage``); otherwise generated tokens are counted as
content chunks and prompt tokens are left unmeasured.
"""
from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from collector.traffic import Request
from schemas.errors import UsageError
from schemas.secrets import mask_url, url_credentials

MODES = ("completions", "chat", "json")
PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


@dataclass(frozen=True)
class HttpTarget:
    """Where and how to send: base url, mode, model name, per-request timeout."""

    url: str
    mode: str = "completions"
    model: str | None = None
    timeout: float = 30.0
    stream: bool = True

    def __post_init__(self) -> None:
        refuse_credentials(self.url, "url")

    def endpoint(self) -> tuple[str, str, int, str]:
        """(scheme, host, port, path) of the request url."""
        parts = urlsplit(self.url)
        path = parts.path.rstrip("/")
        if self.mode in PATHS and not path.endswith(PATHS[self.mode]):
            path = path + PATHS[self.mode]
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return parts.scheme, parts.hostname or "127.0.0.1", port, path or "/"

    def body(self, payload) -> dict:
        """The JSON body of one request: the payload plus model and streaming fields."""
        body = dict(payload) if isinstance(payload, dict) else {"input": payload}
        if self.mode in PATHS:
            if self.model and "model" not in body:
                body["model"] = self.model
            if self.stream:
                body["stream"] = True
                body.setdefault("stream_options", {"include_usage": True})
        return body


def refuse_credentials(url: str, option: str) -> None:
    """A target url with credentials in it (user:password@, a token parameter) is a UsageError
    that shows it masked: the collector sends no credentials, and would write the url into the bundle."""
    carried = url_credentials(url)
    if carried:
        raise UsageError(f"{option} {mask_url(url)}: credentials may not be written into the url (it "
                         f"carries {carried}); the collector sends none, so point it at a target that "
                         "needs none (a local port or a port-forward)")


def sender(target: HttpTarget):
    """A ``send(request)`` function for the dispatcher."""
    scheme, host, port, path = target.endpoint()
    conn_cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection

    def send(request: Request) -> None:
        payload = request.payload() if callable(request.payload) else request.payload   # built late (trace replay)
        data = json.dumps(target.body(payload)).encode()
        conn = conn_cls(host, port, timeout=target.timeout)
        try:
            request.sent = time.perf_counter()
            conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            if response.status >= 400:
                request.error = f"HTTP {response.status} from {mask_url(target.url)}{path_note(target)}: " \
                                f"{error_text(response.read())}"
                return
            if target.mode in PATHS and target.stream:
                read_stream(response, request)
            else:
                read_json(response.read(), request)
        except OSError as exc:          # refused, reset, timed out: name the target
            request.error = f"{type(exc).__name__} from {mask_url(target.url)}{path_note(target)}: {exc}"
        finally:
            conn.close()
    return send


def read_stream(response, request: Request) -> None:
    """Consume an SSE stream: stamp each content chunk, read usage, count chunks as tokens."""
    chunks: list[float] = []
    usage = None
    for raw in response:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        event = json.loads(data)
        if not isinstance(event, dict):
            continue
        if event.get("error"):          # vLLM / OpenAI send an error event inside the stream
            request.error = "stream error: " + error_text(json.dumps(event["error"]).encode())
            break
        if event.get("usage"):
            usage = event["usage"]
        if _has_content(event):
            chunks.append(time.perf_counter())
    if chunks:
        request.ttft = chunks[0] - request.scheduled
        request.itl = [b - a for a, b in zip(chunks, chunks[1:])]
    _tokens(request, usage, len(chunks))


def path_note(target: HttpTarget) -> str:
    """The request path when the url did not carry it."""
    path = target.endpoint()[3]
    return "" if target.url.rstrip("/").endswith(path) else f" ({path})"


def error_text(body: bytes, limit: int = 300) -> str:
    """An error response's message: ``error.message`` / ``detail`` of a JSON body, else its text."""
    text = body.decode("utf-8", "replace").strip()
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        inner = doc.get("error", doc.get("detail", doc.get("message")))
        if isinstance(inner, dict):
            inner = inner.get("message", inner)
        if inner is not None:
            text = inner if isinstance(inner, str) else json.dumps(inner)
    text = " ".join(text.split())
    return (text[:limit] + "…" if len(text) > limit else text) or "(empty body)"


def _has_content(event: dict) -> bool:
    """Whether an SSE event carries generated text (completions or chat delta)."""
    for choice in event.get("choices") or []:
        if choice.get("text") or (choice.get("delta") or {}).get("content"):
            return True
    return False


def read_json(body: bytes, request: Request) -> None:
    """A non-streamed response: tokens from ``usage`` when present."""
    try:
        doc = json.loads(body or b"null")
    except ValueError:
        doc = None
    usage = doc.get("usage") if isinstance(doc, dict) else None
    _tokens(request, usage, None)


def _tokens(request: Request, usage: dict | None, chunks: int | None) -> None:
    if usage:
        request.prompt_tokens = usage.get("prompt_tokens")
        request.generated_tokens = usage.get("completion_tokens", chunks)
    else:
        request.generated_tokens = chunks


def probe(target: HttpTarget, payload) -> bool:
    """One request; True when it succeeds (used to detect the end of a cold start)."""
    request = Request(0, payload)
    request.scheduled = time.perf_counter()
    try:
        sender(target)(request)
    except OSError:
        return False
    return request.error is None
