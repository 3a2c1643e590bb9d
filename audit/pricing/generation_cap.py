"""Cap generated tokens: decode cost × the share of generated tokens above the cap (METHOD §7).

Per service, the decode cost is its ``model_compute.kernel_active`` over the window × its measured
decode share (audit/phases.py). The share of generated *tokens* above the cap c is
Σ max(0, n − c) / Σ n over the requests:

- exactly, from a per-request list of generated tokens (a traffic file: :func:`exact_share`; the
  option's ``traffic = { SERVICE = "path" }`` in the case, the Azure LLM inference trace CSV);
- from the servers' histogram of generated tokens per request (vLLM
  ``vllm:request_generation_tokens``, TGI ``tgi_request_generated_tokens``) as a low and a high
  (:func:`bucket_share`): a request in the bucket (lo, hi] has lo < n ≤ hi, so its excess lies
  between max(0, lo − c) and max(0, hi − c); the open bucket above the last edge is bounded by the
  generated-token counter (what the finite buckets cannot hold at their lowest lies in it), and
  Σ n is that counter. Expected: n spread evenly within each finite bucket, the open bucket at its
  mean.

The cap is the option's ``cap_tokens``. Decode time per token is taken as even over a request's
tokens (the method's word; later tokens attend to a longer context and cost a little more, so the
saving leans low).
"""
from __future__ import annotations

import functools
import math
from decimal import Decimal
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from audit.money import ZERO
from audit.phases import generated_distribution, measured_splits, model_compute, serving_total
from audit.pricing import Input, Modelled, ordered
from audit.pricing.assumed import MISSING

DEFAULT_CAP = 1024


def exact_share(generated: Sequence[int], cap: int) -> Decimal:
    """Σ max(0, n − cap) / Σ n over per-request generated tokens (0 where nothing was generated)."""
    total = sum(int(n) for n in generated)
    if total == 0:
        return ZERO
    return Decimal(sum(max(0, int(n) - cap) for n in generated)) / Decimal(total)


def bucket_share(edges: np.ndarray, counts: np.ndarray, total_tokens: Decimal, cap: int) -> dict[str, Decimal] | str:
    """Low / expected / high share of tokens above ``cap`` from a histogram (upper edges ascending,
    the last +Inf; requests per bucket) and the generated-token total; or why it gives none."""
    if total_tokens <= 0:
        return "the generated-token counter counts no token"
    low = high = expected = ZERO
    lower = 0.0
    floor_tokens = ZERO   # tokens the finite buckets hold at least
    mid_tokens = ZERO
    open_requests = ZERO
    for edge, count in zip(edges, counts):
        c = Decimal(repr(float(count)))
        if not math.isfinite(edge):
            open_requests = c
            break
        lo, hi = Decimal(repr(lower)), Decimal(repr(float(edge)))
        low += c * max(ZERO, lo - cap)
        high += c * max(ZERO, hi - cap)
        if cap <= lo:
            expected += c * ((lo + hi) / 2 - cap)
        elif cap < hi:
            expected += c * (hi - cap) ** 2 / (2 * (hi - lo))
        floor_tokens += c * lo
        mid_tokens += c * (lo + hi) / 2
        lower = float(edge)
    if open_requests:
        last = Decimal(repr(lower))
        in_open = total_tokens - floor_tokens  # at most: the finite buckets at their lowest
        low += open_requests * max(ZERO, last - cap)
        high += max(ZERO, in_open - open_requests * cap)
        mean_open = max(last, (total_tokens - mid_tokens) / open_requests)
        expected += open_requests * max(ZERO, mean_open - cap)
    one = Decimal(1)
    return {b: min(one, v / total_tokens) for b, v in (("low", low), ("expected", expected), ("high", high))}


def generation_cap(spec: Mapping[str, Any], given) -> Modelled | str:
    """The model on the rank stage's input (audit.rank.RankInput: serving stats, token histograms,
    profiles, ledger), or why it stays assumed."""
    cap = int(spec.get("cap_tokens", DEFAULT_CAP))
    cap_source = ("the option's cap_tokens (audit/data/options.toml, or the case's [[options]])" if "cap_tokens" in spec
                  else "the model's default cap_tokens (audit/pricing/generation_cap.py)")
    histograms = getattr(given, "histograms", None)
    traffic = dict(spec.get("traffic") or {})
    totals = dict.fromkeys(("low", "expected", "high"), ZERO)
    inputs: list[Input] = []
    missing: list[str] = []
    priced = set()
    for name, split in measured_splits(given, missing):
        priced.add(name)
        if name in traffic:
            shares, rows = _traffic_inputs(name, traffic[name], cap)
            decode = _decode_cost(given, name, split)
            for band in totals:
                totals[band] += decode * shares
            inputs += [(f"{name}: decode share", f"{1 - split.used.share:.6f}", split.used.source),
                       (f"{name}: decode cost over the window", f"{decode:.2f}", "kernel_active × decode share"),
                       *rows]
            continue
        found = generated_distribution(histograms, given.case.services, name) if histograms is not None \
            else f"{name}: no generated-token histogram"
        if isinstance(found, str):
            missing.append(found)
            continue
        edges, counts, source = found
        family = "tgi" if source.startswith("tgi") else "vllm"
        generated = _generated_tokens(given.serving, given.case.services, name, family, edges, counts)
        bands = bucket_share(edges, counts, generated, cap)
        if isinstance(bands, str):
            missing.append(f"{name}: {bands}")
            continue
        decode = _decode_cost(given, name, split)
        for band in totals:
            totals[band] += decode * bands[band]
        inputs += [(f"{name}: decode share", f"{1 - split.used.share:.6f}", split.used.source),
                   (f"{name}: decode cost over the window", f"{decode:.2f}", "kernel_active × decode share"),
                   (f"{name}: share of generated tokens above the cap",
                    f"{bands['low']:.6f} / {bands['expected']:.6f} / {bands['high']:.6f}",
                    f"{source}, bucket edges (low / even within buckets / high)"),
                   (f"{name}: generated tokens over the window", f"{generated:.0f}",
                    "generated-token counter (vllm:generation_tokens_total / tgi_request_generated_tokens_sum), "
                    "else the histogram's bucket midpoints")]
    missing += [f"{name}: its traffic file {path} is not read: the service's prefill / decode split is not "
                "measured, so it has no decode cost to cap" for name, path in traffic.items() if name not in priced]
    if not inputs:
        return "; ".join(missing) or MISSING["generation_cap"]
    inputs.append(("cap", f"{cap} tokens", cap_source))
    inputs.extend(("not modelled", why, "generation-cap model") for why in missing)
    return Modelled(ordered(totals["low"], totals["expected"], totals["high"]), tuple(inputs),
                    "decode cost × share of generated tokens above the cap; from a traffic file exactly (low = "
                    "expected = high), else low / high from the histogram's bucket edges (each request at its "
                    "bucket's lower / upper edge)")


def _decode_cost(given, name: str, split) -> Decimal:
    """The service's model compute over the window × its measured decode share."""
    amount = model_compute(given.ledger, name)
    return amount - amount * split.used.share


def _traffic_inputs(name: str, path: str, cap: int) -> tuple[Decimal, list[Input]]:
    """The exact share of generated tokens above ``cap`` from the service's traffic file (one request
    a row) and the inputs that say so; a file that cannot be read raises its one-line input error."""
    generated = generated_per_request(path)
    share = exact_share(generated, cap)
    above = sum(1 for n in generated if n > cap)
    return share, [(f"{name}: share of generated tokens above the cap", f"{share:.6f}",
                    f"traffic file {path}: {len(generated):,} requests, {sum(generated):,} generated tokens, "
                    f"{above:,} requests above the cap (exact: Σ max(0, n − cap) ÷ Σ n)")]


@functools.lru_cache(maxsize=8)
def generated_per_request(path: str) -> tuple[int, ...]:
    """GeneratedTokens of every request of an Azure LLM inference trace CSV (collector/trace_file.py),
    read once a process."""
    from collector.trace_file import read_azure_trace

    return tuple(row.generated_tokens for row in read_azure_trace(Path(path)))


def _generated_tokens(serving, services, name: str, family: str, edges: np.ndarray, counts: np.ndarray) -> Decimal:
    """Generated tokens of the service over the window: the servers' generated-token counter
    (serving stats ``generated_tokens``) of the histogram's family, else the histogram's midpoints."""
    counted = serving_total(serving, services, name, "generated_tokens", family)
    if math.isfinite(counted) and counted > 0:
        return Decimal(repr(counted))
    lower, total = 0.0, 0.0
    for edge, count in zip(edges, counts):
        if math.isfinite(edge):
            total += count * (lower + edge) / 2
            lower = float(edge)
        else:
            total += count * lower
    return Decimal(repr(total))
