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

The cache is :mod:`connectors.objectstore_cache`; the fault translation and the log filter are
:mod:`connectors.objectstore_faults`.
"""
from __future__ import annotations

import json
import logging
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping

from connectors import objectstore_faults as faults  # faults.MAX_RETRIES: read when a client is made
from connectors.errors import InputError, RetriableSourceError, missing_library
from connectors.objectstore_cache import Cache, S3Object, cache_root
from connectors.objectstore_faults import LOG_NAME, Location, guard_logs, translated
from schemas.secrets import mask_url, url_credentials

log = logging.getLogger(LOG_NAME)

PAGE_SIZE = 1000            # keys per ListObjectsV2 page
CONNECT_TIMEOUT = 10        # seconds
READ_TIMEOUT = 60           # seconds
MANIFEST_SUFFIX = "-Manifest.json"
PERIOD = re.compile(r"(?:^|/)(\d{8}-\d{8}|BILLING_PERIOD=\d{4}-\d{2})(?=/|$)")
CREDENTIAL_OPTIONS = {"aws_access_key_id", "aws_secret_access_key", "aws_session_token",
                      "access_key_id", "secret_access_key", "session_token", "access_key",
                      "secret_key", "secret", "token", "password", "credentials"}
BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{2,254}")


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
    credentials = url_credentials(text)
    if credentials:
        raise InputError(mask_url(text), f"credentials may not be written into the uri (it carries {credentials})",
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
    try:
        import boto3
    except ImportError as exc:
        raise missing_library(uri, exc, "aws") from None
    from botocore.config import Config
    from botocore.exceptions import ProfileNotFound

    profile = options.get("profile") or None
    endpoint = options.get("endpoint_url") or None
    try:
        session = boto3.session.Session(profile_name=profile, region_name=options.get("region") or None)
    except ProfileNotFound:
        raise InputError(uri, f"AWS profile {profile!r} not found", column="profile",
                         expected="a profile in ~/.aws/config or ~/.aws/credentials") from None
    config = Config(retries={"max_attempts": faults.MAX_RETRIES, "mode": "standard"},  # retries, not tries
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
