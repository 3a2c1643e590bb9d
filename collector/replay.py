"""Replaying an Azure LLM trace: a slice of its arrivals, time-scaled, as OpenAI-compatible requests.

Each trace row becomes one request at its arrival offset, with a prompt of the stated length and
the output forced to the stated length where the API allows:

* the prompt: ``text`` (default) repeats a word that common BPE tokenizers encode as one token
  (`` hello``), so the server's count is close to the stated one but not exact (a chat template adds
  its own tokens); ``ids`` (completions only) sends the prompt as a list of token ids, which vLLM's
  completions endpoint takes, and is exact. The server's own count (``usage.prompt_tokens``) is
  what the figures report, beside the stated count.
* the output: ``vllm`` sends ``max_tokens`` with ``min_tokens`` and ``ignore_eos`` (vLLM's extra
  sampling parameters: the server generates exactly that many); ``max_tokens`` sends only the cap
  (the OpenAI API itself has no way to force a length, so a model may stop early); ``none`` sends
  neither. A stated 0 is sent as 1, the least the API accepts.

Slice and scale: rows with ``start ≤ offset < start + duration`` are kept, rebased to the slice
start and multiplied by ``time_scale`` (0.1 replays ten times faster); ``rate_multiplier`` m is the
same transformation as ``time_scale = 1/m`` (the burst shape is kept, every gap divided by m).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from collector.trace_file import TraceRow, read_azure_trace
from schemas.errors import UsageError

FORCES = ("vllm", "max_tokens", "none")
PROMPT_FORMS = ("text", "ids")
WORD = " hello"               # one token in the GPT-2 / Llama / Mistral BPE vocabularies
TOKEN_ID = 1000               # an ordinary id inside every common vocabulary


@dataclass(frozen=True)
class TraceReplay:
    """A trace file and how to replay it."""

    path: Path
    start: float = 0.0               # seconds after the trace's first arrival
    duration: float | None = None    # seconds of trace time (None: to the end)
    time_scale: float = 1.0          # multiply every offset (0.1 = ten times faster)
    force: str = "vllm"
    prompt_form: str = "text"

    def __post_init__(self) -> None:
        if self.start < 0 or (self.duration is not None and self.duration <= 0):
            raise UsageError(f"--trace-start {self.start} / --trace-duration {self.duration}: "
                             "expected a start ≥ 0 and a duration > 0 (seconds of trace time)")
        if not self.time_scale > 0:
            raise UsageError(f"--time-scale {self.time_scale}: expected a number > 0 (0.1 = ten times faster)")
        if self.force not in FORCES:
            raise UsageError(f"--force-output {self.force!r}: expected one of {', '.join(FORCES)}")
        if self.prompt_form not in PROMPT_FORMS:
            raise UsageError(f"--prompt-form {self.prompt_form!r}: expected one of {', '.join(PROMPT_FORMS)}")

    def rows(self) -> list[TraceRow]:
        """The slice's rows, offsets rebased to the slice start and scaled; UsageError when empty."""
        rows = read_azure_trace(self.path)
        end = float("inf") if self.duration is None else self.start + self.duration
        kept = [TraceRow((r.offset - self.start) * self.time_scale, r.prompt_tokens, r.generated_tokens, r.row)
                for r in rows if self.start <= r.offset < end]
        if not kept:
            span = rows[-1].offset
            raise UsageError(f"--trace {self.path}: no arrival in [{self.start:g} s, {end:g} s) of trace "
                             f"time; the trace spans 0 to {span:.3f} s ({len(rows)} rows)")
        return kept

    def describe(self, rows: list[TraceRow], mode: str) -> dict:
        """The replay as written to profile.json's ``arrival``."""
        return {"process": "trace", "format": "azure_llm", "file": str(self.path), "start_s": self.start,
                "duration_s": self.duration, "time_scale": self.time_scale, "rate_multiplier": 1 / self.time_scale,
                "requests": len(rows), "force_output": self.force, "prompt_form": self.prompt_form,
                "mode": mode, "stated_prompt_tokens": sum(r.prompt_tokens for r in rows),
                "stated_generated_tokens": sum(r.generated_tokens for r in rows),
                "schedule_s": rows[-1].offset if rows else 0.0}


def scale_of(time_scale: float | None, rate_multiplier: float | None) -> float:
    """The time scale from either option (they are one transformation); UsageError when both are given."""
    if time_scale is not None and rate_multiplier is not None:
        raise UsageError("give --time-scale or --rate-multiplier, not both: rate × m is time scale 1/m")
    if rate_multiplier is not None:
        if not rate_multiplier > 0:
            raise UsageError(f"--rate-multiplier {rate_multiplier}: expected a number > 0")
        return 1.0 / rate_multiplier
    return 1.0 if time_scale is None else time_scale


def payload(mode: str, prompt_tokens: int, generated_tokens: int, force: str = "vllm",
            prompt_form: str = "text") -> dict:
    """One request's body: a prompt of ``prompt_tokens`` and the output forced to ``generated_tokens``."""
    if mode not in ("completions", "chat"):
        raise UsageError(f"--mode {mode}: a trace replays as completions or chat (OpenAI-compatible)")
    if prompt_form == "ids":
        if mode != "completions":
            raise UsageError("--prompt-form ids needs --mode completions (chat messages are text)")
        body: dict = {"prompt": [TOKEN_ID] * prompt_tokens}
    else:
        text = (WORD * prompt_tokens).lstrip()
        body = {"prompt": text} if mode == "completions" else {"messages": [{"role": "user", "content": text}]}
    wanted = max(generated_tokens, 1)
    if force in ("vllm", "max_tokens"):
        body["max_tokens"] = wanted
    if force == "vllm":
        body["min_tokens"] = wanted
        body["ignore_eos"] = True
    return body
