"""A small client of the Prometheus HTTP API (also served by Thanos, Mimir and VictoriaMetrics).

Standard library only (urllib, ssl, gzip). Credentials come from environment variables, never from
the case file (a url with ``user:password@`` is refused): a bearer token from the variable named by
``token_env`` (default ``COSTAUDIT_PROMETHEUS_TOKEN``), else basic auth from the variables named by
``username_env`` and ``password_env`` (defaults ``COSTAUDIT_PROMETHEUS_USER`` and
``COSTAUDIT_PROMETHEUS_PASSWORD``); ``COSTAUDIT_PROMETHEUS_ORG_ID`` sets Mimir's ``X-Scope-OrgID``.
Every credential read is masked in messages from then on, the url is shown masked, and an error
body is redacted before it is quoted (a server may echo the Authorization header). TLS
certificates are verified (``ca_file`` adds a private CA; ``insecure_skip_verify = true`` turns
verification off). Redirects are refused so that credentials never follow them.

Each request is retried with exponential backoff on connection errors, socket timeouts, 429 and
5xx answers; a query that timed out or would load too many samples raises :class:`QueryTooLarge`
at once so that the caller can split it. Bytes on the wire are counted for the benchmark.
"""
from __future__ import annotations

import base64
import hashlib
import http.client
import os
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Mapping

import msgspec

from connectors.errors import FatalSourceError, InputError, RetriableSourceError
from schemas.secrets import mask_url, redact, remember, url_credentials

DEFAULT_TOKEN_ENV = "COSTAUDIT_PROMETHEUS_TOKEN"
USER_ENV = "COSTAUDIT_PROMETHEUS_USER"
PASSWORD_ENV = "COSTAUDIT_PROMETHEUS_PASSWORD"
ORG_ID_ENV = "COSTAUDIT_PROMETHEUS_ORG_ID"
MAX_ANSWER = 256 << 20
"""Largest answer read, on the wire and decompressed (a bigger one is a gzip bomb or a query to
narrow: decoded, it would not fit the audit's memory)."""
TOO_LARGE = ("too many samples", "exceeded maximum resolution", "query timed out",
             "context deadline exceeded", "too many points", "cannot select more than",
             "the query hit the max number of")
# An execution error of a server whose storage is closing or reopening (a restart, a shutdown under
# way): the same query succeeds once it is back, so it is retried, never read as a bad query.
CLOSING = ("is closing", "open querier", "tsdb closed", "db closed", "shutting down")


def gunzip(data: bytes, limit: int) -> bytes | None:
    """The decompressed gzip members of ``data``; None when they expand past ``limit`` bytes
    (decompression stops there: a gzip bomb costs ``limit`` bytes, not gigabytes)."""
    out = bytearray()
    while data:
        inflate = zlib.decompressobj(wbits=31)
        out += inflate.decompress(data, limit + 1 - len(out))
        if len(out) > limit:
            return None
        if not inflate.eof:
            if inflate.unconsumed_tail:
                return None
            raise EOFError("compressed answer ended before the end-of-stream marker")
        data = inflate.unused_data
    return bytes(out)


class QueryTooLarge(RetriableSourceError):
    """The server refused a query as too big or too slow: a smaller one may pass."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuse redirects: a redirected request would carry the Authorization header along."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        """Never follow; the 3xx surfaces as an HTTPError."""
        return None


def tls_context(options: Mapping[str, Any]) -> ssl.SSLContext:
    """Certificate verification on, with the case's ``ca_file``; off only when asked."""
    ca_file = options.get("ca_file")
    context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    if options.get("insecure_skip_verify") is True:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def auth_headers(options: Mapping[str, Any], environ: Mapping[str, str] = os.environ
                 ) -> dict[str, str]:
    """Authorization (bearer, else basic) and tenant headers from the environment.

    A case that names ``username_env`` / ``password_env`` asks for basic auth: the default token
    variable is then not read, and a named variable that is unset is an InputError. Every value
    read is remembered by :mod:`schemas.secrets`, so that no message shows it.
    """
    headers: dict[str, str] = {}
    basic = bool(options.get("username_env") or options.get("password_env"))
    token = "" if basic else environ.get(str(options.get("token_env") or DEFAULT_TOKEN_ENV), "")
    user = _variable(options, "username_env", USER_ENV, environ)
    password = _variable(options, "password_env", PASSWORD_ENV, environ)
    if token:
        remember(token)
        headers["Authorization"] = "Bearer " + token.strip()
    elif user:
        pair = base64.b64encode(f"{user}:{password}".encode()).decode()
        remember(password, pair)
        headers["Authorization"] = "Basic " + pair
    elif basic:
        raise InputError(USER_ENV, "basic auth needs a user name", column="username_env",
                         expected="username_env naming a variable that holds the user name")
    if environ.get(ORG_ID_ENV):
        headers["X-Scope-OrgID"] = environ[ORG_ID_ENV]
    return headers


def _variable(options: Mapping[str, Any], option: str, default: str, environ: Mapping[str, str]) -> str:
    """The value of the variable an option names (an unset one is an InputError), else of the default."""
    name = options.get(option)
    if not name:
        return environ.get(default, "")
    if not environ.get(str(name)):
        raise InputError(str(name), f"the environment variable that {option} names is not set",
                         column=option, expected=f"{name} set to the {option[:-4]} of the Prometheus API")
    return environ[str(name)]


#: range queries in flight at once unless the source sets ``parallel_queries``
PARALLEL_QUERIES = 4
MAX_PARALLEL_QUERIES = 32


def parallel_queries(options: Mapping[str, Any]) -> int:
    """The source's ``parallel_queries``: a whole number from 1 (one query at a time) to 32."""
    value = options.get("parallel_queries", PARALLEL_QUERIES)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PARALLEL_QUERIES:
        raise InputError(f"option parallel_queries = {value!r}", "not a whole number of queries in flight",
                         column="parallel_queries", expected=f"a whole number from 1 to {MAX_PARALLEL_QUERIES}")
    return value


class PromClient:
    """POSTs form-encoded API calls and decodes their ``data``; counts bytes and responses."""

    retries: int = 5
    backoff_seconds: float = 0.5
    timeout_seconds: float = 120.0
    query_timeout: str = "2m"

    def __init__(self, url: str, options: Mapping[str, Any]):
        self.url = url.rstrip("/")
        self.shown = mask_url(self.url)   # how messages name the endpoint
        credentials = url_credentials(self.url)
        if credentials:
            raise InputError(self.shown, f"credentials may not be written into the url (it carries "
                             f"{credentials})", column="url",
                             expected="the url alone; credentials in the variables named by "
                                      "username_env / password_env or token_env")
        scheme = urllib.parse.urlsplit(self.url).scheme
        if scheme not in ("http", "https"):
            raise InputError(self.shown, "not an http(s) url", column="url",
                             expected="http://host:9090 or https://host/prometheus")
        self._headers = {"Accept": "application/json", "Accept-Encoding": "gzip",
                         "User-Agent": "costaudit", **auth_headers(options)}
        handlers = [_NoRedirect()]
        if scheme == "https":
            handlers.append(urllib.request.HTTPSHandler(context=tls_context(options)))
        self._opener = urllib.request.build_opener(*handlers)
        self.bytes_received = 0   # on the wire (gzip when the server compresses)
        self.bytes_decoded = 0    # JSON text after decompression
        self.requests = 0
        self.digest = hashlib.sha256()
        self.parallel = parallel_queries(options)
        self._counting = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def __repr__(self) -> str:
        """The endpoint only: headers hold secrets."""
        return f"PromClient({self.shown!r})"

    def call(self, path: str, params: Mapping[str, str], method: str = "POST") -> Any:
        """The ``data`` of one API call, retried on transient faults."""
        return self._retried(lambda: self._once(path, params, method))

    def _retried(self, attempt: Callable[[], Any]) -> Any:
        """``attempt()``, again after a transient fault with exponential backoff (never after a
        QueryTooLarge: the caller splits the query)."""
        delay = self.backoff_seconds
        for tried in range(self.retries + 1):
            try:
                return attempt()
            except QueryTooLarge:
                raise
            except RetriableSourceError:
                if tried == self.retries:
                    raise
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    def _once(self, path: str, params: Mapping[str, str], method: str) -> Any:
        """One request, counted; every failure mapped onto the connector error families."""
        wire, text = self._exchange(path, params, method)
        self._count(wire, text)
        return self._data(text)

    def _count(self, wire: int, text: bytes) -> None:
        with self._counting:
            self.bytes_received += wire
            self.requests += 1
            self.digest.update(text)

    def _exchange(self, path: str, params: Mapping[str, str], method: str) -> tuple[int, bytes]:
        """One request: (bytes on the wire, the JSON text); nothing counted; every failure mapped
        onto the connector error families."""
        form = urllib.parse.urlencode(params)
        if method == "GET":
            request = urllib.request.Request(f"{self.url}{path}?{form}", headers=self._headers)
        else:
            request = urllib.request.Request(self.url + path, data=form.encode(), headers={
                **self._headers, "Content-Type": "application/x-www-form-urlencoded"})
        try:
            with self._opener.open(request, timeout=self.timeout_seconds) as response:
                raw = self._read(response)
                encoding = response.headers.get("Content-Encoding", "")
        except urllib.error.HTTPError as exc:
            with exc:
                raw = self._read(exc)
                encoding = exc.headers.get("Content-Encoding", "") if exc.headers else ""
            raise self._http_error(exc.code, self._decode(raw, encoding)) from None
        except (OSError, http.client.HTTPException) as exc:  # URLError, timeouts, resets
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, ssl.SSLCertVerificationError):
                raise FatalSourceError(f"{self.shown}: TLS certificate not trusted ({reason.reason}); "
                                       "set ca_file") from None
            raise RetriableSourceError(f"{self.shown}: cannot connect ({redact(reason)})") from None
        return len(raw), self._decode(raw, encoding)

    def _read(self, response) -> bytes:
        """The body as sent, at most MAX_ANSWER bytes."""
        raw = response.read(MAX_ANSWER + 1)
        if len(raw) > MAX_ANSWER:
            raise self._too_big("on the wire")
        return raw

    def _too_big(self, where: str) -> FatalSourceError:
        return FatalSourceError(f"{self.shown}: answer larger than {MAX_ANSWER >> 20} MiB {where} "
                                "(a gzip bomb, or a query to narrow: a larger step or fewer series)")

    def _decode(self, raw: bytes, encoding: str) -> bytes:
        """The body as JSON bytes, gunzipped when the server compressed it (at most MAX_ANSWER)."""
        if encoding == "gzip" or raw[:2] == b"\x1f\x8b":
            try:
                raw = gunzip(raw, MAX_ANSWER)
            except (OSError, EOFError, zlib.error) as exc:
                raise RetriableSourceError(f"{self.shown}: truncated response ({exc})") from None
            if raw is None:
                raise self._too_big("decompressed")
        with self._counting:
            self.bytes_decoded += len(raw)
        return raw

    def _data(self, text: bytes) -> Any:
        """The ``data`` member of a success answer."""
        try:
            answer = msgspec.json.decode(text)
        except msgspec.DecodeError:
            raise RetriableSourceError(f"{self.shown}: answer is not JSON") from None
        if not isinstance(answer, dict) or answer.get("status") != "success":
            raise self._http_error(200, text)
        return answer.get("data")

    def _http_error(self, code: int, text: bytes) -> Exception:
        """Map an error answer onto QueryTooLarge, retriable or fatal. The body is quoted redacted
        (a server may echo the Authorization header), then cut."""
        try:
            answer = msgspec.json.decode(text)
        except msgspec.DecodeError:
            answer = {}
        answer = answer if isinstance(answer, dict) else {}
        kind = redact(str(answer.get("errorType", "")))[:40]
        body = answer.get("error") or text[:64 << 10].decode("utf-8", "replace")
        message = redact(str(body)[:64 << 10]).strip()   # redacted whole, then cut
        shown = message if len(message) <= 200 else message[:199] + "…"
        where = f"{self.shown}: HTTP {code}" + (f" {kind}" if kind else "") + f": {shown}"
        if kind == "timeout" or any(s in message.lower() for s in TOO_LARGE):
            return QueryTooLarge(where)
        if code in (408, 429) or code >= 500 or kind in ("unavailable", "internal", "canceled") \
                or any(s in message.lower() for s in CLOSING):
            return RetriableSourceError(where)
        if code in (401, 403):
            return FatalSourceError(where + " (check the token or user environment variables)")
        return FatalSourceError(where)

    # ---------------------------------------------------------------------------------------
    # API calls
    # ---------------------------------------------------------------------------------------

    def query_range(self, expr: str, start: str, end: str, step_seconds: int) -> list[dict]:
        """A matrix: ``[{"metric": {...}, "values": [[t, "v"], ...]}, ...]``."""
        data = self.call("/api/v1/query_range", self._range_params(expr, start, end, step_seconds))
        return list(data.get("result") or [])

    def ask(self, queries: list[tuple[str, str, str, int]]) -> list:
        """Start range queries, at most :attr:`parallel` in flight on this client's threads: a
        server evaluates each query on one core, so a month in 7-day chunks is read in about the
        time of its slowest chunk. With ``parallel_queries = 1`` nothing starts before
        :meth:`gather` asks them one by one."""
        if self.parallel <= 1:
            return list(queries)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.parallel, thread_name_prefix="promql")
        return [self._pool.submit(self._attempts, "/api/v1/query_range", self._range_params(*q))
                for q in queries]

    def gather(self, asked: list) -> list[list[dict] | QueryTooLarge]:
        """The answers of queries :meth:`ask` started. Each answer is counted and hashed in the
        order asked, whatever order the answers arrive in (the fingerprint does not depend on
        timing). An answer refusing its query as too large or too slow comes back as its
        :class:`QueryTooLarge`, for the caller to split; any other failure is raised (the first
        in the order asked)."""
        out: list[list[dict] | QueryTooLarge] = []
        for item in asked:
            if isinstance(item, tuple):  # one at a time
                out.append(self._range_or_refusal(*item))
                continue
            try:
                wire, text, data = item.result()
            except QueryTooLarge as refused:
                out.append(refused)
                continue
            self._count(wire, text)
            out.append(list(data.get("result") or []))
        return out

    def close(self) -> None:
        """Stop this client's query threads; queries not yet started are dropped."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def _range_or_refusal(self, expr: str, start: str, end: str, step_seconds: int) -> list[dict] | QueryTooLarge:
        try:
            return self.query_range(expr, start, end, step_seconds)
        except QueryTooLarge as refused:
            return refused

    def _range_params(self, expr: str, start: str, end: str, step_seconds: int) -> dict[str, str]:
        return {"query": expr, "start": start, "end": end, "step": f"{step_seconds}s",
                "timeout": self.query_timeout}

    def _attempts(self, path: str, params: Mapping[str, str]) -> tuple[int, bytes, Any]:
        """(wire bytes, JSON text, data) of one call, retried like :meth:`call`; nothing counted."""
        def attempt() -> tuple[int, bytes, Any]:
            wire, text = self._exchange(path, params, "POST")
            return wire, text, self._data(text)

        return self._retried(attempt)

    def query(self, expr: str, time_: str) -> tuple[str, list[dict]]:
        """An instant query's result type and result."""
        data = self.call("/api/v1/query", {"query": expr, "time": time_,
                                           "timeout": self.query_timeout})
        return str(data.get("resultType", "")), list(data.get("result") or [])

    def label_values(self, label: str, match: str, start: str, end: str) -> list[str]:
        """Values of one label among the series ``match`` selects in [start, end]."""
        data = self.call(f"/api/v1/label/{urllib.parse.quote(label)}/values",
                         {"match[]": match, "start": start, "end": end}, method="GET")
        return sorted(str(v) for v in (data or []))
