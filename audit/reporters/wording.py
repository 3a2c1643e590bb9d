"""Plain words for page 1: what measured each figure, why the reconciliation's top-down figure
differs from the total in scope, options by title, and the terms page 1 uses.

Every word is derived from audit.json fields: a part's ``source`` text (audit/attribute.py writes
it as ``<metrics> (<telemetry sources>) × GPU-interval cost of <format> lines (<billing sources>)``,
optionally ``; gap ratio g = <g> from kernel profile <name> (<trace>)``, or ``<format> lines
(<billing sources>), class <class>``, the format as audit/billing_words.py names it: FOCUS, CUR,
GCP billing export, …), the ``sources`` list, ``reconciliation``, ``coverage`` and
the buckets' parts. A source text of any other shape is shown as it is, never dropped. The metric
names themselves go to the appendix table :func:`measurements` (figure → metric names → source).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Iterable

from audit.billing_words import NOUN_PATTERN, basis_fields, billing_formats, formats_named
from audit.buckets import BUCKETS
from audit.reporters.formatting import (
    BUCKET_LABELS,
    VERDICTS,
    basis_words,
    label,
    money,
    number,
    to_decimal,
)

_NOUN = NOUN_PATTERN  # the billing format's name for its lines: "FOCUS", "GCP billing export", "CUR / FOCUS"
_NAMED = f"(?P<noun>{_NOUN})"  # the same, kept: the formats whose cost columns measured the figure
_GPU = re.compile(r"^(?P<metrics>.+?) \((?P<telemetry>[^()]*)\) × GPU-interval cost of " + _NAMED + " lines "
                  r"\((?P<billing>[^()]*)\)(?:; gap ratio g = (?P<g>[0-9.]+) from kernel profile "
                  r"(?P<profile>.+?) \((?P<trace>[^()]*)\))?$")
_LINES = re.compile(r"^" + _NAMED + r" lines \((?P<billing>[^()]*)\), class (?P<klass>\w+)(?:: (?P<lines>.+))?$", re.S)
_LINE = re.compile(r"^" + _NAMED + r" line (?P<line>\S+) \((?P<billing>[^()]*)\)$")
NO_SAMPLE = "no kernel-activity sample"

#: metric name (or its prefix) → (what it measures, the tool that reports it)
METRICS = (
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "GPU activity", "DCGM"),
    ("DCGM_FI_DEV_GPU_UTIL", "GPU activity", "DCGM"),
    ("DCGM_FI_", "GPU figures", "DCGM"),
    ("dcgmi ", "GPU activity", "dcgmi"),
    ("nvidia-smi ", "GPU activity", "nvidia-smi"),
    ("vllm:request_success", "request counts", "vLLM"),
    ("vllm:", "serving figures", "vLLM"),
    ("nv_inference_request_success", "request counts", "Triton"),
    ("nv_inference", "serving figures", "Triton"),
    ("tgi_request_success", "request counts", "TGI"),
    ("tgi_", "serving figures", "TGI"),
    ("kube_", "pod and replica figures", "kube-state-metrics"),
)
#: a metric name inside free text (with its label selector, if any)
_METRIC = re.compile(r"\b(?:DCGM_FI_\w+|vllm:\w+|nv_inference_\w+|tgi_\w+|kube_\w+)(?:\{[^}]*\})?")
#: what each bucket holds, in words (METHOD §3)
BUCKET_WORDS = {
    "model_compute": "GPU time computing the models' answers",
    "serving_path": "GPU idle while serving; the CPU and network serving uses",
    "platform_overhead": "paid capacity nothing used; platform services",
    "unattributed": "not measured, with the reason; never spread",
}
#: words page 1 always shows (the template's own): the glossary looks for its terms in them too
PAGE_ONE_WORDS = ("Total in scope", "Cost basis", "Reconciliation verdict: top-down, bottom-up, tolerance",
                  "Payback, months")
#: resource classes of invoice lines (audit/data/rules.toml) in words
CLASS_WORDS = {
    "gpu_compute": "GPU instances",
    "serving_compute": "CPU nodes on the request path",
    "serving_network": "load balancers and NAT",
    "egress": "data transfer out",
    "observability": "logging and monitoring",
    "orchestration": "cluster control plane and registry",
    "commitment_unused": "unused commitment",
    "unmatched": "lines no rule matched",
}


def class_words(klass: str | None) -> str:
    """A resource class in words: ``serving_network`` → 'load balancers and NAT' (an unknown one
    with its underscores as spaces)."""
    return CLASS_WORDS.get(klass or "", (klass or "").replace("_", " "))


def class_label(klass: str | None) -> str:
    """A resource class as a row label: ``serving_network`` → 'Load balancers and NAT'."""
    words = class_words(klass)
    return words[:1].upper() + words[1:]


#: unattributed parts whose cost the reconciliation's top-down figure leaves out
#: (METHOD §5: top-down covers the GPU-intervals telemetry covers and the non-GPU classes)
OUTSIDE_TOP_DOWN = {
    "no_activity_sample": "GPU time with no activity sample",
    "no_valid_activity_sample": "GPU time whose every activity sample was excluded",
    "gpu_not_in_telemetry": "GPUs on the invoice that telemetry never names",
    "gpu_time_not_billed": "GPU lines whose resource no line bills GPU time for",
    "unapplied_adjustment": "tax or credits with no charge to apply to",
}
#: term → its explanation; page 1 lists those of its words that appear on it
GLOSSARY = (
    ("in scope", "the lines of the case's accounts and window"),
    ("top-down", "the invoice's amounts for what telemetry covers"),
    ("bottom-up", "the same spend rebuilt from measured usage × unit prices"),
    ("tolerance", "the largest gap the case accepts"),
    ("GPU-hour", "one GPU for one hour"),
    ("telemetry", "the usage metrics the cluster recorded"),
    ("DCGM", "NVIDIA's GPU monitoring"),
    ("vLLM", "the model server, whose counters give the requests"),
    ("kernel", "one computation on the GPU"),
    ("kernel profile", "a trace of the GPU's work on sample requests"),
    ("idle-to-busy ratio", "GPU idle seconds per second of computing while serving, from a kernel profile"),
    ("commitment", "capacity bought ahead (reservations, savings plans)"),
    ("payback", "one-off cost ÷ monthly saving"),
)


@dataclass(frozen=True)
class Measured:
    """What one bucket part was measured by, in words, with the names behind the words."""

    words: str
    metrics: tuple[str, ...]
    sources: tuple[str, ...]


def source_formats(audit: dict) -> dict[str, str]:
    """Source name → format, from audit.json ``sources``."""
    return {str(s.get("name")): str(s.get("format") or "") for s in audit.get("sources") or []}


def cost_basis_words(audit: dict) -> str:
    """The audit's cost basis in words, naming the columns its billing sources' own formats give it
    (a CUR's line_item_unblended_cost, not FOCUS BilledCost: the column the data has)."""
    return basis_words(str(audit.get("cost_basis") or ""), billing_formats(audit.get("sources") or []) or ("focus",))


def metric_words(metric: str) -> tuple[str, str]:
    """(what it measures, the tool) of a metric name; ('measurements', the name) when unknown."""
    for prefix, what, tool in METRICS:
        if metric.startswith(prefix):
            return what, tool
    return "measurements", metric


def _names(text: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip())


def measured(source: str, basis: str) -> Measured:
    """A part's audit.json ``source`` in words; unknown shapes are kept as they are. The cost column
    is the one the source's billing formats give ``basis`` from (:func:`audit.billing_words.basis_fields`:
    "CUR line_item_unblended_cost, …", not a FOCUS column a CUR does not have)."""
    found = _GPU.match(source) or _LINES.match(source) or _LINE.match(source)
    column = basis_fields(basis, formats_named(found["noun"])) if found else ""
    if found and found.re is _GPU:
        return _gpu_measured(found, column)
    if found and found.re is _LINES:
        klass = found["klass"]
        words = f"invoice lines ({found['billing']}): {class_words(klass)}"
        if found["lines"]:  # the lines by name (unmatched ones): the appendix shows them, page 1 the class
            words += f" ({found['lines']})"
        return Measured(words, (column,), _names(found["billing"]))
    if found:
        return Measured(f"invoice line {found['line']} ({found['billing']})", (column,), _names(found["billing"]))
    return Measured(in_words(source), tuple(dict.fromkeys(m.group(0) for m in _METRIC.finditer(source))), ())


def in_words(text: str) -> str:
    """Free source text with each metric name replaced by what it measures and the tool that
    reports it, and invoice wording in words (a source text of a shape :func:`measured` does not know)."""
    text = _METRIC.sub(lambda m: " from ".join(metric_words(m.group(0))), text)
    text = re.sub(r"\bclass (\w+)", lambda m: class_words(m.group(1)), text)
    return re.sub(r"\b" + _NOUN + r" lines \(", "invoice lines (", text)


def _gpu_measured(found: re.Match, column: str) -> Measured:
    metrics = tuple(m for m in found["metrics"].split("/") if m and m != NO_SAMPLE)
    if metrics:
        kinds = list(dict.fromkeys(" from ".join(metric_words(m)) for m in metrics))
        activity = f"{' and '.join(kinds)} ({found['telemetry']})"
    else:
        activity = f"GPU time with no activity sample in telemetry ({found['telemetry']})"
    words = f"{activity} × GPU cost from the invoice ({found['billing']})"
    sources = _names(found["telemetry"]) + _names(found["billing"])
    if found["g"]:
        words += f" × idle-to-busy ratio {found['g']} from the kernel profile {found['profile']}"
        sources += (found["profile"],)
        metrics += (f"kernel timeline of {found['trace']}",)
    return Measured(words, metrics + (column,), sources)


def bucket_sources(parts: Iterable[dict], basis: str, shown: int = 3) -> list[str]:
    """The distinct measurements of a bucket's parts, in words; invoice classes of one billing
    source joined into one phrase; past ``shown`` phrases, one more says how many are left (page 1
    has room for a few; the Evidence appendix lists every part with its source)."""
    found = _bucket_phrases(parts, basis)
    if len(found) <= shown:
        return found
    rest = len(found) - shown + 1
    return found[:shown - 1] + [f"and {rest} more measurements (Evidence appendix: bucket parts)"]


def _bucket_phrases(parts: Iterable[dict], basis: str) -> list[str]:
    phrases: list[str] = []
    classes: dict[str, list[str]] = {}
    for part in parts:
        text = str(part.get("source") or "")
        found = _LINES.match(text)
        if found:
            words = class_words(found["klass"])
            key = f"invoice lines ({found['billing']})"
            if key not in classes:
                classes[key] = []
                phrases.append(key)
            if words not in classes[key]:
                classes[key].append(words)
        elif text:
            phrase = measured(text, basis).words
            if phrase not in phrases:
                phrases.append(phrase)
    return [f"{p}: {', '.join(classes[p])}" if p in classes else p for p in phrases]


def measurements(audit: dict) -> list[dict[str, str]]:
    """The appendix table: each figure, the metric names behind it and their sources (with format)."""
    formats = source_formats(audit)
    basis = str(audit.get("cost_basis") or "")
    named = lambda names: ", ".join(f"{n} ({formats[n]})" if formats.get(n) else n for n in names)  # noqa: E731
    telemetry = _telemetry_of(audit, formats)  # once, not once a row: it reads every source
    rows = []
    for key in BUCKETS:
        for part in ((audit.get("buckets") or {}).get(key) or {}).get("parts") or []:
            found = measured(str(part.get("source") or ""), basis)
            service = part.get("service")
            figure = f"{BUCKET_LABELS.get(key, key)}: {label(part.get('name'))}" + (f" ({service})" if service else "")
            rows.append({"figure": figure, "metrics": ", ".join(found.metrics) or "—",
                         "source": named(found.sources) or str(part.get("source") or "—")})
    for split in audit.get("gpu_split") or []:
        if split.get("busy_source"):
            rows.append({"figure": f"GPU busy fraction ({split.get('service')})",
                         "metrics": str(split["busy_source"]).replace("/", ", "),
                         "source": telemetry})
    for name, service in (audit.get("services") or {}).items():
        for counted in str(service.get("traffic_source") or "").split(", "):
            where, _, metric = counted.rpartition(": ")
            if metric:
                rows.append({"figure": f"Requests ({name})", "metrics": metric,
                             "source": where or telemetry})
    return rows


def _telemetry_of(audit: dict, formats: dict[str, str]) -> str:
    names = [str(s.get("name")) for s in audit.get("sources") or [] if s.get("kind") == "telemetry"]
    return ", ".join(f"{n} ({formats[n]})" for n in names) or "—"


def option_target(acts_on: str) -> str:
    """``platform_overhead.unallocated`` → 'Platform overhead · Unallocated GPUs'."""
    bucket, _, part = acts_on.partition(".")
    if not part:
        return label(bucket)
    return f"{BUCKET_LABELS.get(bucket, label(bucket))} · {label(part)}"


def top_down_line(audit: dict) -> str:
    """One sentence: why the reconciliation's top-down figure differs from the total in scope,
    with the amount and the reasons (the parts it leaves out, the GPU-hours telemetry misses)."""
    cur = str(audit.get("currency") or "")
    recon = audit.get("reconciliation") or {}
    total, top = to_decimal(audit.get("total")), to_decimal(recon.get("top_down"))
    if total is None or top is None:
        return ""
    difference = total - top
    head = (f"Top-down is {money(abs(difference), cur)} {'below' if difference >= 0 else 'above'} "
            f"the total in scope ({money(total, cur)})")
    if recon.get("verdict") == "not_measured" and not to_decimal(recon.get("covered_hours")):
        return f"{head}: with no GPU time covered by telemetry it holds only the non-GPU invoice lines."
    if difference == 0:
        return f"Top-down equals the total in scope ({money(total, cur)}): telemetry covers every paid GPU-hour."
    reasons, explained = _left_out(audit, cur)
    if not reasons:
        return f"{head}."
    rest = difference - explained
    cents = Decimal("0.01") * len(reasons)
    if abs(rest) > cents:
        reasons.append(f"{money(rest, cur)} this report cannot name (see audit.json reconciliation)")
    elif rest:
        cents_apart = number(abs(rest) * 100, 0)
        reasons[-1] = reasons[-1][:-1] + f"; {cents_apart} {'cent' if cents_apart == '1' else 'cents'} apart by rounding)"
    return (f"{head}: it counts only the GPU time telemetry covers, plus the non-GPU lines, so it leaves "
            f"out {'; '.join(reasons)}.")


def _left_out(audit: dict, cur: str) -> tuple[list[str], Decimal]:
    """The unattributed parts outside the top-down figure, in words, and their sum."""
    paid = (audit.get("coverage") or {}).get("paid_gpu_hours")
    reasons, explained = [], Decimal(0)
    # one reason per part name: GPUs no sample measured make a part per service whose pods held them
    amounts: dict[str, Decimal] = {}
    measured: dict[str, Decimal | None] = {}
    for part in (audit.get("buckets") or {}).get("unattributed", {}).get("parts") or []:
        name, amount = part.get("name"), to_decimal(part.get("amount"))
        if name not in OUTSIDE_TOP_DOWN or amount is None:
            continue
        amounts[name] = amounts.get(name, Decimal(0)) + amount
        hours, before = to_decimal(part.get("gpu_hours")), measured.get(name, Decimal(0))
        measured[name] = None if hours is None or before is None else before + hours
    for name, amount in amounts.items():
        explained += amount
        hours = measured[name]
        measure = ""
        if hours is not None:
            measure = f"{number(hours, 2)} of {number(paid, 2)} paid GPU-hours: " if paid is not None \
                else f"{number(hours, 2)} GPU-hours: "
        reasons.append(f"{OUTSIDE_TOP_DOWN[name]} ({measure}{money(amount, cur)}, unattributed)")
    return reasons, explained


def glossary(texts: Iterable[Any]) -> list[tuple[str, str]]:
    """The terms of :data:`GLOSSARY` that occur in ``texts`` (case-insensitive), in glossary order."""
    page = " ".join(str(t) for t in texts).lower()
    return [(term, words) for term, words in GLOSSARY if term.lower() in page]


def page_one_texts(audit: dict) -> list[str]:
    """Every text page 1 shows, for :func:`glossary` to find its terms in."""
    basis = str(audit.get("cost_basis") or "")
    texts = list(PAGE_ONE_WORDS) + [cost_basis_words(audit), top_down_line(audit)]
    texts += [" ".join(VERDICTS.get(str((audit.get("reconciliation") or {}).get("verdict")), ("", "")))]
    for key in BUCKETS:
        bucket = (audit.get("buckets") or {}).get(key) or {}
        texts += [BUCKET_WORDS.get(key, ""), *bucket_sources(bucket.get("parts") or [], basis)]
        if key == "unattributed":
            texts += [f"{label(p.get('name'))} {p.get('reason') or ''}" for p in bucket.get("parts") or []]
    priced = [o for o in audit.get("options") or [] if o.get("status") == "priced"][:3]
    texts += [f"{o.get('title') or ''} {option_target(o.get('acts_on') or '')}" for o in priced]
    return texts

