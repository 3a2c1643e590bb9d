"""Prefill and decode kernel time in a kernel profile (METHOD §4).

Each GPU kernel of a parsed trace (connectors.profiles.events.Trace) is given a phase, from the
strongest evidence the trace has:

1. **phase annotations** (``user_annotation`` on the host, ``gpu_user_annotation`` on the device):
   vLLM's step annotation ``execute_<n>_context_<c>(…)_generation_<g>(…)`` (c prefill and g
   decode requests in the step: prefill when g = 0, decode when c = 0, *mixed* when both), or a
   name with the word ``prefill`` / ``context`` (prefill) or ``decode`` / ``generation``
   (decode), e.g. ``record_function("prefill")``. A kernel belongs to the latest annotation that
   started at or before its launch (the runtime call of the same correlation id) and was still
   open then; a kernel with no launch event (replayed from a CUDA / HIP graph) to the latest one
   started before the kernel itself. GPU annotations hold the kernels that start inside them.
2. **shapes and kernels**, where no annotation names a phase: attention operators with their input
   shapes (``aten::scaled_dot_product_attention`` and its flash / efficient / cuDNN variants,
   ``aten::_flash_attention_forward``: query ``[batch, heads, q_len, dim]``; q_len 1 is a decode
   step, more a prefill) and attention kernels whose names belong to one phase (paged / split-KV /
   decoding kernels: decode; context / prefill / variable-length kernels, and FlashAttention's plain
   forward kernel in a trace that also runs its split-KV one: prefill). Each such mark
   stands at its launch time, and every kernel takes the phase of the mark nearest its own launch
   (a forward pass's GEMMs and element-wise kernels sit among the attention calls of that pass),
   within the same ``ProfilerStep#`` where the trace has them; a kernel with no launch event, or
   farther before the first / after the last mark than the marks' usual spacing, stays unlabelled.

Kernel time per phase is the union of its kernels' intervals (as kernel-active time is); kernels no
evidence reaches stay *unlabelled*, and mixed steps stay *mixed*: neither is guessed into a phase.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from connectors.profiles.events import ANNOTATION, CPU_OP, GPU_ANNOTATION, KERNEL, RUNTIME, Trace
from connectors.profiles.intervals import length, merge

PREFILL, DECODE, MIXED, UNLABELLED = 1, 2, 3, 0
PHASE_NAMES = {PREFILL: "prefill", DECODE: "decode", MIXED: "mixed", UNLABELLED: "unlabelled"}
VLLM_STEP = re.compile(r"execute_\d+_context_(\d+)\(.*?\)_generation_(\d+)")
PREFILL_WORD = re.compile(r"(?i)(?<![a-z])(prefill|context)(?![a-z])")
DECODE_WORD = re.compile(r"(?i)(?<![a-z])(decode|generation)(?![a-z])")
ATTENTION_OPS = ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
                 "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
                 "aten::_flash_attention_forward", "aten::_efficient_attention_forward")
DECODE_KERNELS = re.compile(r"(?i)paged_attention|splitkv|flash_decoding|decode_attention|masked_multihead|mmha|ll4mi")
FLASH_PLAIN = re.compile(r"(?i)flash_fwd_kernel")
PREFILL_KERNELS = re.compile(r"(?i)context_attention|prefill|varlen_fwd|fmha_v2|context_fmha")


@dataclass(frozen=True)
class PhaseSplit:
    """Kernel time (us, union of intervals) per phase of one profile, and what told the phases."""

    prefill_us: float
    decode_us: float
    mixed_us: float
    unlabelled_us: float
    basis: str          # "annotations", "shapes and kernels" or "" (nothing told the phases)
    evidence: str       # in words: which annotations / operators / kernels, how many

    @property
    def separated(self) -> bool:
        """Whether the profile measures both phases (a one-phase sample cannot share time out)."""
        return self.prefill_us > 0 and self.decode_us > 0

    def reason(self) -> str | None:
        """Why the profile does not split the phases (None where it does)."""
        if self.separated:
            return None
        if not self.basis:
            return ("no phase annotation (vLLM execute_…_context_…_generation_…, or a prefill / decode "
                    "record_function), no attention operator with input shapes and no phase-specific "
                    "attention kernel in the trace")
        only = "prefill" if self.prefill_us > 0 else "decode" if self.decode_us > 0 else ""
        left = f"; {self.unlabelled_us:.0f} us of kernel time no evidence reaches" if self.unlabelled_us else ""
        if only:
            return (f"the profile holds {only} steps only ({self.evidence}{left}): a one-phase sample shares no "
                    "time out")
        return f"every labelled step mixes prefill and decode ({self.evidence})"


def split_phases(trace: Trace) -> PhaseSplit:
    """The profile's kernel time per phase, from annotations, else from shapes and kernel names."""
    kernels = np.flatnonzero(trace.role == KERNEL)
    if kernels.size == 0:
        return PhaseSplit(0.0, 0.0, 0.0, 0.0, "", "no kernel")
    launch, launched = launch_times(trace, kernels)
    phase, evidence = annotated(trace, kernels, launch, launched)
    basis = "annotations" if evidence else ""
    if not evidence:
        phase, evidence = from_shapes(trace, kernels, launch, launched)
        basis = "shapes and kernels" if evidence else ""
    starts, ends = trace.start[kernels], trace.end[kernels]
    sums = {p: length(*merge(starts[phase == p], ends[phase == p])) for p in PHASE_NAMES}
    return PhaseSplit(sums[PREFILL], sums[DECODE], sums[MIXED], sums[UNLABELLED], basis, evidence)


def launch_times(trace: Trace, kernels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per kernel, the start of the runtime call of the same correlation id, and whether it has one
    (else its own start: a graph-replayed kernel)."""
    runtime = np.flatnonzero((trace.role == RUNTIME) & (trace.correlation != -1))
    correlation = trace.correlation[kernels]
    launch = trace.start[kernels].astype(float)
    found = np.zeros(kernels.size, dtype=bool)
    if runtime.size:
        order = np.argsort(trace.correlation[runtime], kind="stable")
        ids = trace.correlation[runtime][order]
        at = np.minimum(np.searchsorted(ids, correlation), ids.size - 1)
        found = (ids[at] == correlation) & (correlation != -1)
        launch[found] = trace.start[runtime[order][at[found]]]
    return launch, found


def annotation_phase(name: str) -> int:
    """The phase an annotation's name states (UNLABELLED when none)."""
    step = VLLM_STEP.search(name)
    if step:
        context, generation = int(step.group(1)), int(step.group(2))
        return MIXED if context and generation else PREFILL if context else DECODE if generation else UNLABELLED
    prefill, decode = bool(PREFILL_WORD.search(name)), bool(DECODE_WORD.search(name))
    return MIXED if prefill and decode else PREFILL if prefill else DECODE if decode else UNLABELLED


def annotated(trace: Trace, kernels: np.ndarray, launch: np.ndarray, launched: np.ndarray) -> tuple[np.ndarray, str]:
    """Per kernel, the phase of its annotation; and the evidence in words ('' when no annotation
    names a phase)."""
    phase = np.full(kernels.size, UNLABELLED, dtype=np.int8)
    rows = np.flatnonzero((trace.role == ANNOTATION) | (trace.role == GPU_ANNOTATION))
    named = [(int(r), annotation_phase(trace.names[trace.name[r]])) for r in rows]
    named = [(r, p) for r, p in named if p != UNLABELLED]
    if not named:
        return phase, ""
    for role, on_gpu in ((ANNOTATION, False), (GPU_ANNOTATION, True)):
        mine = sorted((float(trace.start[r]), float(trace.end[r]), p) for r, p in named if trace.role[r] == role)
        if not mine:
            continue
        begin = np.array([m[0] for m in mine])
        close = np.array([m[1] for m in mine])
        phases = np.array([m[2] for m in mine], dtype=np.int8)
        when = trace.start[kernels].astype(float) if on_gpu else launch
        at = np.searchsorted(begin, when, side="right") - 1
        inside = at >= 0
        safe = np.maximum(at, 0)
        open_then = when < close[safe]
        if not on_gpu:
            open_then |= ~launched  # a graph replay runs after the host step that launched it
        take = inside & open_then & (phase == UNLABELLED)
        phase[take] = phases[safe[take]]
    counts = {PHASE_NAMES[p]: sum(1 for _, q in named if q == p) for p in (PREFILL, DECODE, MIXED)}
    said = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
    return phase, f"{len(named)} phase annotation{'' if len(named) == 1 else 's'} ({said})"


def _query_length(text: str) -> int | None:
    """q_len of an attention operator's first input (``[batch, heads, q_len, dim]``)."""
    try:
        dims = json.loads(text)
    except ValueError:
        return None
    first = dims[0] if isinstance(dims, list) and dims else None
    if isinstance(first, list) and len(first) == 4 and all(isinstance(d, int) for d in first):
        return first[2]
    return None


def step_of(trace: Trace, when: np.ndarray) -> np.ndarray:
    """Per time, the index of the ``ProfilerStep#`` host annotation holding it (-1: none)."""
    rows = [r for r in np.flatnonzero(trace.role == ANNOTATION) if trace.names[trace.name[r]].startswith("ProfilerStep#")]
    out = np.full(when.size, -1, dtype=np.int64)
    for i, row in enumerate(sorted(rows, key=lambda r: float(trace.start[r]))):
        out[(when >= trace.start[row]) & (when < trace.end[row])] = i
    return out


def nearest(when: np.ndarray, mark_time: np.ndarray, mark_phase: np.ndarray) -> np.ndarray:
    """The phase of the nearest mark per time; times before the first or after the last mark farther
    than the marks' 90th-percentile spacing stay unlabelled (work no mark reaches is not guessed)."""
    order = np.argsort(mark_time, kind="stable")
    at_time, at_phase = mark_time[order], mark_phase[order]
    right = np.minimum(np.searchsorted(at_time, when), at_time.size - 1)
    left = np.maximum(right - 1, 0)
    nearer_left = np.abs(when - at_time[left]) <= np.abs(at_time[right] - when)
    out = np.where(nearer_left, at_phase[left], at_phase[right]).astype(np.int8)
    reach = float(np.percentile(np.diff(at_time), 90)) if at_time.size > 1 else 0.0
    outside = (when < at_time[0] - reach) | (when > at_time[-1] + reach)
    out[outside] = UNLABELLED
    return out


def from_shapes(trace: Trace, kernels: np.ndarray, launch: np.ndarray,
                launched: np.ndarray) -> tuple[np.ndarray, str]:
    """Per kernel, the phase of the nearest attention mark by launch time; the evidence in words."""
    times, phases, ops, named = [], [], 0, 0
    op_rows, op_dims = trace.op.get("rows", np.empty(0, int)), trace.op.get("dims", np.empty(0, int))
    for row, dims in zip(op_rows, op_dims):
        if dims < 0 or trace.role[row] != CPU_OP or trace.names[trace.name[row]] not in ATTENTION_OPS:
            continue
        q = _query_length(trace.strings[dims])
        if q:
            times.append(float(trace.start[row]))
            phases.append(DECODE if q == 1 else PREFILL)
            ops += 1
    names = [trace.names[i] for i in trace.name[kernels]]
    paired = any("splitkv" in n.lower() for n in names)  # FlashAttention: split-KV decodes, the plain kernel prefills
    for i, name in enumerate(names):
        mark = (DECODE if DECODE_KERNELS.search(name) else PREFILL if PREFILL_KERNELS.search(name)
                or (paired and FLASH_PLAIN.search(name)) else UNLABELLED)
        if mark != UNLABELLED:
            times.append(float(launch[i]))
            phases.append(mark)
            named += 1
    phase = np.full(kernels.size, UNLABELLED, dtype=np.int8)
    if not times:
        return phase, ""
    mark_time, mark_phase = np.array(times), np.array(phases, dtype=np.int8)
    mark_step, kernel_step = step_of(trace, mark_time), step_of(trace, launch)
    kernel_step[~launched] = -1  # a kernel with no launch event belongs to no host step
    for step in np.unique(kernel_step):
        mine, marked = kernel_step == step, mark_step == step
        if marked.any():
            phase[mine] = nearest(launch[mine], mark_time[marked], mark_phase[marked])
    parts = [f"{ops} attention operators with input shapes" if ops else "",
             f"{named} phase-specific attention kernels" if named else ""]
    return phase, " and ".join(p for p in parts if p)
