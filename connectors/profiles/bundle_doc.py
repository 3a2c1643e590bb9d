"""A collector bundle's ``profile.json`` read and checked as `costaudit compare` weighs it (METHOD §8).

The verdict reads each sweep point's batch size and concurrency (the point's key), its throughput
(``inferences_per_s``, ``requests_per_s``), latency percentiles, error rate and error-rate bound,
and the bundle's traffic (``arrival``, payload size, traffic file). A figure a collector run cannot
give (a negative or non-finite rate, an error rate outside [0, 1], percentiles out of order, a
point twice) is an error naming the file and the field, never a verdict. The file is refused above
:data:`MAX_BYTES` (a collector writes kilobytes) and JSON's non-standard ``NaN`` / ``Infinity`` are
refused as the values they stand for.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from connectors.bounds import FILE, check_source_path, finite_number, nested_too_deep, shown
from connectors.errors import InputError

#: the bundle versions this reader knows (``collector.profile.BUNDLE_VERSION``)
VERSIONS = (1,)
MAX_BYTES = 64 * 2**20
EXPECTED = "a bundle folder written by costaudit collect, or its profile.json"
LATENCIES = ("p50", "p95", "p99")


def read_document(path: Path) -> tuple[Path, dict]:
    """(the profile.json file, its checked document) of a bundle folder or the file itself."""
    file = path / "profile.json" if path.is_dir() else path
    check_source_path(file, FILE, expected=EXPECTED)
    if file.stat().st_size > MAX_BYTES:
        raise InputError(file, f"is {file.stat().st_size:,} bytes", expected=f"{EXPECTED} (at most {MAX_BYTES:,} bytes)")
    try:
        document = json.loads(file.read_bytes().decode("utf-8"), parse_constant=_refuse_constant)
    except UnicodeDecodeError as exc:
        raise InputError(file, f"not UTF-8 at byte {exc.start}", expected=EXPECTED) from None
    except RecursionError:
        raise InputError(file, nested_too_deep(), expected=EXPECTED) from None
    except ValueError as exc:
        raise InputError(file, f"not JSON: {shown(str(exc))}", expected=EXPECTED) from None
    check_compared(file, document)
    return file, document


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def check_compared(file: Path, document) -> None:
    """Every figure the verdict reads, in its range (InputError naming the field)."""
    if not isinstance(document, dict):
        raise InputError(file, f"holds {type(document).__name__}", expected=f"a JSON object: {EXPECTED}")
    version = document.get("costaudit_profile_bundle")
    if isinstance(version, bool) or version not in VERSIONS:
        raise InputError(file, f"costaudit_profile_bundle is {shown(version)}", column="costaudit_profile_bundle",
                         expected=f"a bundle of version {', '.join(map(str, VERSIONS))} (costaudit collect)")
    if not isinstance(document.get("arrival"), dict):
        raise InputError(file, f"arrival is {shown(document.get('arrival'))}", column="arrival",
                         expected="an object describing the traffic the run was driven with")
    number(file, document.get("payload_bytes"), "payload_bytes", nullable=True)
    sweep = document.get("sweep")
    if not isinstance(sweep, list) or not sweep or not all(isinstance(p, dict) for p in sweep):
        raise InputError(file, f"sweep is {shown(sweep)}", column="sweep",
                         expected="a non-empty list of sweep points (objects)")
    seen: dict[tuple, int] = {}
    for index, point in enumerate(sweep):
        key = check_point(file, point, f"sweep[{index}]")
        if key in seen:
            raise InputError(file, f"batch size {key[0]}, concurrency {key[1]} is measured twice "
                                   f"(sweep[{seen[key]}] and sweep[{index}])", column=f"sweep[{index}]",
                             expected="one sweep point per batch size and concurrency")
        seen[key] = index


def check_point(file: Path, point: dict, where: str) -> tuple[int, int]:
    """One sweep point's figures; its (batch size, concurrency)."""
    batch = whole(file, point.get("batch_size"), f"{where}.batch_size")
    concurrency = whole(file, point.get("concurrency"), f"{where}.concurrency")
    number(file, point.get("error_rate"), f"{where}.error_rate", high=1.0, nullable=True)
    inferences = number(file, point.get("inferences_per_s"), f"{where}.inferences_per_s", nullable=True)
    requests = number(file, point.get("requests_per_s"), f"{where}.requests_per_s", nullable=True)
    if inferences is not None and requests is not None and inferences < requests * (1 - 1e-9):
        raise InputError(file, f"inferences_per_s {inferences:g} is below requests_per_s {requests:g}",
                         column=f"{where}.inferences_per_s",
                         expected="at least one inference a request (batch size × requests per second)")
    goodput = point.get("goodput")
    if goodput is not None:
        if not isinstance(goodput, dict):
            raise InputError(file, f"goodput is {shown(goodput)}", column=f"{where}.goodput", expected="an object")
        number(file, goodput.get("error_rate_bound"), f"{where}.goodput.error_rate_bound", high=1.0, nullable=True)
    latency = point.get("latency_ms")
    if latency is not None:
        if not isinstance(latency, dict):
            raise InputError(file, f"latency_ms is {shown(latency)}", column=f"{where}.latency_ms",
                             expected="an object of percentiles p50, p95, p99 (milliseconds)")
        values = [number(file, latency.get(p), f"{where}.latency_ms.{p}", nullable=True) for p in LATENCIES]
        given = [v for v in values if v is not None]
        if given != sorted(given):
            shown_values = ", ".join(f"{p} {v:g}" for p, v in zip(LATENCIES, values) if v is not None)
            raise InputError(file, f"latency percentiles out of order ({shown_values})",
                             column=f"{where}.latency_ms", expected="p50 ≤ p95 ≤ p99")
    return batch, concurrency


def whole(file: Path, value, field: str) -> int:
    """A whole number ≥ 1 (never a boolean)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(file, f"{field.rpartition('.')[2]} is {shown(value)}", column=field,
                         expected="a whole number ≥ 1")
    return value


def number(file: Path, value, field: str, high: float = math.inf, nullable: bool = False) -> float | None:
    """A finite number from 0 to ``high`` (never a boolean); None where ``nullable`` and absent."""
    if value is None and nullable:
        return None
    if not (finite_number(value) and 0 <= float(value) <= high):
        span = "from 0 to 1" if high == 1.0 else "a finite number ≥ 0"
        raise InputError(file, f"{field.rpartition('.')[2]} is {shown(value)}", column=field,
                         expected=span + (" or null" if nullable else ""))
    return float(value)
