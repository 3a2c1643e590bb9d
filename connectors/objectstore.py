"""``s3://`` sources → a local file or folder, through a cache keyed by bucket, key and ETag.

``materialise(uri, options)`` is what ``Connector.locate()`` calls for a source with a ``uri``:

* ``s3://bucket/key`` names one object (found with HEAD); the cached file is returned, under the
  key's own file name, so a connector still sees ``.csv.gz`` or ``.parquet``.
* ``s3://bucket/prefix/`` (or ``s3://bucket/prefix`` when no object has that key, or
  ``s3://bucket``) names a folder. It is listed in full (paginated) and a local folder laid out
  like the prefix is returned, holding:

  - for a Cost and Usage Report export (the listing holds ``…-Manifest.json`` objects): per
    billing period, the newest manifest and the files it names, nothing else. Legacy CUR keeps
    ``<report>/<yyyymmdd-yyyymmdd>/<report>-Manifest.json`` with ``reportKeys``; CUR 2.0 keeps
    ``<export>/metadata/BILLING_PERIOD=YYYY-MM/…-Manifest.json`` with ``dataFiles``. AWS writes a
    manifest only once its files are delivered, so the manifests are read last, after the
    listing is complete, and older assemblies left in the bucket are never downloaded;
  - otherwise every object under the prefix (zero-byte "folder" markers excepted).

Credentials come from boto3's standard chain (environment, ``profile``, SSO, web identity,
container and instance roles); options may carry ``profile``, ``region`` and ``endpoint_url``
(S3-compatible stores, tests), never keys. No credential is ever put into a message, and the
botocore / urllib3 loggers get a filter that masks the Authorization header, signatures and
session tokens should anyone turn on DEBUG logging.

Downloads stream in chunks into ``$COSTAUDIT_CACHE/s3`` (default ``$XDG_CACHE_HOME/costaudit/s3``,
i.e. ``~/.cache/costaudit/s3``): a temporary file in the target folder, renamed once complete.
An object whose ETag has not changed is not downloaded again. A GET carries ``If-Match`` with the
listed ETag, so an object rewritten between listing and download is retried, never mixed in.

Faults: throttling, 5xx, dropped connections and timeouts raise ``RetriableSourceError`` after
botocore's own retries (standard mode); access denied raises ``FatalSourceError`` naming the
bucket, the prefix and the permission needed; a missing bucket or an empty prefix raises
``InputError`` naming the uri.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from collections import defaultdict
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator, Mapping

from connectors.errors import FatalSourceError, InputError, RetriableSourceError, SourceError

log = logging.getLogger(__name__)

MAX_RETRIES = 4             # botocore retries per request after the first try (standard mode)
PAGE_SIZE = 1000            # keys per ListObjectsV2 page
CHUNK_BYTES = 1 << 20       # streamed download block
CONNECT_TIMEOUT = 10        # seconds
READ_TIMEOUT = 60           # seconds
MANIFEST_SUFFIX = "-Manifest.json"
PERIOD = re.compile(r"(?:^|/)(\d{8}-\d{8}|BILLING_PERIOD=\d{4}-\d{2})(?=/|$)")
CREDENTIAL_OPTIONS = {"aws_access_key_id", "aws_secret_access_key", "aws_session_token",
                      "access_key_id", "secret_access_key", "session_token", "access_key",
                      "secret_key", "secret", "token", "password", "credentials"}
THROTTLING = {"SlowDown", "Throttling", "ThrottlingException", "ThrottledException",
              "RequestThrottled", "RequestThrottledException", "TooManyRequestsException",
              "RequestLimitExceeded", "BandwidthLimitExceeded", "RequestTimeout",
              "RequestTimeoutException", "PriorRequestNotComplete", "InternalError",
              "ServiceUnavailable", "OperationAborted"}
REJECTED_CREDENTIALS = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken",
                        "InvalidToken", "TokenRefreshRequired", "InvalidClientTokenId"}
WRONG_REGION = {"PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException",
                "301", "400"}
LOGGERS = ("botocore", "boto3", "s3transfer", "urllib3")
USERINFO = re.compile(r"^([a-z0-9]+://)[^/@:]+:[^@]*@", re.I)   # scheme://user:secret@...
BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{2,254}")


@dataclass(frozen=True)
class Location:
    """A parsed ``s3://bucket/key`` uri (key may be "" or end with "/")."""

    bucket: str
    key: str

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


@dataclass(frozen=True)
class S3Object:
    """One listed object: what the cache key and the manifest choice need."""

    key: str
    etag: str           # as S3 sends it, quotes included (used for If-Match)
    size: int
    modified: datetime


# --------------------------------------------------------------------------------------------
# entry point


def materialise(uri: str, options: Mapping[str, Any]) -> Path:
    """Download ``uri`` (one object or a prefix) into the cache; return the local file or folder."""
    location = parse_uri(uri)
    refuse_credentials(location.uri, options)
    client = make_client(location.uri, options)
    try:
        store = Cache(cache_root())
        if location.key and not location.key.endswith("/"):
            single = head_object(client, location)
            if single is not None:
                return store.fetch(client, location.bucket, single, location.key)
            location = Location(location.bucket, location.key + "/")
        return materialise_prefix(client, store, location)
    finally:
        client.close()


def materialise_prefix(client, store: "Cache", location: Location) -> Path:
    """List a prefix, choose what to read (manifests first), download it, return a folder view."""
    objects = list_prefix(client, location)
    if not objects:
        raise InputError(location.uri, "no objects under this prefix (or no such prefix)",
                         expected="an s3:// uri naming an object or a non-empty prefix")
    chosen = choose(client, store, location, objects)
    files = {relative_key(location, obj.key): (store.fetch(client, location.bucket, obj, location.key), obj.etag)
             for obj in chosen}
    log.info("%s: %d objects listed, %d read", location.uri, len(objects), len(chosen))
    return store.view(location, files)


def parse_uri(uri: str) -> Location:
    """Split ``s3://bucket/key``; anything else is an InputError (credentials in it masked)."""
    text = str(uri).strip()
    if USERINFO.match(text):
        raise InputError(USERINFO.sub(r"\1***@", text), "credentials may not be written into the uri",
                         expected="s3://bucket/key; credentials come from the AWS credential chain")
    if not text.startswith("s3://"):
        raise InputError(text, "not an s3:// uri", expected="s3://bucket/key or s3://bucket/prefix/")
    bucket, _, key = text[len("s3://"):].partition("/")
    if not BUCKET.fullmatch(bucket):
        raise InputError(text, f"{bucket!r} is not a bucket name", expected="s3://bucket/key or s3://bucket/prefix/")
    return Location(bucket, key)


def refuse_credentials(uri: str, options: Mapping[str, Any]) -> None:
    """A case file never carries credentials: refuse any option that looks like one (value unseen)."""
    for key in options:
        if str(key).lower() in CREDENTIAL_OPTIONS:
            raise InputError(uri, f"option {key!r} is not accepted: costaudit never reads credentials "
                                  "from the case file", column=str(key),
                             expected="credentials from the AWS chain (environment, profile, SSO, role)")


# --------------------------------------------------------------------------------------------
# client


def make_client(uri: str, options: Mapping[str, Any]):
    """An S3 client from boto3's standard chain, with standard-mode retries and timeouts."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ProfileNotFound

    profile = options.get("profile") or None
    endpoint = options.get("endpoint_url") or None
    try:
        session = boto3.session.Session(profile_name=profile, region_name=options.get("region") or None)
    except ProfileNotFound:
        raise InputError(uri, f"AWS profile {profile!r} not found", column="profile",
                         expected="a profile in ~/.aws/config or ~/.aws/credentials") from None
    config = Config(retries={"max_attempts": MAX_RETRIES, "mode": "standard"},  # retries, not tries
                    connect_timeout=CONNECT_TIMEOUT, read_timeout=READ_TIMEOUT,
                    s3={"addressing_style": "path"} if endpoint else None,
                    user_agent_extra="costaudit")
    client = session.client("s3", endpoint_url=endpoint, config=config)
    guard_logs()
    return client


def head_object(client, location: Location) -> S3Object | None:
    """The object at ``location.key``, or None when there is none (then the uri is a prefix)."""
    from botocore.exceptions import ClientError

    try:
        with translated(location, "read", location.key, passthrough=("404", "NoSuchKey", "NotFound")):
            reply = client.head_object(Bucket=location.bucket, Key=location.key)
    except ClientError:
        return None
    return S3Object(location.key, reply["ETag"], int(reply["ContentLength"]), reply["LastModified"])


def list_prefix(client, location: Location) -> list[S3Object]:
    """Every object under the prefix, through the ListObjectsV2 paginator."""
    paginator = client.get_paginator("list_objects_v2")
    pages = paginator.paginate(Bucket=location.bucket, Prefix=location.key,
                               PaginationConfig={"PageSize": PAGE_SIZE})
    out = []
    with translated(location, "list", location.key):
        for page in pages:
            for item in page.get("Contents", []):
                if item["Key"].endswith("/") and int(item["Size"]) == 0:
                    continue  # a console "folder"
                out.append(S3Object(item["Key"], item["ETag"], int(item["Size"]), item["LastModified"]))
    return out


# --------------------------------------------------------------------------------------------
# what to read: the newest manifest of each billing period, or everything


def choose(client, store: "Cache", location: Location, objects: list[S3Object]) -> list[S3Object]:
    """The objects to read: per period the newest manifest and its files; without manifests all."""
    manifests = newest_manifests(objects)
    if not manifests:
        return sorted(objects, key=lambda o: o.key)
    by_key = {o.key: o for o in objects}
    chosen: dict[str, S3Object] = {}
    for manifest in manifests:  # read last: only once the listing is complete
        chosen[manifest.key] = manifest
        path = store.fetch(client, location.bucket, manifest, location.key)
        for key in manifest_keys(path, location, manifest):
            chosen[key] = _listed(by_key, key, location, manifest)
    return sorted(chosen.values(), key=lambda o: o.key)


def newest_manifests(objects: list[S3Object]) -> list[S3Object]:
    """Per billing period (or folder), the manifest written last; ties go to the period-level one."""
    groups: dict[str, list[S3Object]] = defaultdict(list)
    for obj in objects:
        if obj.key.endswith(MANIFEST_SUFFIX):
            groups[period_of(obj.key)].append(obj)
    return [max(group, key=lambda o: (o.modified, -o.key.count("/"), o.key)) for group in groups.values()]


def period_of(key: str) -> str:
    """The key up to its billing period folder (``20240901-20241001``, ``BILLING_PERIOD=2024-09``)."""
    match = PERIOD.search(key)
    return key[:match.end(1)] if match else key.rpartition("/")[0]


def manifest_keys(path: Path, location: Location, manifest: S3Object) -> list[str]:
    """The keys a manifest names: ``reportKeys`` (legacy CUR) or ``dataFiles`` (CUR 2.0)."""
    where = f"s3://{location.bucket}/{manifest.key}"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(where, f"manifest is not valid JSON: {exc}") from None
    listed_in = next((f for f in ("dataFiles", "reportKeys") if isinstance(doc, dict) and f in doc), None)
    names = doc[listed_in] if listed_in else None  # an empty list: a period without charges
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InputError(where, "manifest names no files", expected="a list in 'reportKeys' or 'dataFiles'")
    return [_manifest_key(name, location, where) for name in names]


def _manifest_key(name: str, location: Location, where: str) -> str:
    """A manifest entry as a key of this bucket (entries may be full s3:// uris)."""
    if name.startswith("s3://"):
        bucket, _, key = name[len("s3://"):].partition("/")
        if bucket != location.bucket:
            raise InputError(where, f"manifest names a file in another bucket: {name}")
        return key
    return name.lstrip("/")


def _listed(by_key: Mapping[str, S3Object], key: str, location: Location, manifest: S3Object) -> S3Object:
    """The listed object a manifest names; missing means a delivery in progress (or a bad uri)."""
    where = f"s3://{location.bucket}/{manifest.key}"
    if not key.startswith(location.key):
        raise InputError(where, f"manifest names s3://{location.bucket}/{key}, outside {location.uri}",
                         expected="a uri naming the whole export folder (data and metadata)")
    if key not in by_key:
        raise RetriableSourceError(f"{where}: names s3://{location.bucket}/{key}, which is not in the "
                                   "listing (the export is being delivered or restated)")
    return by_key[key]


def relative_key(location: Location, key: str) -> str:
    """The key below the prefix, refused when it could escape the local folder."""
    rel = key[len(location.key):]
    parts = rel.split("/")
    if any(part in ("", ".", "..") for part in parts) or "\\" in rel or "\0" in rel:
        raise InputError(f"s3://{location.bucket}/{key}", "key cannot be mirrored as a local path",
                         expected="keys without empty, '.' or '..' segments")
    return rel


# --------------------------------------------------------------------------------------------
# the cache


def cache_root() -> Path:
    """``$COSTAUDIT_CACHE/s3``, else ``$XDG_CACHE_HOME/costaudit/s3`` (``~/.cache/costaudit/s3``)."""
    base = os.environ.get("COSTAUDIT_CACHE")
    if base:
        return Path(base).expanduser() / "s3"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "costaudit" / "s3"


def _digest(*parts: str) -> str:
    """sha256 of the parts, NUL-separated."""
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


class Cache:
    """Objects under ``objects/<bucket>/<digest of bucket, key, ETag>/<name>``; prefix views under
    ``views/<bucket>/<digest of prefix and listing>/<leaf>`` (hard links to the objects)."""

    def __init__(self, root: Path):
        self.root = root

    def object_path(self, bucket: str, obj: S3Object) -> Path:
        """Where an object version lives: keyed by bucket + key + ETag, named as the key."""
        digest = _digest(bucket, obj.key, obj.etag.strip('"'))
        return self.root / "objects" / bucket / digest[:2] / digest / obj.key.rpartition("/")[2]

    def fetch(self, client, bucket: str, obj: S3Object, prefix: str) -> Path:
        """The cached copy of ``obj``, downloaded first unless this ETag is already here."""
        target = self.object_path(bucket, obj)
        if target.is_file() and target.stat().st_size == obj.size:
            log.debug("cache hit s3://%s/%s", bucket, obj.key)
            return target
        download(client, Location(bucket, prefix), obj, target)
        return target

    def view(self, location: Location, files: Mapping[str, tuple[Path, str]]) -> Path:
        """A folder laid out like the prefix holding exactly ``files`` (relative key → object)."""
        listing = "\n".join(f"{rel}\0{etag}" for rel, (_, etag) in sorted(files.items()))
        digest = _digest(location.key, listing)[:32]
        home = self.root / "views" / location.bucket / digest
        leaf = location.key.rstrip("/").rpartition("/")[2] or location.bucket
        if (home / leaf).is_dir():
            return home / leaf
        home.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=home.parent, prefix=f".{digest}.part-"))
        try:
            for rel, (blob, _) in files.items():
                _link(blob, staging / leaf / rel)
            _publish_folder(staging, home)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return home / leaf


def _link(source: Path, dest: Path) -> None:
    """Hard-link ``source`` at ``dest`` (a copy where the file system has no hard links)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, dest)
    except OSError:
        shutil.copyfile(source, dest)


def _publish_folder(staging: Path, home: Path) -> None:
    """Rename a finished folder into place; a concurrent builder that won leaves an equal one."""
    try:
        os.rename(staging, home)
    except OSError:
        if not home.is_dir():
            raise


def download(client, location: Location, obj: S3Object, target: Path) -> None:
    """Stream one object version into ``target`` atomically (temporary file, then rename)."""
    with translated(location, "read", obj.key):
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=target.parent, prefix=".part-")
        try:
            with os.fdopen(handle, "wb") as out:
                written = _stream(client, location.bucket, obj, out)
                out.flush()
                os.fsync(out.fileno())
            if written != obj.size:
                raise RetriableSourceError(f"s3://{location.bucket}/{obj.key}: read {written} of "
                                           f"{obj.size} bytes")
            os.replace(temp, target)
        finally:
            Path(temp).unlink(missing_ok=True)
    log.debug("downloaded s3://%s/%s (%d bytes)", location.bucket, obj.key, written)


def _stream(client, bucket: str, obj: S3Object, out) -> int:
    """GET the listed version (If-Match) and copy its body in chunks; return the bytes written."""
    reply = client.get_object(Bucket=bucket, Key=obj.key, IfMatch=obj.etag)
    written = 0
    with closing(reply["Body"]) as body:
        for chunk in body.iter_chunks(CHUNK_BYTES):
            out.write(chunk)
            written += len(chunk)
    return written


# --------------------------------------------------------------------------------------------
# faults


@contextmanager
def translated(location: Location, action: str, target: str, passthrough: tuple[str, ...] = ()) -> Iterator[None]:
    """Turn boto3 / network faults into source errors; ``action`` is "list" or "read"."""
    import urllib3.exceptions as u3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except SourceError:
        raise
    except ClientError as exc:
        if _code(exc) in passthrough:
            raise
        raise client_fault(exc, location, action, target) from None
    except (BotoCoreError, u3.HTTPError, ConnectionError, TimeoutError) as exc:
        raise core_fault(exc, location, action, target) from None
    except OSError as exc:
        raise FatalSourceError(f"{location.uri}: could not write the local cache: "
                               f"{exc.strerror or type(exc).__name__}") from None


def attempts() -> int:
    """Requests botocore makes before it gives up: the first one and its retries."""
    return MAX_RETRIES + 1


def _code(exc) -> str:
    """The S3 error code of a ClientError (HEAD replies carry only the status, e.g. "403")."""
    return str(exc.response.get("Error", {}).get("Code", ""))


def _status(exc) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


def client_fault(exc, location: Location, action: str, target: str) -> SourceError:
    """A SourceError for an S3 error reply."""
    code, status = _code(exc), _status(exc)
    where = f"s3://{location.bucket}/{target}"
    if code in THROTTLING or status == 429 or status >= 500:
        return RetriableSourceError(f"{where}: S3 answered {code or status} after {attempts()} attempts "
                                    "(throttled or unavailable)")
    if code in ("NoSuchKey", "PreconditionFailed", "412"):
        return RetriableSourceError(f"{where}: the object changed or vanished since it was listed")
    if code in ("NoSuchBucket",):
        return InputError(location.uri, f"no such bucket {location.bucket!r}",
                          expected="an existing bucket (check the name, region and endpoint)")
    if code in REJECTED_CREDENTIALS:
        return FatalSourceError(f"{where}: the AWS credentials were rejected ({code}); check the "
                                "profile or environment that the AWS credential chain found")
    if code in ("AccessDenied", "403", "AllAccessDisabled", "AccountProblem") or status == 403:
        return FatalSourceError(access_denied(location, action, target))
    if code in WRONG_REGION or status == 301:
        return InputError(location.uri, f"S3 refused the request ({code or status}): the bucket is "
                          "probably in another region", column="region",
                          expected="region = the bucket's region in the source table")
    return FatalSourceError(f"{where}: S3 answered {code or status}")


def access_denied(location: Location, action: str, target: str) -> str:
    """The message for a 403: bucket, prefix and the permission that is missing."""
    bucket, prefix = location.bucket, location.key
    if action == "list":
        return (f"access denied listing s3://{bucket}/{prefix} (bucket {bucket!r}, prefix {prefix!r}): "
                f"the credentials need s3:ListBucket on arn:aws:s3:::{bucket}"
                + (f" with s3:prefix {prefix!r}" if prefix else "") + " (see docs/access.md)")
    scope = prefix if prefix else target
    return (f"access denied reading s3://{bucket}/{target} (bucket {bucket!r}, prefix {scope!r}): the "
            f"credentials need s3:GetObject on arn:aws:s3:::{bucket}/{scope}*"
            " (without s3:ListBucket S3 also answers 403 for a key that does not exist; see docs/access.md)")


def core_fault(exc, location: Location, action: str, target: str) -> SourceError:
    """A SourceError for a client-side fault: no credentials, bad parameters, or the network."""
    from botocore import exceptions as bx

    where = f"s3://{location.bucket}/{target}"
    if isinstance(exc, (bx.NoCredentialsError, bx.PartialCredentialsError, bx.CredentialRetrievalError,
                        bx.TokenRetrievalError, bx.SSOError)):
        return FatalSourceError(f"{where}: no usable AWS credentials ({type(exc).__name__}); costaudit "
                                "uses the AWS credential chain: environment, profile, SSO or role")
    if isinstance(exc, (bx.ParamValidationError, bx.InvalidRegionError)):
        return InputError(location.uri, f"invalid request: {scrub(str(exc))}")
    if isinstance(exc, bx.NoRegionError):
        return InputError(location.uri, "no AWS region configured", column="region",
                          expected="region in the source table, AWS_REGION or a profile with one")
    return RetriableSourceError(f"{where}: {action} failed after {attempts()} attempts: "
                                f"{type(exc).__name__}: {scrub(str(exc))}")


# --------------------------------------------------------------------------------------------
# no credential in any log line

_SECRETS = [
    (re.compile(r"(Credential=)[^/\s,'\"&]+", re.I), r"\1***"),
    (re.compile(r"(X-Amz-Credential=)[^&\s'\"]+", re.I), r"\1***"),
    (re.compile(r"(Signature[=:]\s*)[0-9a-f]{16,}", re.I), r"\1***"),
    (re.compile(r"(x-amz-security-token['\"]?\s*[:=]\s*(?:b?['\"])?)[^'\"\s,&}]+", re.I), r"\1***"),
    (re.compile(r"((?:aws_)?(?:secret_access_key|session_token|access_key_id)['\"]?\s*[:=]\s*['\"]?)[^'\"\s,}]+",
                re.I), r"\1***"),
    (re.compile(r"\b(?:AKIA|ASIA|AIDA|AROA|ABIA|ACCA)[A-Z0-9]{16}\b"), "***"),
]


def scrub(text: str) -> str:
    """``text`` with access key ids, signatures, session tokens and secrets masked."""
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


class RedactCredentials(logging.Filter):
    """Masks credentials in records of the AWS SDK loggers (botocore logs signed headers at DEBUG)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:  # a malformed record is not ours to break
            return True
        clean = scrub(text)
        if clean != text:
            record.msg, record.args = clean, None
        return True


_REDACT = RedactCredentials()


def guard_logs() -> None:
    """Attach the redacting filter to every botocore / boto3 / s3transfer / urllib3 logger."""
    for name in ("botocore.auth", "botocore.endpoint", "botocore.hooks", "botocore.parsers",
                 "botocore.retryhandler", "botocore.httpsession", "urllib3.connectionpool", __name__):
        logging.getLogger(name)
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and (name.split(".")[0] in LOGGERS or name == __name__):
            if _REDACT not in logger.filters:
                logger.addFilter(_REDACT)


guard_logs()  # at import too: any boto3 client made in this process logs masked from now on
