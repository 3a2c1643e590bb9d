"""Streaming parser of OpenMetrics / Prometheus text exposition into the audit's families.

The file (optionally gzipped) is streamed line by line. Only the metric families the audit uses
(``families``) are kept. Timestamps are in seconds, as `promtool tsdb create-blocks-from
openmetrics` reads them; samples without a timestamp (a single scrape) are counted.
"""
from __future__ import annotations

import gzip
import io
import math
import re
import zlib
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Iterator

import numpy as np

from connectors.bounds import MAX_LINE, bounded, open_binary, shown
from connectors.errors import InputError
from connectors.telemetry.families import Family, new_families
from connectors.telemetry.om_repeats import drop_repeats

MS_THRESHOLD = 1e11  # 1e11 s is the year 5138; 1e11 ms is 1973
MS_RANGE = (1e12, 1e14)  # a timestamp in milliseconds: 2001 to 5138 (above MS_THRESHOLD, out of range)

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_PAIR = r'[ \t]*[a-zA-Z_][a-zA-Z0-9_]*[ \t]*=[ \t]*"(?:[^"\\\n]|\\.)*"[ \t]*'
_LABELS = rf"\{{(?:{_PAIR}(?:,{_PAIR})*,?[ \t]*)?\}}"
_LINE = re.compile(
    rf"({_NAME})({_LABELS})?[ \t]+(\S+)(?:[ \t]+([^\s#]\S*))?(?:[ \t]+#.*)?[ \t]*\r?$")
SAMPLE_FORM = 'name{label="value",...} value [timestamp in seconds]'
COUNTER_SUFFIXES = ("_total", "_created")


@contextmanager
def open_text(path) -> Iterator:
    """The file as text lines of at most MAX_LINE characters, gunzipped when it starts with the
    gzip magic bytes (a longer line, or gigabytes without a line break, is an InputError)."""
    with open_binary(path) as raw, io.TextIOWrapper(raw, encoding="utf-8") as text:
        yield bounded(text, path, MAX_LINE)


def _number(text: str, path, lineno: int) -> float:
    """A sample value: a float, +Inf, -Inf or NaN."""
    try:
        if "_" in text:
            raise ValueError(text)
        return float(text)
    except ValueError:
        raise InputError(path, f"sample value {shown(text)} is not a number", row=lineno,
                         expected="a float, +Inf, -Inf or NaN") from None


def _timestamp(text: str, path, lineno: int) -> float:
    """A sample timestamp in seconds; milliseconds are refused."""
    try:
        t = float(text) if "_" not in text else math.nan
    except ValueError:
        t = math.nan
    if not math.isfinite(t):
        raise InputError(path, f"timestamp {shown(text)} is not a number", row=lineno,
                         expected="a Unix timestamp in seconds")
    if abs(t) > MS_THRESHOLD and MS_RANGE[0] <= abs(t) < MS_RANGE[1]:
        raise InputError(path, "timestamp in milliseconds; expected seconds (the form promtool "
                         f"reads), got {text}", row=lineno)
    if abs(t) > MS_THRESHOLD:       # 253402300799 (the year 9999 in seconds) is no millisecond count
        raise InputError(path, f"timestamp {shown(text)} out of the supported range", row=lineno,
                         expected=f"a Unix timestamp in seconds of at most {MS_THRESHOLD:,.0f} (the year 5138)")
    return t


def _bad_line(line: str, path, lineno: int) -> InputError:
    """Say what is wrong with a line the sample pattern rejected."""
    text = line.rstrip("\r\n")
    cut = text if len(text) <= 80 else text[:77] + "..."
    head = re.match(_NAME, text)
    labels = re.match(_LABELS, text[head.end():]) if head else None
    if head is None:
        problem = "no metric name at the start of the line"
    elif text[head.end():head.end() + 1] == "{" and labels is None:
        problem = 'bad label set, expected name="value" pairs'
    else:
        fields = text[head.end() + (labels.end() if labels else 0):].split()
        problem = (f"{len(fields)} fields after the name, expected a value and an optional "
                   "timestamp" if fields else "no value after the metric name")
    return InputError(path, f"cannot parse sample line ({problem}): {cut!r}", row=lineno,
                      expected=SAMPLE_FORM)


class Scan:
    """Counts of one pass over the file."""

    def __init__(self):
        self.rows = 0
        self.untimestamped = 0
        self.eof_line = 0
        #: the file's sha256 when the reader hashed its bytes as it read them, else None
        self.sha256: str | None = None
        #: the first and last sample timestamp of the whole file, window or not (seconds; inf, -inf: none)
        self.first = math.inf
        self.last = -math.inf
        #: the names of the series no family reads (rule 5: a series the audit passes over is
        #: named, e.g. a GPU-request series under another name)
        self.unread: set[str] = set()
        #: a ``# EOF`` line was read; the file uses syntax only OpenMetrics has (:func:`openmetrics_only`)
        self.eof = False
        self.openmetrics = False
        #: counter families named without ``_total`` (OpenMetrics names their samples ``x_total``)
        self.counters: set[str] = set()
        #: ``excluded_samples`` rows of repeated samples dropped (``om_repeats``); None: not looked for
        self.repeats = None

    def see_one(self, t: float) -> None:
        """Widen :attr:`first` and :attr:`last` by one timestamp (NaN: none)."""
        if t < self.first:
            self.first = t
        if t > self.last:
            self.last = t

    def see(self, t: np.ndarray) -> None:
        """Widen :attr:`first` and :attr:`last` by the timestamps ``t`` (seconds; NaN: none)."""
        if len(t):
            lo, hi = np.nanmin(t, initial=math.inf), np.nanmax(t, initial=-math.inf)
            self.first, self.last = min(self.first, float(lo)), max(self.last, float(hi))

    def extent(self) -> tuple[datetime | None, datetime | None]:
        """(first, last) sample time of the file as UTC datetimes; (None, None) when none has one."""
        if self.first > self.last:
            return (None, None)
        return (datetime.fromtimestamp(self.first, timezone.utc), datetime.fromtimestamp(self.last, timezone.utc))


def scan_lines(lines, path, by_name: dict[str, Family], scan: Scan, first: int = 1) -> None:
    """Parse every sample line; hand the wanted ones to their family."""
    match = _LINE.match
    nan = math.nan
    for lineno, line in enumerate(lines, first):
        scan.eof_line = lineno
        if line[:1] == "#":
            if line.startswith("# EOF"):
                scan.eof = True
                _after_eof(lines, path, lineno)
            else:
                see_comment(line, scan)
            continue
        if line[-1:] != "\n":
            cut_short(line, path, lineno)
        m = match(line)
        if m is None:
            if not line.strip():
                continue
            raise _bad_line(line, path, lineno)
        name, raw, value, stamp = m.groups()
        if "#" in line[m.end(3):] or name.endswith(COUNTER_SUFFIXES) and name.rpartition("_")[0] in scan.counters:
            scan.openmetrics = True  # an exemplar, or a counter's x_total / x_created sample
        v = _number(value, path, lineno)
        t = _timestamp(stamp, path, lineno) if stamp is not None else nan
        scan.rows += 1
        scan.see_one(t)
        scan.untimestamped += stamp is None
        family = by_name.get(name)
        if family is not None:
            family.add(name, raw, v, t, path, lineno)
        else:
            scan.unread.add(name)


def see_comment(line: str, scan: Scan) -> None:
    """Note in ``scan`` what a comment line says of the format: ``# UNIT`` is OpenMetrics only; a
    counter family named without ``_total`` is OpenMetrics once its ``x_total`` samples come."""
    if line.startswith("# UNIT"):
        scan.openmetrics = True
    elif line.startswith("# TYPE"):
        words = line.split()
        if len(words) == 4 and words[3] == "counter" and not words[2].endswith("_total"):
            scan.counters.add(words[2])


def openmetrics_only(path, scan: Scan) -> bool:
    """Whether the file is OpenMetrics (named ``.om`` / ``.om.gz``, or using its own syntax), not
    the Prometheus text format (0.0.4), which has no ``# EOF``."""
    return str(path).endswith((".om", ".om.gz")) or scan.openmetrics


def check_eof(path, scan: Scan, last_line: int) -> None:
    """An OpenMetrics file ends with ``# EOF``: one without it was cut at a line boundary (a copy or
    a download that stopped), and its missing samples would go unnoticed."""
    if not scan.eof and openmetrics_only(path, scan):
        raise InputError(path, f"OpenMetrics text ends at line {last_line:,} without '# EOF'", row=last_line,
                         expected="`# EOF` as the last line (the file looks cut)")


def cut_short(line: str, path, lineno: int) -> None:
    """The last line of the file has no line feed: a file cut short (a copy or a download that
    stopped) whose last sample would be read with its value or timestamp cut. The text formats end
    every line with a line feed (OpenMetrics: ``# EOF`` last, its line feed optional)."""
    if line.strip():
        raise InputError(path, f"the file ends inside line {lineno:,} ({shown(line.strip())}, no line feed after it): "
                         "it looks cut short, and its last sample would be read cut", row=lineno,
                         expected="a complete file: every line ended by a line feed (OpenMetrics: '# EOF' last)")


def _after_eof(lines, path, lineno: int) -> None:
    """Nothing but blank lines may follow ``# EOF``."""
    for extra, line in enumerate(lines, lineno + 1):
        if line.strip():
            raise InputError(path, "content after '# EOF'", row=extra,
                             expected="'# EOF' as the last line")


def read_families(path) -> tuple[dict[str, Family], Scan]:
    """Stream the file once into fresh families; decoding faults become InputErrors."""
    roles, by_name = new_families()
    scan = Scan()
    try:
        with open_text(path) as handle:
            scan_lines(handle, path, by_name, scan)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise InputError(path, f"gzip stream is truncated or corrupt ({exc})",
                         row=scan.eof_line + 1, expected="a complete gzip file") from None
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not UTF-8 text ({exc.reason})", row=scan.eof_line + 1,
                         expected="UTF-8 OpenMetrics text") from None
    check_eof(path, scan, scan.eof_line)
    scan.repeats = drop_repeats(list({id(f): f for f in roles.values()}.values()))
    return roles, scan

