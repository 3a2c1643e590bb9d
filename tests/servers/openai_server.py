"""A small OpenAI-compatible server on 127.0.0.1 for the collector's tests: the target under test.

``POST /v1/completions`` and ``POST /v1/chat/completions``, streamed as SSE (``stream: true``) or
one JSON body. It keeps a set pace: the first token ``prefill_s`` (+ ``per_prompt_token_s`` × prompt
tokens) after the request arrives, then one token every ``decode_s``, each on an absolute deadline so
that sleep jitter does not add up. It honours ``max_tokens``; without ``ignore_eos`` or
``min_tokens`` it stops at its natural length (``natural_tokens``, as a model meeting its end of
sequence), so forcing the output length shows. Prompt tokens are the words of a text prompt or the
ids of a token-id prompt. ``stream_options.include_usage`` adds the final usage chunk. A bad
``max_tokens`` is a 400 with an OpenAI error body, and ``fail_status`` makes every request fail so.
"""
from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator


@dataclass
class Pace:
    """How the server behaves."""

    prefill_s: float = 0.010
    per_prompt_token_s: float = 0.0
    decode_s: float = 0.002
    natural_tokens: int = 8
    fail_status: int | None = None


class Handler(BaseHTTPRequestHandler):
    pace = Pace()
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def do_POST(self):
        arrived = time.perf_counter()
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            return self._error(400, "the body is not JSON")
        pace = self.pace
        if pace.fail_status:
            return self._error(pace.fail_status, "the model 'missing' does not exist")
        chat = self.path.endswith("/chat/completions")
        if not chat and not self.path.endswith("/completions"):
            return self._error(404, f"no route {self.path}")
        cap = body.get("max_tokens", 16)
        if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
            return self._error(400, f"max_tokens must be an integer ≥ 1, got {cap!r}")
        forced = bool(body.get("ignore_eos")) or int(body.get("min_tokens") or 0) >= cap
        tokens = cap if forced else min(cap, max(int(body.get("min_tokens") or 0), pace.natural_tokens))
        prompt = _prompt_tokens(body, chat)
        first = arrived + pace.prefill_s + pace.per_prompt_token_s * prompt
        usage = {"prompt_tokens": prompt, "completion_tokens": tokens, "total_tokens": prompt + tokens}
        if not body.get("stream"):
            _sleep_until(first + pace.decode_s * (tokens - 1))
            text = " ".join(f"t{i}" for i in range(tokens))
            choice = {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
            return self._json(200, {"choices": [{**choice, "index": 0, "finish_reason": "length"}], "usage": usage})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for i in range(tokens):
            _sleep_until(first + pace.decode_s * i)
            piece = f" t{i}"
            choice = {"index": 0, "delta": {"content": piece}} if chat else {"index": 0, "text": piece}
            self._event({"choices": [choice]})
        if (body.get("stream_options") or {}).get("include_usage"):
            self._event({"choices": [], "usage": usage})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _event(self, doc: dict) -> None:
        self.wfile.write(b"data: " + json.dumps(doc).encode() + b"\n\n")
        self.wfile.flush()

    def _json(self, status: int, doc: dict) -> None:
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._json(status, {"error": {"message": message, "type": "BadRequestError", "code": status}})


def _prompt_tokens(body: dict, chat: bool) -> int:
    if chat:
        return sum(len(str(m.get("content", "")).split()) for m in body.get("messages") or [])
    prompt = body.get("prompt", "")
    return len(prompt) if isinstance(prompt, list) else len(str(prompt).split())


def _sleep_until(deadline: float) -> None:
    while True:
        left = deadline - time.perf_counter()
        if left <= 0:
            return
        time.sleep(min(left, 0.05))


def make_server(pace: Pace, port: int = 0) -> ThreadingHTTPServer:
    handler = type("PacedHandler", (Handler,), {"pace": pace})
    server_class = type("QueuedServer", (ThreadingHTTPServer,), {"request_queue_size": 512, "daemon_threads": True})
    return server_class(("127.0.0.1", port), handler)


@contextmanager
def openai_server(pace: Pace | None = None, process: bool = False) -> Iterator[str]:
    """Serve on a free 127.0.0.1 port; yields the base url. ``process=True`` runs the server in a
    process of its own (its pace is then not slowed by the client's threads sharing one GIL)."""
    pace = pace or Pace()
    if process:
        yield from _in_process_of_its_own(pace)
        return
    server = make_server(pace)
    thread = threading.Thread(target=server.serve_forever, name="openai-test-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _in_process_of_its_own(pace: Pace) -> Iterator[str]:
    from tests.servers.ports import free_port

    port = free_port()
    args = [sys.executable, "-m", "tests.servers.openai_server", "--port", str(port),
            "--prefill-s", str(pace.prefill_s), "--per-prompt-token-s", str(pace.per_prompt_token_s),
            "--decode-s", str(pace.decode_s), "--natural-tokens", str(pace.natural_tokens)]
    if pace.fail_status:
        args += ["--fail-status", str(pace.fail_status)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the OpenAI test server did not start: "
                                       + (proc.stderr.read().decode() if proc.stderr else "")) from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stderr:
            proc.stderr.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--prefill-s", type=float, default=Pace.prefill_s)
    parser.add_argument("--per-prompt-token-s", type=float, default=Pace.per_prompt_token_s)
    parser.add_argument("--decode-s", type=float, default=Pace.decode_s)
    parser.add_argument("--natural-tokens", type=int, default=Pace.natural_tokens)
    parser.add_argument("--fail-status", type=int, default=None)
    a = parser.parse_args()
    make_server(Pace(a.prefill_s, a.per_prompt_token_s, a.decode_s, a.natural_tokens, a.fail_status),
                a.port).serve_forever()


if __name__ == "__main__":
    main()
