"""Unit costs per service (METHOD §4): own GPU parts plus a share of shared costs, per request and token.

:func:`traffic_by_service` sums the serving counters and request logs per declared service (the
denominators, with every log's other counts); :func:`unit_costs` gives each service what it owns
(its GPU parts and the lines a rule or its claim assigns), a share of the shared parts by the case's
allocation key (gpu_cost, requests, owned_cost or fixed weights; a key that sums to zero falls back
to requests, then to equal shares, as do requests some service's are not measured) and what of its
cost stayed unattributed.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal
from typing import Any, Mapping, Sequence

import pandas as pd

from audit.buckets import LINE_PARTS, SHARED_PARTS  # noqa: F401  (read from here too)
from audit.case import Allocation, Service
from audit.ledger import Ledger, ServiceInterval
from audit.money import ZERO, split_evenly
from audit.result import COUNT_CLASSES, TOKEN_COLUMNS, SharedSplit, TrafficTotals, UnitCost
from audit.services import service_of
from connectors.telemetry.distinct import by_values
from connectors.telemetry.families import REQUEST_COUNTER, counter_beside


@dataclass
class _Counts:
    """Requests and tokens of one service from one source, as they are summed."""

    requests: Decimal = ZERO
    prompt_tokens: Decimal = ZERO
    generated_tokens: Decimal = ZERO
    by_ts: defaultdict[datetime, Decimal] = field(default_factory=lambda: defaultdict(lambda: ZERO))
    by_pod_ts: defaultdict[tuple[str, datetime], Decimal] = field(default_factory=lambda: defaultdict(lambda: ZERO))
    pods: set[str] = field(default_factory=set)
    sources: set[str] = field(default_factory=set)
    rows: int = 0
    token_rows: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOKEN_COLUMNS, 0))
    #: rows whose request count a request series measured (the others had token series only)
    request_rows: int = 0

    def add(self, pod: str, ts: datetime, requests: tuple[Decimal, Decimal] | None, prompt_tokens: float,
            generated_tokens: float, source: str) -> None:
        """One row of the traffic table (each float taken exactly as its shortest repr; a token
        count of NaN is not measured, and adds nothing but is not counted as measured).
        ``requests``: the row's count as a Decimal, and that count added to zero (:func:`_counted`),
        which a pod and interval counted once holds (one object for every equal count); None where
        no request series measured it (NaN): it adds nothing and is not counted as measured."""
        if requests is not None:
            self.request_rows += 1
        counted, first = requests or NO_REQUESTS
        self.requests += counted
        self.rows += 1
        self.prompt_tokens += self._tokens("prompt_tokens", prompt_tokens)
        self.generated_tokens += self._tokens("generated_tokens", generated_tokens)
        self.by_ts[ts] += counted
        key = (pod, ts)
        held = self.by_pod_ts.get(key)
        self.by_pod_ts[key] = first if held is None else held + counted
        self.pods.add(pod)
        self.sources.add(source)

    def _tokens(self, column: str, value: float) -> Decimal:
        """A row's token count (0 where no series measured it), counted as measured where one did."""
        if math.isnan(value):
            return ZERO
        self.token_rows[column] += 1
        return Decimal(repr(float(value)))

    def _measured(self, column: str, total: Decimal) -> Decimal | None:
        """A token total, or None where some pod-interval of the requests had no token series."""
        return total if self.token_rows[column] == self.rows else None

    @property
    def measured_requests(self) -> Decimal | None:
        """The request total, or None where no request series measured any of the rows (the
        source's pods had token series only): not measured, not 0 requests."""
        return self.requests if self.request_rows else None

    def totals(self, by_source: Mapping[str, Decimal], counts: Mapping[str, Mapping[str, int]]) -> TrafficTotals:
        return TrafficTotals(self.measured_requests, self._measured("prompt_tokens", self.prompt_tokens),
                             self._measured("generated_tokens", self.generated_tokens), dict(self.by_ts),
                             dict(self.by_pod_ts), frozenset(self.pods), frozenset(self.sources), dict(by_source),
                             dict(counts), self.rows, dict(self.token_rows))


def traffic_by_service(traffic: pd.DataFrame, services: Mapping[str, Service],
                       request_counts: pd.DataFrame | None = None,
                       serving: pd.DataFrame | None = None) -> dict[str, TrafficTotals]:
    """Counter increases per service (pods matched by the services' matchers).

    The sources of one kind of count (``witness``: one server counter, or request logs) are added:
    they count different pods, load balancers or periods (a source that repeats another's counter
    series is refused when it is read, audit/overlap.py). When two kinds count one service (server
    counters and request logs), one that measured requests comes first (a server exporting token
    series but no request series counts no request: its requests are None, not measured, not 0),
    then the one that also counts tokens is the denominator; every kind's
    total is kept for the denominator check, named by its sources, and every request log's line
    classes (all lines, failed, health checks, unparseable, outside the path filter) are kept
    beside it (METHOD §4). Where a server counter is the denominator, the ``serving`` table
    (serving_stats, with its source) gives all the requests its pods received (:func:`all_requests`).
    """
    per_witness: dict[tuple[str, str], _Counts] = {}
    for name, pod, ts, requests, prompt, generated, source, witness in _traffic_rows(traffic, services):
        if name is None:
            continue
        source = source or "traffic table"
        per_witness.setdefault((name, witness or source), _Counts()).add(pod, ts, requests, prompt, generated, source)
    primary: dict[str, tuple[str, _Counts]] = {}
    by_source: dict[str, dict[str, Decimal]] = defaultdict(dict)
    for (name, witness), counts in sorted(per_witness.items(), key=lambda kv: (
            not kv[1].request_rows, -(kv[1].prompt_tokens + kv[1].generated_tokens), kv[0])):
        primary.setdefault(name, (witness, counts))
        if counts.request_rows:
            by_source[name][" + ".join(sorted(counts.sources))] = counts.requests
    classes = log_counts(request_counts, services)
    served = _serving_by_service(serving, services)
    return {name: replace(counts.totals(by_source[name], classes.get(name, {})),
                          **all_requests(witness, counts, served.get(name)))
            for name, (witness, counts) in primary.items()}


def all_requests(counter: str, counts: _Counts, rows: pd.DataFrame | None) -> dict[str, Any]:
    """All the requests the pods of a server ``counter`` received (METHOD §4), as TrafficTotals'
    ``all_requests`` / ``all_source`` / ``all_unmeasured``: per pod-interval the counter counted, the
    server's received-request counter (TGI ``tgi_request_count``), else its successful + failed
    requests (Triton ``nv_inference_request_success`` + ``nv_inference_request_failure``, TGI
    ``tgi_request_success`` + ``tgi_request_failure``). Not measured, with what is missing, where
    some pod-interval has neither; {} for a request log (its lines are its all requests)."""
    family = next((f for f, name in REQUEST_COUNTER.items() if name == counter), None)
    if family is None:
        return {}
    where = ", ".join(sorted(counts.sources))
    received, failed = counter_beside(counter, "received"), counter_beside(counter, "failures")
    if received is None and failed is None:
        return {"all_unmeasured": f"the denominator ({where}) is read summed over finished_reason: its failed "
                                  "requests are not told apart, and its server exports no counter of received requests"}
    wanted = " or ".join(n for n in (received, failed) if n)
    bases = sorted({s.rpartition(": ")[0] for s in counts.sources})
    if rows is not None:
        rows = rows.loc[(rows["family"] == family) & rows["source"].isin(bases) & rows["requests"].notna()]
    if rows is None or not len(rows):
        return {"all_unmeasured": f"the denominator ({where}) counts successful requests only: no {wanted} "
                                  "series beside it"}
    each = rows["received"].where(rows["received"].notna(), rows["requests"] + rows["failures"])
    if each.isna().all():
        return {"all_unmeasured": f"the denominator ({where}) counts successful requests only: no {wanted} "
                                  "series beside it"}
    if each.isna().any():
        return {"all_unmeasured": f"{wanted} measured {int(each.notna().sum()):,} of the {len(rows):,} "
                                  f"pod-intervals the denominator ({where}) counted"}
    by_received = rows["received"].notna()
    used = [f"{received}"] * bool(by_received.any()) + [f"{counter} + {failed}"] * bool((~by_received).any())
    return {"all_requests": sum((Decimal(repr(float(v))) for v in each), ZERO),
            "all_source": f"{', '.join(bases)}: {', '.join(used)}"}


def _serving_by_service(serving: pd.DataFrame | None, services: Mapping[str, Service]) -> dict[str, pd.DataFrame]:
    """The serving_stats rows of each service, its pods matched as the traffic table's are."""
    if serving is None or serving.empty:
        return {}
    names = by_values(lambda ns, pod, model: _service_of_labels(ns, pod, model, services),
                      serving["namespace"], serving["pod"], serving["model_name"])
    return {str(name): rows for name, rows in serving.groupby(names, sort=False)}


def log_counts(table: pd.DataFrame | None, services: Mapping[str, Service]) -> dict[str, dict[str, dict[str, int]]]:
    """service -> source -> class -> lines, summed over every interval (undated lines included)."""
    out: dict[str, dict[str, dict[str, int]]] = defaultdict(dict)
    if table is None or table.empty:
        return out
    for (source, pod), rows in table.groupby(["source", "pod"], sort=True):
        labels = {"namespace": "", "pod": str(pod), "model_name": "", "container": ""}
        name = service_of(labels, services, {}) or (str(pod) if pod in services else None)
        if name is None:
            continue
        out[name][str(source)] = {c: int(rows[c].sum()) if c in rows else 0 for c in COUNT_CLASSES}
    return out


def _traffic_rows(traffic: pd.DataFrame, services: Mapping[str, Service]):
    """(service or None, pod, ts, requests, prompt tokens, generated tokens, source, witness) per row, in the
    table's order: the service matched once per distinct (namespace, pod, model) (a pod's rows, one
    per interval, share one answer) and each interval start made a datetime once; the columns are
    taken as Python lists (iterating a pandas string column value by value is ten times slower)."""
    if traffic.empty:
        return iter(())
    names = by_values(lambda ns, pod, model: _service_of_labels(ns, pod, model, services),
                      traffic["namespace"], traffic["pod"], traffic["model_name"])
    codes, stamps = pd.factorize(traffic["ts"], use_na_sentinel=False)
    moments = [stamp.to_pydatetime() for stamp in stamps]
    sources = traffic["source"].tolist() if "source" in traffic else [""] * len(traffic)
    witnesses = traffic["witness"].tolist() if "witness" in traffic else [""] * len(traffic)
    pods = by_values(lambda pod: pod, traffic["pod"])  # one string per pod, not one per row
    return zip(names.tolist(), pods.tolist(), [moments[c] for c in codes.tolist()],
               by_values(_counted, traffic["requests"]).tolist(), traffic["prompt_tokens"].tolist(),
               traffic["generated_tokens"].tolist(), sources, witnesses)


def _counted(requests: float) -> tuple[Decimal, Decimal] | None:
    """A request count exactly as its shortest repr, and that added to zero (what a sum that starts
    at zero holds after it): made once per distinct count; None for NaN (no request series)."""
    if math.isnan(float(requests)):
        return None
    counted = Decimal(repr(float(requests)))
    return counted, ZERO + counted


#: what a row no request series measured adds: nothing (the figures a count of 0 adds)
NO_REQUESTS: tuple[Decimal, Decimal] = (Decimal("0.0"), ZERO + Decimal("0.0"))  # = _counted(0.0)


def _service_of_labels(namespace, pod, model_name, services: Mapping[str, Service]) -> str | None:
    labels = {"namespace": namespace, "pod": pod, "model_name": model_name, "container": ""}
    return service_of(labels, services, {}) or _named_service(namespace, pod, model_name, services)


def _named_service(namespace, pod, model_name, services: Mapping[str, Service]) -> str | None:
    """Request logs carry no pod labels: their rows name the service the case gave the source."""
    if not namespace and not model_name and pod in services:
        return pod
    return None


def unit_costs(ledger: Ledger, intervals: Sequence[ServiceInterval], services: Mapping[str, Service],
               traffic: Mapping[str, TrafficTotals],
               allocation: Allocation | None = None) -> tuple[dict[str, UnitCost], SharedSplit]:
    """Owned cost, a share of the shared cost (by the case's allocation key) and the unattributed
    cost each service leaves out (METHOD §4)."""
    own: defaultdict[str, Decimal] = defaultdict(lambda: ZERO)
    lines: defaultdict[str, Decimal] = defaultdict(lambda: ZERO)
    unattributed: defaultdict[str, Decimal] = defaultdict(lambda: ZERO)
    by_bucket: defaultdict[str, defaultdict[str, Decimal]] = defaultdict(lambda: defaultdict(lambda: ZERO))
    for part in ledger.parts.values():
        if part.service is None:
            continue
        if part.bucket == "unattributed":
            unattributed[part.service] += part.amount
            continue
        own[part.service] += part.amount
        by_bucket[part.service][part.bucket] += part.amount
        if part.name in LINE_PARTS:
            lines[part.service] += part.amount
    pool = sum((p.amount for p in ledger.parts.values()
                if p.service is None and (p.bucket, p.name) in SHARED_PARTS), ZERO)
    split = shared_split(allocation or Allocation(), list(services), pool,
                         key_values(intervals, traffic, own, allocation or Allocation()))
    shares = dict(zip(split.weights, split_evenly(pool - split.unallocated, list(split.weights.values()))))
    split = replace(split, by_part=shared_by_part(ledger, pool, shares))
    costs = {s: UnitCost(s, own[s], shares.get(s, ZERO), unattributed[s], dict(by_bucket[s]), traffic.get(s), lines[s])
             for s in services}
    return costs, split


def shared_by_part(ledger: Ledger, pool: Decimal, shares: Mapping[str, Decimal]) -> dict[str, dict[str, Decimal]]:
    """Each service's share of each shared part: share × part / pool, the last part taking the rest so
    that a service's parts sum exactly to its share (audit.json ``components``, METHOD §10)."""
    parts = sorted((p.name, p.amount) for p in ledger.parts.values()
                   if p.service is None and (p.bucket, p.name) in SHARED_PARTS and p.amount)
    out: dict[str, dict[str, Decimal]] = {}
    for service, taken in shares.items():
        if not parts or pool == 0:
            continue
        each = {name: taken * amount / pool for name, amount in parts}
        each[parts[-1][0]] = taken - sum((v for n, v in each.items() if n != parts[-1][0]), ZERO)
        out[service] = each
    return out


#: ledger parts that hold whole billing lines (a service owns them by a rule or a claim)


def key_values(intervals: Sequence[ServiceInterval], traffic: Mapping[str, TrafficTotals],
               own: Mapping[str, Decimal], allocation: Allocation) -> dict[str, Mapping[str, Decimal | None]]:
    """Each allocation key's value per service: paid GPU cost, requests (None where the service's
    source has no request series: not measured, not 0), owned cost, fixed weights."""
    paid: defaultdict[str, Decimal] = defaultdict(lambda: ZERO)
    for iv in intervals:
        paid[iv.service] += iv.paid
    return {"gpu_cost": paid, "requests": {s: t.requests for s, t in traffic.items()},
            "owned_cost": own, "weights": allocation.weights}


def shared_split(allocation: Allocation, names: Sequence[str], pool: Decimal,
                 values: Mapping[str, Mapping[str, Decimal | None]]) -> SharedSplit:
    """The weights that split the shared pool: the case's key, else requests, else equal weights
    (METHOD §4), and the note that says which fell back and why. Requests split nothing where a
    service's are not measured (:func:`unmeasured_requests`): weighing it 0 would give it none of the pool."""
    note = None
    for key in dict.fromkeys((allocation.key, "requests")):
        if key == "requests" and (unmeasured := unmeasured_requests(names, values[key])):
            note = ((note + "; ") if note else "") + unmeasured
            continue
        weights = {s: max(ZERO, values[key].get(s) or ZERO) for s in names}  # None only where unmeasured above
        if sum(weights.values(), ZERO) > 0:
            said = _joined(note, f"split by {key}") if note else None
            return SharedSplit(allocation.key, key, said, pool, ZERO, {s: w for s, w in weights.items() if w > 0})
        note = ((note + "; ") if note else "") + f"{KEY_WORDS[key]} sums to zero"
    if not names:
        reason = "no service is declared: the shared cost stays unallocated"
        return SharedSplit(allocation.key, "none", _joined(note, reason), pool, pool, {})
    return SharedSplit(allocation.key, "equal", _joined(note, "split in equal shares"), pool, ZERO,
                       {s: Decimal(1) for s in names})


def unmeasured_requests(names: Sequence[str], requests: Mapping[str, Decimal | None]) -> str | None:
    """What makes the requests key unmeasured for the split, or None: the services whose requests no
    source measured (a traffic source with token series only, or none matched), each with why."""
    missing = {s: "its traffic source has token series only, no request series" if s in requests
               else "no request counter or request log matched it" for s in names if requests.get(s) is None}
    if not missing:
        return None
    return "requests not measured for " + ", ".join(f"{s} ({why})" for s, why in missing.items())


KEY_WORDS = {"gpu_cost": "GPU cost (no service holds paid GPU time)", "requests": "requests (no service counted any)",
             "owned_cost": "owned cost (no service owns any)", "weights": "the fixed weights"}


def _joined(note: str | None, tail: str) -> str:
    return f"{note}: {tail}" if note else tail
