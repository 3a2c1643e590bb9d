"""Write a synthetic Kineto trace of a given size by tiling a real one in time.

Each copy of the source's events is shifted by the source's span (plus a 1 ms gap) and its
correlation and External ids by a fixed stride, so launches still pair with their kernels and the
copies do not overlap. The output is plain JSON, one event per line, written as it is produced.

    .venv/bin/python benchmarks/trace/synth.py 256MB /tmp/costaudit-bench/synthetic_256MB.json
"""
from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[2]
TRACES = Path(os.environ.get("COSTAUDIT_SHARED", ROOT.parent / "shared")) / "data" / "traces"
SOURCE = TRACES / "hta" / "df_index_resolver_v100_rank1_of2.json.gz"
ID_STRIDE = 10_000_000
UNITS = {"KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}


def parse_size(text: str) -> int:
    """'256MB' -> bytes."""
    text = text.strip().upper()
    for unit, factor in UNITS.items():
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(text)


def _shifted(events: list[dict], copy: int, span: float) -> list[dict]:
    """The source events moved ``copy`` spans later, with their ids moved by ``copy`` strides."""
    shift, ids = copy * (span + 1000), copy * ID_STRIDE
    out = []
    for event in events:
        event = dict(event)
        if "ts" in event:
            event["ts"] = event["ts"] + shift
        args = event.get("args")
        if isinstance(args, dict):
            args = dict(args)
            for key in ("correlation", "External id", "external id"):
                if isinstance(args.get(key), int) and args[key] > 0:
                    args[key] += ids
            event["args"] = args
        if event.get("ph") in ("s", "f") and isinstance(event.get("id"), int):
            event["id"] += ids
        out.append(event)
    return out


def synthesise(target: int, out: Path, source: Path = SOURCE) -> int:
    """Write at least ``target`` bytes of trace to ``out``; return the events written."""
    doc = json.loads(gzip.decompress(source.read_bytes()))
    events = [e for e in doc.pop("traceEvents") if e.get("ph") != "M"]
    meta = [e for e in json.loads(gzip.decompress(source.read_bytes()))["traceEvents"] if e.get("ph") == "M"]
    timed = [e["ts"] + e.get("dur", 0) for e in events if "ts" in e]
    span = max(timed) - min(e["ts"] for e in events if "ts" in e)
    span = int(span) if float(span).is_integer() else span
    encoder = msgspec.json.Encoder()
    out.parent.mkdir(parents=True, exist_ok=True)
    written, count, copy = 0, 0, 0
    with open(out, "wb") as handle:
        head = encoder.encode(doc)[:-1] + b',"traceEvents":[\n'
        handle.write(head)
        lines = [encoder.encode(e) for e in meta]
        written = len(head)
        while True:
            lines += [encoder.encode(e) for e in _shifted(events, copy, span)]
            room = target - written
            size = sum(len(line) + 2 for line in lines)
            done = size >= room
            if done:                   # cut the last copy where the target is reached
                keep, used = 0, 0
                while keep < len(lines) and used + len(lines[keep]) + 2 <= room:
                    used += len(lines[keep]) + 2
                    keep += 1
                lines = lines[:max(keep, 1)]
            body = b",\n".join(lines)
            handle.write(body + (b"\n]}\n" if done else b",\n"))
            written += len(body) + 2
            count += len(lines)
            lines, copy = [], copy + 1
            if done:
                return count


def main(argv: list[str]) -> int:
    """synth.py SIZE OUT"""
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    count = synthesise(parse_size(argv[0]), Path(argv[1]))
    print(f"wrote {argv[1]}: {Path(argv[1]).stat().st_size} bytes, {count} events")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
