"""What each path given to ``costaudit init --from`` is: its kind (billing, telemetry, profiles) and format.

A path is told by its content, never by its name alone: binary signatures first (SQLite, Parquet,
gzip), then JSON (Kineto traces, Prometheus ``query_range`` dumps, OpenCost allocations, GCP
billing export lines), then text (OpenMetrics, nvidia-smi CSV, ``dcgmi dmon``, ``sacct
--parsable2``, access logs), then the billing exports that :func:`audit.billing_summary.sniff_format`
tells by their header. A folder is a profile bundle (``profile.json``), a rank set (two or more
Kineto traces or nsys exports, one per rank), a folder of dumps, logs or export files. An
``http(s)://`` address is a Prometheus-API endpoint. A path that fits no format is one InputError
naming it and what was tried, each with the reason it did not fit.
"""
from __future__ import annotations

import gzip
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from connectors.bounds import DECOMPRESS_ERRORS, EITHER, check_source_path, resolved, shown
from connectors.errors import InputError

HEAD_BYTES = 1 << 16
SQLITE = b"SQLite format 3\0"
PARQUET = b"PAR1"
GZIP = b"\x1f\x8b"
KINETO_KEYS = ('"traceEvents"', '"schemaVersion"', '"deviceProperties"')
METRIC_PREFIXES = ("DCGM_", "kube_", "vllm:", "nv_", "tgi_", "container_", "node_")
SAMPLE_LINE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})?[ \t]+[-+0-9.eEnaINF]+([ \t]+[-+0-9.eE]+)?\s*$')
ACCESS_PARQUET = ("timestamp", "status", "path", "user_agent")
BILLING_FORMATS = ("focus", "cur", "azure", "gcp_billing")
KIND_OF = {"focus": "billing", "cur": "billing", "azure": "billing", "gcp_billing": "billing",
           "openmetrics": "telemetry", "prom_dump": "telemetry", "prometheus": "telemetry",
           "nvidia_smi": "telemetry", "dcgmi": "telemetry", "sacct": "telemetry", "opencost": "telemetry",
           "access_log": "telemetry", "kineto": "profiles", "nsys": "profiles", "profile_bundle": "profiles"}


@dataclass(frozen=True)
class Sniffed:
    """One source named on the command line: its kind, format, where it lies, and why that format."""

    kind: str
    format: str
    path: Path | None
    why: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class Tried:
    """The formats tried on one path, each with the reason it did not fit."""

    misses: list[str] = field(default_factory=list)

    def miss(self, what: str, reason: str) -> None:
        self.misses.append(f"{what} ({reason})")


def sniff(source: str) -> Sniffed:
    """The kind and format of one ``--from`` argument (a path or an http(s) url)."""
    if re.match(r"(?i)^https?://", source):
        return Sniffed("telemetry", "prometheus", None, "an http(s) address: a Prometheus-API endpoint",
                       {"url": source})
    if re.match(r"(?i)^[a-z][a-z0-9+.-]*://", source):
        raise InputError(source, "init reads local files and Prometheus urls only",
                         expected="a local path (download the object first) or an http(s):// Prometheus url")
    expected = "a billing, telemetry or profile file or folder"
    path = resolved(source, expected)
    check_source_path(path, EITHER, expected=expected)
    tried = Tried()
    found = _folder(path, tried) if path.is_dir() else _file(path, tried)
    if found is not None:
        return found
    raise InputError(path, "cannot tell its format; tried " + "; ".join(tried.misses),
                     expected="one of " + ", ".join(sorted(KIND_OF)) + " (see `costaudit connectors`)")


def _sniffed(fmt: str, path: Path, why: str) -> Sniffed:
    return Sniffed(KIND_OF[fmt], fmt, path, why)


# ---- files ----------------------------------------------------------------------------------

def _file(path: Path, tried: Tried) -> Sniffed | None:
    """A file by its first bytes: SQLite, Parquet, else its (decompressed) text."""
    if path.stat().st_size == 0:
        tried.miss("every format", "the file is empty")
        return None
    with open(path, "rb") as handle:
        magic = handle.read(16)
    if magic.startswith(SQLITE):
        return _sqlite(path, tried)
    if magic.startswith(PARQUET):
        return _parquet(path, tried)
    head = _head_text(path, magic, tried)
    if head is None:
        return None
    for check in TEXT_CHECKS:
        found = check(path, head, tried)
        if found is not None:
            return found
    return _billing(path, tried)


def _head_text(path: Path, magic: bytes, tried: Tried) -> str | None:
    """The first 64 KiB of the file as text (gunzipped when it is gzip), None when unreadable."""
    try:
        if magic.startswith(GZIP):
            with gzip.open(path, "rb") as handle:
                raw = handle.read(HEAD_BYTES)
        else:
            with open(path, "rb") as handle:
                raw = handle.read(HEAD_BYTES)
    except (OSError, *DECOMPRESS_ERRORS) as exc:
        tried.miss("gzip text", f"cannot be decompressed: {exc}")
        return None
    if b"\0" in raw:
        tried.miss("text formats", "NUL bytes in the first 64 KiB: a binary file")
        return None
    return raw.decode("utf-8", errors="replace").lstrip("\ufeff")


def _sqlite(path: Path, tried: Tried) -> Sniffed | None:
    import sqlite3

    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error as exc:
        tried.miss("nsys", f"an SQLite file that cannot be read: {exc}")
        return None
    if any(t.startswith("CUPTI_ACTIVITY_KIND_KERNEL") for t in tables):
        return _sniffed("nsys", path, "an SQLite file with the CUPTI kernel table (nsys export)")
    tried.miss("nsys", "an SQLite file without the CUPTI_ACTIVITY_KIND_KERNEL table")
    return None


def _parquet(path: Path, tried: Tried) -> Sniffed | None:
    import pyarrow.parquet as pq

    try:
        names = {n.lower() for n in pq.read_schema(path).names}
    except Exception as exc:  # pyarrow raises several kinds for a damaged footer
        tried.miss("Parquet", f"unreadable schema: {shown(str(exc))}")
        return None
    if set(ACCESS_PARQUET) <= names:
        return _sniffed("access_log", path, "Parquet with timestamp, status, path and user_agent columns "
                        "(a parsed access log)")
    tried.miss("access_log", "Parquet without the columns " + ", ".join(ACCESS_PARQUET))
    return _billing(path, tried)


def _json(path: Path, head: str, tried: Tried) -> Sniffed | None:
    """Kineto traces, query_range dumps, OpenCost allocations (GCP export lines go to billing)."""
    text = head.lstrip()
    if not text.startswith(("{", "[")):
        tried.miss("JSON formats", "does not start with '{'")
        return None
    if any(key in text for key in KINETO_KEYS):
        return _sniffed("kineto", path, "JSON with traceEvents / deviceProperties (a Kineto trace)")
    if '"resultType"' in text:
        return _sniffed("prom_dump", path, "JSON with data.resultType (a Prometheus query_range answer)")
    if '"properties"' in text and ('"window"' in text or '"gpuHours"' in text):
        return _sniffed("opencost", path, "JSON with allocation properties and windows (OpenCost /allocation)")
    tried.miss("kineto, prom_dump, opencost", "JSON without traceEvents, data.resultType or allocation "
               "properties in its first 64 KiB")
    return None


def _openmetrics(path: Path, head: str, tried: Tried) -> Sniffed | None:
    lines = [line for line in head.splitlines()[:400] if line.strip()]
    typed = [line for line in lines if line.startswith(("# TYPE ", "# HELP "))]
    samples = [line for line in lines if not line.startswith("#") and SAMPLE_LINE.match(line)]
    known = [line for line in samples if line.startswith(METRIC_PREFIXES)]
    if typed or (samples and len(samples) >= len(lines) // 2 and known):
        return _sniffed("openmetrics", path, "metric samples" + (" with # TYPE lines" if typed else "")
                        + " (OpenMetrics / Prometheus text)")
    tried.miss("openmetrics", "no '# TYPE' line and no DCGM_ / kube_ / vllm: samples")
    return None


def _nvidia_smi(path: Path, head: str, tried: Tried) -> Sniffed | None:
    first = head.splitlines()[0].lower() if head else ""
    if first.startswith("timestamp") and "utilization.gpu" in first:
        return _sniffed("nvidia_smi", path, "a CSV header with timestamp and utilization.gpu (nvidia-smi --query-gpu)")
    tried.miss("nvidia_smi", "the first line is not a 'timestamp, …, utilization.gpu' header")
    return None


def _dcgmi(path: Path, head: str, tried: Tried) -> Sniffed | None:
    if any(line.lstrip().startswith("#Entity") for line in head.splitlines()[:5]):
        return _sniffed("dcgmi", path, "a '#Entity' header (dcgmi dmon)")
    tried.miss("dcgmi", "no '#Entity' header")
    return None


def _sacct(path: Path, head: str, tried: Tried) -> Sniffed | None:
    fields = {f.strip().lower() for f in (head.splitlines() or [""])[0].split("|")}
    if {"jobid", "nodelist"} <= fields or {"jobid", "alloctres"} <= fields:
        return _sniffed("sacct", path, "a '|'-separated JobID / NodeList / AllocTRES header (sacct --parsable2)")
    tried.miss("sacct", "no '|'-separated JobID header")
    return None


def _access_log(path: Path, head: str, tried: Tried) -> Sniffed | None:
    from connectors.telemetry.access_log import COMBINED, ELB

    lines = [line for line in head.splitlines()[:50] if line.strip()][:-1] or head.splitlines()[:1]
    hits = sum(1 for line in lines if re.match(COMBINED, line) or re.match(ELB, line))
    if lines and hits * 2 >= len(lines):
        return _sniffed("access_log", path, f"{hits} of its first {len(lines)} lines are access-log "
                        "requests (Apache / nginx / ELB)")
    tried.miss("access_log", "its first lines are not Apache, nginx or ELB requests")
    return None


TEXT_CHECKS: tuple[Callable[[Path, str, Tried], Sniffed | None], ...] = (
    _json, _openmetrics, _nvidia_smi, _dcgmi, _sacct, _access_log)


def _billing(path: Path, tried: Tried) -> Sniffed | None:
    from audit.billing_summary import sniff_format

    try:
        fmt = sniff_format(path)
    except InputError as exc:
        reason = exc.message.split("; pass --format")[0]
        tried.miss("billing exports " + "/".join(BILLING_FORMATS), reason)
        return None
    return _sniffed(fmt, path, f"its header has the {fmt} columns")


# ---- folders --------------------------------------------------------------------------------

def _folder(path: Path, tried: Tried) -> Sniffed | None:
    """A bundle, a folder of dumps / allocations / logs, or a billing export folder."""
    if (path / "profile.json").is_file():
        return _sniffed("profile_bundle", path, "a folder with profile.json (a collector bundle)")
    tried.miss("profile_bundle", "no profile.json in the folder")
    files = sorted(p for p in path.rglob("*") if p.is_file())
    if not files:
        tried.miss("every folder format", "the folder holds no file")
        return None
    ranks = _rank_set(path, tried)
    if ranks is not None:
        return ranks
    jsons = [p for p in files if p.name.endswith(".json") and "manifest" not in p.name.lower()]
    if jsons and len(jsons) == len(files):
        found = _json(jsons[0], _head_text(jsons[0], b"", tried) or "", tried)
        if found is not None and found.format in ("prom_dump", "opencost"):
            return Sniffed(found.kind, found.format, path, f"a folder of {found.format} files ({len(jsons)})")
    logs = [p for p in files if p.name.lower().endswith((".log", ".txt", ".gz"))]
    if logs:
        found = _access_log(logs[0], _head_text(logs[0], _magic(logs[0]), tried) or "", tried)
        if found is not None:
            return Sniffed(found.kind, found.format, path, f"a folder of access logs ({len(logs)} files)")
    return _billing(path, tried)


def _rank_set(path: Path, tried: Tried) -> Sniffed | None:
    """A folder of two or more Kineto traces or nsys exports, one per rank: a rank set (the folder is
    the profile's path, connectors/profiles/rankset.py), told by its first file."""
    from connectors.profiles.rankset import SUFFIXES, natural_key

    for fmt, suffixes in SUFFIXES.items():
        files = sorted((p for p in path.iterdir() if p.is_file() and p.name.lower().endswith(suffixes)), key=natural_key)
        if len(files) < 2:
            continue
        found = _file(files[0], Tried())
        if found is not None and found.format == fmt:
            return Sniffed("profiles", fmt, path, f"a folder of {len(files)} {fmt} traces, one per rank "
                                                  f"({files[0].name} …)")
    tried.miss("kineto / nsys rank set", "not two or more traces of one format in the folder")
    return None


def _magic(path: Path) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(16)


def sniff_all(sources: list[str]) -> list[Sniffed]:
    """Every ``--from`` argument sniffed; all that fit no format are reported together."""
    from connectors.errors import InputErrors

    found, errors = [], []
    for source in sources:
        try:
            found.append(sniff(source))
        except InputError as exc:
            errors.append(exc)
    if errors:
        raise errors[0] if len(errors) == 1 else InputErrors(errors)
    return found

