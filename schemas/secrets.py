"""Secrets are never shown: urls masked, credentials redacted in every message and log line.

- :func:`mask_url` removes the user information of every url in a text (``scheme://user:pw@host``
  → ``scheme://***@host``) and replaces the values of secret-looking query parameters (``token``,
  ``key``, ``sig``, ``signature``, ``X-Amz-Signature``, ``X-Amz-Credential``, ``access_token``,
  ``password`` …) with ``***``. Where a source's url or path is shown, it is shown masked.
- :func:`redact` masks urls, then every credential a message or log line may carry: Authorization
  headers (Bearer, Basic, AWS signatures), bare bearer and basic credentials, AWS access key ids,
  secret keys, session tokens and signatures after their labels, Google private keys, OAuth tokens
  (``ya29.``) and API keys (``AIza``), and the values of the environment variables that hold
  credentials: the standard ones (:data:`SECRET_ENV`), the fields of the file that
  ``GOOGLE_APPLICATION_CREDENTIALS`` names, and those a case names (:func:`remember_env`).
- :func:`url_credentials` says what credentials a url carries, for the checks that refuse them.
- :class:`RedactingFilter` applies :func:`redact` to log records; :func:`guard_logging` puts it on
  the handlers that print (the command line installs it).

Standard library only, so that every layer (connectors, collector, audit, the command line) uses
this one module.
"""
from __future__ import annotations

import base64
import json
import logging
import os
import re
from functools import lru_cache
from typing import Iterable, Mapping
from urllib.parse import parse_qsl, unquote, urlsplit

MASK = "***"
MIN_SECRET = 6
"""Shortest environment value masked wherever it appears (a shorter one would mask ordinary words;
the patterns below still mask it inside a header or after a label)."""
SECRET_ENV = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
              "COSTAUDIT_PROMETHEUS_TOKEN", "COSTAUDIT_PROMETHEUS_PASSWORD")
"""Standard variables whose values are credentials."""
GOOGLE_FILE_ENV = "GOOGLE_APPLICATION_CREDENTIALS"
GOOGLE_FIELDS = ("private_key", "private_key_id", "client_secret", "refresh_token", "access_token")
MAX_CREDENTIALS_FILE = 1 << 20

#: a query parameter is secret when its name holds one of these words, or ends in one of SECRET_ENDS
SECRET_WORDS = ("token", "secret", "passw", "pwd", "signature", "credential", "apikey", "api_key",
                "accesskey", "access_key", "private")
SECRET_ENDS = {"key", "sig", "auth"}

USERINFO = re.compile(r"\b([a-z][a-z0-9+.-]*://)(?:[^\s/?#@:'\"<>]*:[^\s?#'\"<>]*@|[^\s/?#@'\"<>]*@)", re.I)
"""``scheme://user:password@``; a password may hold ``/`` (AWS secret keys do), so ``user:`` is
masked up to the last ``@`` of the url."""
QUERY = re.compile(r"([?&])([^=&#\s?'\"<>]+)=([^&#\s'\"<>]*)")
PRIVATE_KEY = re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY-----|[^\"']*)",
                         re.S)
AUTH_SCHEMES = "bearer|basic|token|digest|negotiate|aws4-hmac-sha256|aws|apikey"
ONE_WORD = {"bearer", "basic", "token"}
AUTHORIZATION = re.compile(r"((?:proxy-)?authorization[\"']?\s*[:=]\s*(?:b?[\"'])?)(?:(%s)\s+)?([^\r\n\"']*)"
                           % AUTH_SCHEMES, re.I)
BEARER = re.compile(r"\b(bearer)\s+(?=[A-Za-z0-9._~+/=-]*[0-9._~+/=-])[A-Za-z0-9._~+/-]{6,}=*", re.I)
BASIC = re.compile(r"\b(basic)\s+([A-Za-z0-9+/]{4,}={0,2})(?![A-Za-z0-9+/=])", re.I)
AWS_KEY_ID = re.compile(r"\b(?:AKIA|ASIA|AIDA|AROA|ABIA|ACCA|AGPA|ANPA|ANVA|AIPA|APKA)[A-Z0-9]{16}\b")
LABELS = (r"(?:aws_?)?secret_?access_?key|(?:aws_?)?session_?token|(?:aws_?)?security_?token"
          r"|x-amz-security-token|x-amz-signature|x-amz-credential|signature|credential"
          r"|private_key(?:_id)?|client_secret|refresh_token|access_token|id_token|(?<![a-z])token"
          r"|password|passwd|api_?key")
# a label that ends a path (``/etc/passwd: unknown file extension``) is a file's name, not a label
LABELLED = re.compile(r"((?<![/\\])(?:%s)[\"']?\s*[:=]\s*b?)(?:\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|[^\s\"',;&}<>)]+)"
                      % LABELS, re.I)
GOOGLE_TOKEN = re.compile(r"\bya29\.[0-9A-Za-z_-]+")
GOOGLE_API_KEY = re.compile(r"\bAIza[0-9A-Za-z_-]{30,}")

_remembered: set[str] = set()


# --------------------------------------------------------------------------------------------
# urls


def secret_parameter(name: str) -> bool:
    """Whether a query parameter's name says its value is a credential."""
    lowered = unquote(name).lower()
    return any(word in lowered for word in SECRET_WORDS) or re.split(r"[-_.]", lowered)[-1] in SECRET_ENDS


def _mask_parameter(match: re.Match) -> str:
    start, name, value = match.groups()
    return f"{start}{name}={MASK}" if value and secret_parameter(name) else match.group(0)


def mask_url(text) -> str:
    """``text`` with the user information of every url and the values of secret query parameters
    replaced by ``***`` (any text: a url, a path, a message)."""
    text = "" if text is None else str(text)
    if "@" in text:
        text = USERINFO.sub(r"\1" + MASK + "@", text)
    if "=" in text:
        text = QUERY.sub(_mask_parameter, text)
    return text


def url_credentials(text: str) -> str | None:
    """What credentials a url carries ("a user name and password", "a 'sig' query parameter"), or
    None. A url is ``scheme://…``; any other text carries none."""
    text = str(text).strip()
    if "://" not in text:
        return None
    head = re.split(r"[?#]", text, maxsplit=1)[0]
    authority = head.split("://", 1)[1]
    if not text.lower().startswith(("http://", "https://")):
        bucket = authority.split("/", 1)[0]   # s3://bucket/key: a key may hold an @, a bucket no ':'
        authority = authority if ":" in bucket else bucket
    if "@" in authority:
        userinfo = authority.rsplit("@", 1)[0]
        return "a user name and password" if ":" in userinfo else "a user name (or token)"
    try:
        query = urlsplit(text).query
    except ValueError:
        return None
    for name, _ in parse_qsl(query, keep_blank_values=True):
        if secret_parameter(name):
            return f"a {name!r} query parameter"
    return None


# --------------------------------------------------------------------------------------------
# credentials in any text


def remember(*values: str | None) -> None:
    """Mask these values wherever they appear from now on (credentials read from the environment)."""
    for value in values:
        text = (value or "").strip()
        if len(text) >= MIN_SECRET:
            _remembered.add(text)


def remember_env(names: Iterable[str | None], environ: Mapping[str, str] = os.environ) -> None:
    """Mask the values of these environment variables (the ones a case names) wherever they appear."""
    remember(*(environ.get(str(name), "") for name in names if name))


def known_secrets() -> set[str]:
    """Every value masked verbatim: remembered, standard variables, the Google credentials file."""
    values = set(_remembered)
    values.update(v.strip() for v in (os.environ.get(n, "") for n in SECRET_ENV) if len(v.strip()) >= MIN_SECRET)
    values.update(_google_file(os.environ.get(GOOGLE_FILE_ENV, "")))
    return values


def _google_file(path: str) -> frozenset[str]:
    """The credential fields of the GOOGLE_APPLICATION_CREDENTIALS file (read once per version)."""
    if not path:
        return frozenset()
    try:
        stat = os.stat(path)
    except OSError:
        return frozenset()
    return _google_fields(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=4)
def _google_fields(path: str, _mtime: int, size: int) -> frozenset[str]:
    if size > MAX_CREDENTIALS_FILE:
        return frozenset()
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError, RecursionError):
        return frozenset()
    if not isinstance(document, dict):
        return frozenset()
    values = [str(document[k]).strip() for k in GOOGLE_FIELDS if isinstance(document.get(k), str)]
    escaped = [json.dumps(v)[1:-1] for v in values]   # as it reads inside a JSON text
    return frozenset(v for v in values + escaped if len(v) >= MIN_SECRET)


def _authorization(match: re.Match) -> str:
    """A header's credentials masked: a one-word credential (Bearer, Basic, token) alone; an AWS
    signature's parts by their labels (SignedHeaders stays readable); the rest of the line for any
    other scheme."""
    head, scheme, value = match.groups()
    if scheme and scheme.lower() == "aws4-hmac-sha256":   # Credential= and Signature= masked by LABELLED
        return match.group(0)
    if scheme and scheme.lower() in ONE_WORD:
        rest = value.split(None, 1)
        return f"{head}{scheme} {MASK}" + (f" {rest[1]}" if len(rest) > 1 else "")
    return f"{head}{scheme + ' ' if scheme else ''}{MASK}"


def _basic(match: re.Match) -> str:
    """``Basic <base64 of user:password>`` masked; ``Basic authentication`` (not base64) kept."""
    word, value = match.groups()
    try:
        pair = base64.b64decode(value, validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        pair = ""
    return f"{word} {MASK}" if ":" in pair or any(c in value for c in "0123456789+/=") else match.group(0)


def _labelled(match: re.Match) -> str:
    value = match.group(0)[len(match.group(1)):]
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{match.group(1)}{quote}{MASK}{quote}"


def redact(text) -> str:
    """``text`` with every credential masked: urls (see :func:`mask_url`), Authorization headers,
    bearer and basic credentials, AWS keys, tokens and signatures, Google keys and tokens, and the
    values of the credential variables of the environment."""
    text = "" if text is None else str(text)
    if not text:
        return text
    text = PRIVATE_KEY.sub("-----BEGIN PRIVATE KEY-----" + MASK, text)
    text = AUTHORIZATION.sub(_authorization, text)
    text = BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = BASIC.sub(_basic, text)
    text = AWS_KEY_ID.sub(MASK, text)
    text = LABELLED.sub(_labelled, text)
    text = GOOGLE_TOKEN.sub("ya29." + MASK, text)
    text = GOOGLE_API_KEY.sub(MASK, text)
    text = mask_url(text)
    for value in sorted(known_secrets(), key=len, reverse=True):
        if value in text:
            text = text.replace(value, MASK)
    return text


# --------------------------------------------------------------------------------------------
# log lines


class RedactingFilter(logging.Filter):
    """Masks credentials in a log record: its message, and the traceback it carries."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:  # a malformed record is not ours to break
            return True
        clean = redact(text)
        if clean != text:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


REDACTING = RedactingFilter()


def guard_logging(*loggers: logging.Logger) -> None:
    """Put :data:`REDACTING` on every handler that prints: the root logger's, the last-resort
    handler, and those of ``loggers`` (a handler filters every record it prints, whichever logger
    made it)."""
    handlers = [*logging.root.handlers, *(h for lg in loggers for h in lg.handlers)]
    if logging.lastResort is not None:
        handlers.append(logging.lastResort)
    for handler in handlers:
        if REDACTING not in handler.filters:
            handler.addFilter(REDACTING)
    for logger in loggers:
        if REDACTING not in logger.filters:
            logger.addFilter(REDACTING)
