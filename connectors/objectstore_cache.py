"""The object store's local cache: S3 object versions keyed by bucket, key and ETag, prefix views.

Downloads stream in chunks into ``$COSTAUDIT_CACHE/s3`` (default ``$XDG_CACHE_HOME/costaudit/s3``,
i.e. ``~/.cache/costaudit/s3``): a temporary file in the target folder, renamed once complete. An
object whose ETag has not changed is not downloaded again. A GET carries ``If-Match`` with the
listed ETag, so an object rewritten between listing and download is retried, never mixed in. A
prefix becomes a folder of hard links laid out like the prefix (:meth:`Cache.view`).
"""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Mapping

from connectors.errors import RetriableSourceError
from connectors.objectstore_faults import LOG_NAME, Location, translated

log = logging.getLogger(LOG_NAME)

CHUNK_BYTES = 1 << 20       # streamed download block


@dataclass(frozen=True)
class S3Object:
    """One listed object: what the cache key and the manifest choice need."""

    key: str
    etag: str           # as S3 sends it, quotes included (used for If-Match)
    size: int
    modified: datetime


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
