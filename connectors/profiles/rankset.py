"""A folder of one job's rank traces read as one profile, each rank in a worker (docs/case.md).

A ``kineto`` or ``nsys`` profile source whose ``path`` is a folder is a rank set: its Kineto traces
(``.json``, ``.json.gz``) or Nsight Systems exports (``.sqlite``), one per rank (GPU), in natural
order of their names (``rank_2`` before ``rank_10``). Each rank is read on its own, in this process
or, under ``costaudit run --workers N / --scheduler ADDRESS``, in worker processes or on a Dask
cluster (connectors/profiles/workers.py); a worker sends back only the rank's figures, kernel and
category sums (kilobytes), never its trace, so each worker holds one rank at a time.

The set's tables are those of one trace whose devices are the ranks' (a multi-device trace is
measured per device and summed, connectors/profiles/kineto.py): its window, kernel-active, busy and
idle time and g's figures add up over ranks, in the order of the files (the same floats whatever
runs them); g = (Σ window − Σ kernel-active) ÷ Σ kernel-active; ``gap_basis`` is the basis of the rank
with the most kernel-active time in its window, and ranks on other bases are named in ``gap_note``;
``device`` is the device with the most kernel-active time. Kernels and categories are summed by name.
A ``ranks`` table keeps each rank's own figures. Two files of one content are an error naming both
(one rank's GPU time counted twice); a rank claimed by two files (``distributedInfo.rank``) is read
at the next free rank, with a note.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from connectors.base import file_sha256
from connectors.errors import FatalSourceError, InputError, SourceError
from connectors.profiles.phases import PhaseSplit
from connectors.profiles.workers import collect, guarded, runner_for

SUFFIXES = {"kineto": (".json", ".json.gz"), "nsys": (".sqlite", ".sqlite3", ".db")}
EXPECTED = {"kineto": "a folder of one job's Kineto traces, one per rank (.json or .json.gz)",
            "nsys": "a folder of one job's Nsight Systems SQLite exports, one per rank (.sqlite)"}
#: what a rank adds to its set's ``profile`` row (connectors/profiles/trace_tables.py ``profile_sums``)
RANK_COLUMNS = ("file", "rank", "device", "gpu_window_us", "kernel_active_us", "gap_ratio", "gap_basis", "kernels")


@dataclass(frozen=True)
class RankSet:
    """A profile's rank traces (``SourceFrame.parsed`` of a folder): the files in order, the rank
    each is read as, the format, and the set's prefill / decode split (:func:`set_phases`); the
    audit's evidence stage reads each rank again for its call paths and findings
    (audit/trace/rankset.py)."""

    folder: Path
    files: tuple[Path, ...]
    ranks: tuple[int, ...]
    format: str
    phases: PhaseSplit | None = field(default=None, compare=False)
    #: each file's (size, mtime in ns) as read: a set read again after its files changed is another set
    stamps: tuple[tuple[int, int], ...] = ()


def read_rank_set(folder: Path, fmt: str, reader: Callable) -> tuple[dict[str, pd.DataFrame], int, RankSet]:
    """The set's tables (``profile``, ``kernels``, ``categories``, ``ranks``, ``notes`` where there
    are notes), the rows (events) read over its ranks, and the :class:`RankSet`. ``reader`` is the
    format's module-level ``read_rank(path)`` (its GPU view, whole trace and rows: kineto.py,
    nsys.py), sent to the workers by name."""
    files = rank_files(folder, fmt)
    try:
        with runner_for(len(files)) as (run, _):
            parts = collect(run(rank_task, [(str(f), reader) for f in files]))
    except InputError:
        raise
    except SourceError as exc:  # the Dask cluster asked for cannot be reached: the run stops, it is not run without
        raise FatalSourceError(str(exc)) from None
    written = [part["written"] for part in parts]
    no_copies(files, written)
    ranks = distinct_ranks(written)
    tables = set_tables(files, ranks, parts)
    claims = claimed_twice(files, written, ranks)
    if claims:
        notes = pd.DataFrame({"row": [0] * len(claims), "column": ["distributedInfo.rank"] * len(claims), "note": claims})
        tables["notes"] = pd.concat([tables.get("notes"), notes], ignore_index=True) if "notes" in tables else notes
    phases = set_phases(files, [PhaseSplit(**part["phases"]) for part in parts])
    return tables, sum(part["rows"] for part in parts), RankSet(folder, tuple(files), tuple(ranks), fmt, phases,
                                                               stamps_of(files))


def rank_files(folder: Path, fmt: str) -> list[Path]:
    """The folder's rank files of the format, in natural order of their names; none is an error
    naming the folder and what it holds."""
    suffixes = SUFFIXES[fmt]
    if (Path(folder) / "profile.json").is_file():
        raise InputError(folder, "is a bundle of costaudit collect (it holds profile.json), not a folder of rank "
                                 "traces", column="format", expected='format = "profile_bundle" for a bundle')
    files = [p for p in Path(folder).iterdir() if p.is_file() and p.name.lower().endswith(suffixes)]
    if not files:
        held = sorted(p.name for p in Path(folder).iterdir())
        what = f"it holds {', '.join(held[:5])}{' …' if len(held) > 5 else ''}" if held else "it is empty"
        raise InputError(folder, f"no {' or '.join(suffixes)} file in the folder ({what})", expected=EXPECTED[fmt])
    return sorted(files, key=natural_key)


def stamps_of(files: list[Path]) -> tuple[tuple[int, int], ...]:
    """Each file's (size, mtime in ns)."""
    return tuple((stat.st_size, stat.st_mtime_ns) for stat in (f.stat() for f in files))


def natural_key(path: Path) -> list:
    """A name's sort key with its runs of digits as numbers: rank_2 before rank_10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]


def rank_task(path: str, reader: Callable) -> dict:
    """One rank read on its own (in a worker, or in this process): its distributedInfo rank
    (``written``), the figures its set adds up (``sums``), its kernels, categories and notes as
    column lists, its prefill / decode split, and the events read (``rows``)."""
    return guarded(path, lambda: rank_tables(Path(path), reader))


def rank_tables(path: Path, reader: Callable) -> dict:
    """:func:`rank_task`'s work: the trace read and checked by its format's ``reader``, and reduced
    as its connector reduces one file."""
    from connectors.profiles.phases import split_phases
    from connectors.profiles.trace_tables import category_table, event_frame, kernel_table, profile_sums, trace_notes

    view, whole, rows = reader(path)
    events = event_frame(view)
    notes = trace_notes(whole) if whole is not None else None
    return {"written": getattr(whole, "rank", None), "sums": profile_sums(view), "rows": int(rows),
            "kernels": kernel_table(events).to_dict("list"), "categories": category_table(events).to_dict("list"),
            "notes": None if notes is None or not len(notes) else notes.to_dict("list"),
            "phases": asdict(split_phases(whole) if whole is not None else PhaseSplit(0.0, 0.0, 0.0, 0.0, "", "no trace"))}


def set_tables(files: list[Path], ranks: list[int], parts: list[dict]) -> dict[str, pd.DataFrame]:
    """The set's tables from its ranks' parts, in the order of the files."""
    from connectors.profiles.columns import KERNEL
    from connectors.profiles.trace_tables import ADDITIVE, kernel_table, profile_row
    from connectors.profiles.window import ratio

    sums = [part["sums"] for part in parts]
    total = {key: sum(s[key] for s in sums) for key in ADDITIVE}
    lead = max(range(len(sums)), key=lambda i: (sums[i]["gap_kernel_active_us"], -i))
    device = max(range(len(sums)), key=lambda i: (sums[i]["device_kernel_us"], -i))
    total.update(device=sums[device]["device"], gap_basis=sums[lead]["gap_basis"],
                 gap_note=set_note(files, sums, sums[lead]["gap_basis"]))
    kernels = pd.concat([pd.DataFrame(p["kernels"]) for p in parts], ignore_index=True)
    summed = kernels.groupby(["name", "category"], sort=False).agg(count=("count", "sum"), dur=("total_us", "sum"))
    kernels = kernel_table(summed.reset_index().assign(kind=KERNEL))
    categories = pd.concat([pd.DataFrame(p["categories"]) for p in parts], ignore_index=True)
    categories = categories.groupby("category", sort=False)["total_us"].sum().reset_index()
    categories = categories.sort_values(["total_us", "category"], ascending=[False, True], ignore_index=True)
    rows = [(f.name, rank, s["device"], s["gpu_window_us"], s["kernel_active_us"],
             ratio(s["gap_window_us"], s["gap_kernel_active_us"]), s["gap_basis"], int(s["kernels"]))
            for f, rank, s in zip(files, ranks, sums)]
    tables = {"profile": profile_row(total, files[0].parent.name), "kernels": kernels, "categories": categories,
              "ranks": pd.DataFrame(rows, columns=list(RANK_COLUMNS))}
    notes = [pd.DataFrame(p["notes"]).assign(note=lambda t, name=f.name: name + ": " + t["note"])
             for f, p in zip(files, parts) if p["notes"]]
    if notes:
        tables["notes"] = pd.concat(notes, ignore_index=True)
    return tables


def set_phases(files: list[Path], splits: list[PhaseSplit]) -> PhaseSplit:
    """The set's kernel time per phase, added over its ranks; the basis and evidence of each rank
    that told its phases (named by file where ranks differ)."""
    told = [(f, s) for f, s in zip(files, splits) if s.basis]
    evidence = list(dict.fromkeys(s.evidence for _, s in told)) or list(dict.fromkeys(s.evidence for s in splits))
    if len(evidence) > 1:
        evidence = [f"{f.name}: {s.evidence}" for f, s in (told or zip(files, splits))]
    bases = list(dict.fromkeys(s.basis for _, s in told))
    return PhaseSplit(sum(s.prefill_us for s in splits), sum(s.decode_us for s in splits),
                      sum(s.mixed_us for s in splits), sum(s.unlabelled_us for s in splits),
                      " and ".join(bases), "; ".join(evidence))


def set_note(files: list[Path], sums: list[dict], basis: str) -> str:
    """``gap_note`` of a set: each rank's own note, and the ranks whose g window has another basis."""
    named = len(files) > 1
    notes = [f"{f.name}: {s['gap_note']}" if named else s["gap_note"] for f, s in zip(files, sums) if s["gap_note"]]
    other = [f"{f.name} ({s['gap_basis'].replace('_', ' ')})" for f, s in zip(files, sums) if s["gap_basis"] != basis]
    if other:
        notes.append(f"g's window is {basis.replace('_', ' ')} on the rank with the most kernel-active time; "
                     f"other bases on {', '.join(other)}")
    return "; ".join(notes)


def distinct_ranks(written: list[int | None]) -> list[int]:
    """The rank each file of a set is read as: its distributedInfo rank unless an earlier file holds
    it (or it has none), else its position in the list, else the next rank free."""
    taken: set[int] = set()
    ranks = []
    for position, claim in enumerate(written):
        rank = claim if claim is not None and claim not in taken else position
        while rank in taken:
            rank += 1
        taken.add(rank)
        ranks.append(rank)
    return ranks


def claimed_twice(paths: list[Path], written: list[int | None], ranks: list[int]) -> list[str]:
    """A warning per file whose distributedInfo rank another file holds, naming both, the rank
    claimed and the rank given."""
    holder = {rank: (path, claim) for path, claim, rank in zip(paths, written, ranks)}
    out = []
    for path, claim, rank in zip(paths, written, ranks):
        if claim is not None and claim != rank:
            other, its_claim = holder[claim]
            held = "as {} does" if its_claim == claim else "which {} holds (its position in the list)"
            out.append(f"{path} claims rank {claim} (distributedInfo.rank), {held.format(other)}: read as rank "
                       f"{rank} instead (its position in the list, else the next rank free); check that both "
                       "files are ranks of this job")
    return out


def no_copies(paths: list[Path], written: list[int | None]) -> None:
    """An error naming two files of one content: one rank's trace given twice would count its GPU
    time twice (only files of one size are read for their sha256)."""
    seen: dict[tuple[int, str], tuple[Path, int | None]] = {}
    sizes = [Path(p).stat().st_size for p in paths]
    for path, claim, size in zip(paths, written, sizes):
        if sizes.count(size) < 2:
            continue
        digest = file_sha256(Path(path))
        if (size, digest) in seen:
            other, _ = seen[(size, digest)]
            said = f"claims rank {claim} (distributedInfo.rank), as {other} does, and " if claim is not None else ""
            raise InputError(path, f"{said}is the same trace{' as ' + str(other) if not said else ''} (same sha256 "
                                   f"{digest}): its GPU time would be counted twice", expected="each rank's trace once")
        seen[(size, digest)] = (path, claim)
