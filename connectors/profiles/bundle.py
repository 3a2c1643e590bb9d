"""A collector profile bundle as a ``[[profiles]]`` source (``format = "profile_bundle"``).

Reads ``trace.json.gz`` with the Kineto reader (same three tables) and takes ``requests``,
``prompt_tokens`` and ``generated_tokens`` served in the profiler window from ``profile.json``;
figures written on the case's ``[[profiles]]`` entry take precedence. The returned frame's spec
names the trace file (audit.json names the trace); the fingerprint covers the whole bundle.
"""
from __future__ import annotations

import dataclasses
import json

from connectors.base import Connector
from connectors.bounds import FOLDER, nested_too_deep, shown
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
from schemas.profile import CategoryTime, KernelEvent, KernelSummary

TRAFFIC = ("requests", "prompt_tokens", "generated_tokens")


class ProfileBundleConnector(Connector):
    """Reads a bundle folder written by `costaudit collect`."""

    format_name = "profile_bundle"
    accepts = FOLDER
    kind = "profiles"
    schemas = {"profile": KernelSummary, "kernels": KernelEvent, "categories": CategoryTime}

    def fetch(self):
        """Kineto tables of the bundle's trace; the window's traffic merged into the spec's options."""
        document = self._document()
        window = document.get("window") or {}
        if not window.get("measured"):
            raise InputError(self.path, window.get("reason", "the bundle has no profiler window"),
                             expected="a bundle collected from an in-process callable")
        trace_path = self.path / window.get("trace", "trace.json.gz")
        if self.path.resolve() not in trace_path.resolve().parents:
            raise InputError(self.path / "profile.json", f"window.trace {shown(window.get('trace'))} is outside the bundle",
                             column="window", expected="the name of a trace file in the bundle folder")
        trace = load_trace(trace_path)
        if trace.kind.size == 0:
            raise InputError(trace_path, NO_GPU_EVENTS, expected=EXPECTED_CUDA)
        self.parsed = trace.trace  # the whole trace's columns, for the audit's kernel evidence
        events = event_frame(trace)
        tables = {"profile": profile_table(trace, trace_path.name), "kernels": kernel_table(events),
                  "categories": category_table(events)}
        found = {k: window.get(k) for k in TRAFFIC if window.get(k) is not None}
        options = {**found, **{k: v for k, v in self.spec.options.items() if v is not None}}
        # the frame names the trace itself (audit.json profiles[].trace), not the bundle folder
        self.spec = dataclasses.replace(self.spec, path=trace_path, options=options)
        return tables, trace.rows, (None, None)

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
