"""A collector profile bundle as a ``[[profiles]]`` source (``format = "profile_bundle"``).

Reads ``trace.json.gz`` with the Kineto reader (same three tables) and takes ``requests``,
``prompt_tokens`` and ``generated_tokens`` served in the profiler window from ``profile.json``;
figures written on the case's ``[[profiles]]`` entry take precedence. ``profile.json``'s ``sweep``
(one point per batch size × concurrency) becomes the table ``sweep`` (``SweepPoint``: throughput,
latency percentiles, error rate and the collector's latency bound ``slo_ms``), empty where the bundle
has none. The returned frame's spec
names the trace file (audit.json names the trace); the fingerprint covers the whole bundle.
"""
from __future__ import annotations

import dataclasses
import json

import pandas as pd

from connectors.base import Connector
from connectors.bounds import FOLDER, nested_too_deep, resolved, shown
from connectors.errors import InputError
from connectors.profiles.events import load_trace
from connectors.profiles.kineto import (
    EXPECTED_CUDA,
    NO_GPU_EVENTS,
    category_table,
    event_frame,
    kernel_table,
    profile_table,
)
from schemas.profile import CategoryTime, KernelEvent, KernelSummary, SweepPoint

TRAFFIC = ("requests", "prompt_tokens", "generated_tokens")
SWEEP_COLUMNS = list(SweepPoint.to_schema().columns)
LATENCIES = ("p50", "p95", "p99")


class ProfileBundleConnector(Connector):
    """Reads a bundle folder written by `costaudit collect`."""

    format_name = "profile_bundle"
    accepts = FOLDER
    kind = "profiles"
    schemas = {"profile": KernelSummary, "kernels": KernelEvent, "categories": CategoryTime, "sweep": SweepPoint}

    def fetch(self):
        """Kineto tables of the bundle's trace; the window's traffic merged into the spec's options."""
        document = self._document()
        window = document.get("window") or {}
        if not window.get("measured"):
            raise InputError(self.path, window.get("reason", "the bundle has no profiler window"),
                             expected="a bundle collected from an in-process callable")
        trace_path = self.path / window.get("trace", "trace.json.gz")
        if resolved(self.path) not in resolved(trace_path).parents:
            raise InputError(self.path / "profile.json", f"window.trace {shown(window.get('trace'))} is outside the bundle",
                             column="window", expected="the name of a trace file in the bundle folder")
        trace = load_trace(trace_path)
        if trace.kind.size == 0:
            raise InputError(trace_path, NO_GPU_EVENTS, expected=EXPECTED_CUDA)
        self.parsed = trace.trace  # the whole trace's columns, for the audit's kernel evidence
        events = event_frame(trace)
        tables = {"profile": profile_table(trace, trace_path.name), "kernels": kernel_table(events),
                  "categories": category_table(events), "sweep": self._sweep(document)}
        found = {k: window.get(k) for k in TRAFFIC if window.get(k) is not None}
        options = {**found, **{k: v for k, v in self.spec.options.items() if v is not None}}
        # the frame names the trace itself (audit.json profiles[].trace), not the bundle folder
        self.spec = dataclasses.replace(self.spec, path=trace_path, options=options)
        return tables, trace.rows, (None, None)

    def _sweep(self, document: dict) -> pd.DataFrame:
        """profile.json's sweep points as rows (a point no request completed in has null figures)."""
        points = document.get("sweep") or []
        if not isinstance(points, list) or not all(isinstance(p, dict) for p in points):
            raise InputError(self.path / "profile.json", f"sweep is {shown(points)}", column="sweep",
                             expected="a list of sweep points (objects)")
        slo, bound = document.get("slo_ms"), document.get("max_error_rate")
        rows = [sweep_row(p, slo, bound) for p in points]
        frame = pd.DataFrame(rows, columns=SWEEP_COLUMNS)
        try:
            return frame.astype({"batch_size": "int64", "concurrency": "int64", "requests": "int64",
                                 **{c: "float64" for c in SWEEP_COLUMNS[3:]}})
        except (TypeError, ValueError, OverflowError):
            raise InputError(self.path / "profile.json", "a sweep point's figures are not numbers", column="sweep",
                             expected="batch_size, concurrency and requests whole numbers; rates and "
                                      "latencies numbers or null") from None

    def _document(self) -> dict:
        path = self.path / "profile.json"
        if not path.is_file():
            raise InputError(self.path, "no profile.json", expected="a costaudit collect bundle folder")
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise InputError(path, f"not JSON: {shown(str(exc))}") from None
        except RecursionError:
            raise InputError(path, nested_too_deep(), expected="a costaudit collect profile.json") from None
        window = document.get("window") if isinstance(document, dict) else None
        if window is not None and (not isinstance(window, dict) or not isinstance(window.get("trace", ""), str)
                                   or not isinstance(window.get("reason", ""), str)):
            raise InputError(path, f"window is {shown(window)}", column="window",
                             expected="an object with the trace file name (a string)")
        return document if isinstance(document, dict) else {}


def sweep_row(point: dict, slo_ms, max_error_rate) -> dict:
    """One sweep point's figures (collector.profile.sweep_point) as a SweepPoint row."""
    found = point.get("latency_ms")
    latency: dict = found if isinstance(found, dict) else {}
    return {"batch_size": point.get("batch_size", 1), "concurrency": point.get("concurrency", 1),
            "requests": point.get("requests", 0), "error_rate": point.get("error_rate"),
            "inferences_per_s": point.get("inferences_per_s"),
            **{f"latency_{p}_ms": latency.get(p) for p in LATENCIES},
            "slo_ms": slo_ms, "max_error_rate": max_error_rate}
