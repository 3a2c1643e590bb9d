"""Whether the services' billing-line claims fit the invoice (METHOD §4, rule 5: no silent misfit).

A ``[services.NAME]`` entry may claim lines by ``tags`` or ``resource_ids``: a claim that no line
carries leaves the service's unit cost without the lines it meant to own. Each such claim is a
misfit naming the nearest tag keys, values or resource ids the invoice does contain:

* ``service_claim``: a tag or resource-id claim that matches no billing line;
* ``claim_out_of_scope``: a claim that matches only lines the ``[scope]`` leaves out, so it owns
  nothing: the lines, their money, the scope rule that leaves them out and the nearest values in scope;
* ``service_unmatched`` (**error**): a service with no telemetry matchers whose claims match no line
  and that no request-log source names — it matches nothing at all;
* ``claim_taken``: a claim that matches charges in scope the service does not own, by class and
  by who took them: GPU compute lines (the GPU split gives GPU time by telemetry, never by a claim),
  or lines a case rule or an earlier service's claim gives another service. Tax, credits and
  adjustments are left out: they net into the charges they name;
* ``claim_partial``: a tags claim that matches some lines of a resource and class and leaves others
  of them in scope to no service (their labels missing or different on part of the resource's
  lines), per resource with those lines, their cost and the tag values they carry instead;
* ``claim_key_case``: a tags claim that matches some lines in scope and leaves others to no service
  whose tag key differs from the claimed one in case alone (audit/fit_claim_case.py), per resource;
  a claim that matches no line names such a key in its ``service_claim`` hint.
"""
from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Mapping, NamedTuple, Sequence

import numpy as np
import pandas as pd

from audit.case import Case, Service
from audit.fit_claim_case import case_rule, cased_hint, cased_match
from audit.fit_scope import left_out_by
from audit.lines import (
    ADJUSTING_CATEGORIES,
    basis_amount,
    distinct_tags,
    line_tags,
    lines_where,
    tags_of,
)
from audit.misfit import LISTED, VALUE_CHARS, Misfit, listing, nearest, text
from audit.money import ZERO, cents, dsum
from audit.services import matches
from schemas.billing import line_total


def claims_fit(case: Case, lines: pd.DataFrame, logs: Mapping[str, list[str]],
               kept: np.ndarray | None = None) -> list[Misfit]:
    """A misfit per claim that matches no billing line (and an error per service matching nothing),
    and per claim that matches only lines the scope leaves out (``kept``: which of ``lines`` the
    scope keeps; None: all)."""
    claimants = [s for s in case.services.values() if s.claims_lines]
    if not claimants or lines.empty:
        return []
    tags = distinct_tags(lines)  # whether some line carries a tag: each distinct tag set once
    resources = sorted({str(r) for r in lines["resource_id"].unique() if str(r)})
    hits = {s.name: {p: any(matches(p, r) for r in resources) for p in s.resource_ids} for s in claimants}
    missed = any(not hit for found in hits.values() for hit in found.values())
    ids_by_name = _ids_by_name(lines) if missed else {}  # read once, and only where a claim missed
    inside = None if kept is None or bool(np.all(kept)) else lines_where(lines, kept)
    rule = case_rule(lines["provider"].unique()) if "provider" in lines.columns else case_rule(())
    out: list[Misfit] = []
    for service in claimants:
        tags_hit = _tags_claim_lines(service, tags)
        resource_hits = hits[service.name]
        out.extend(_claim_misfits(service, tags, resources, tags_hit, resource_hits, ids_by_name, rule))
        if inside is not None:
            found = [c for c in _claims(service, tags_hit, resource_hits) if not _claims_any(c, inside)]
            out.extend(_out_of_scope(case, c, lines[~np.asarray(kept, dtype=bool)], inside, rule) for c in found)
        if not tags_hit and not any(resource_hits.values()) and not service.match and service.name not in logs:
            subject = f"service {text(service.name)}"
            out.append(Misfit("service_unmatched", subject,
                              f"{subject} matches nothing in the data: it has no telemetry matchers, its claims "
                              "match no billing line and no request-log source names it", (), "error"))
    return out


def _claims(service: Service, tags_hit: bool, resource_hits: Mapping[str, bool]) -> list[Service]:
    """The service's claims that match some billing line, each as a service of that claim alone
    (its tags claim whole: every tag must hold; each resource id apart)."""
    out = [replace(service, resource_ids=())] if service.tags and tags_hit else []
    return out + [replace(service, tags={}, resource_ids=(p,)) for p, hit in resource_hits.items() if hit]


def _claims_any(claim: Service, lines: pd.DataFrame) -> bool:
    """Whether the claim matches some of ``lines`` (each distinct tag set and resource id once)."""
    if claim.tags:
        return _tags_claim_lines(claim, distinct_tags(lines))
    return any(matches(p, str(r)) for r in lines["resource_id"].unique() if str(r) for p in claim.resource_ids)


def _out_of_scope(case: Case, claim: Service, outside: pd.DataFrame, inside: pd.DataFrame, rule: str) -> Misfit:
    """A ``claim_out_of_scope`` warning: the claim matches only lines the scope leaves out (so it owns
    nothing), with how many, their money, the scope rule that leaves them out and the nearest
    values the lines in scope carry."""
    matched = outside[_claimed(claim, tags_of(outside), outside["resource_id"])]
    subject = f"service {text(claim.name)}"
    if claim.tags:
        written = "tags claim " + ", ".join(f'{text(k)} = "{text(p)}"' for k, p in claim.tags.items())
        present, near = _tags_present(claim, distinct_tags(inside), rule)
    else:
        written = f'resource_ids claim "{text(claim.resource_ids[0])}"'
        near = nearest(claim.resource_ids[0], {str(r) for r in inside["resource_id"].unique()})
        present = f"ResourceIds present: {listing(near)}"
        near = [text(v) for v in near[:LISTED]]
    cost = cents(dsum(basis_amount(matched, case.cost_basis)))
    return Misfit("claim_out_of_scope", subject,
                  f"{subject}: {written} matches only lines outside [scope]: {line_total(matched):,} line(s), "
                  f"{cost} {case.currency} {case.cost_basis}, left out by {left_out_by(case.scope, matched)}, "
                  f"so it claims nothing; in scope, {present}", tuple(near))


def _tags_present(service: Service, tags: Sequence[Mapping], rule: str) -> tuple[str, list[str]]:
    """Per claimed key, the nearest tag keys (a key no line carries) or values of it the lines carry."""
    keys = {str(k) for t in tags for k in t}
    parts: list[str] = []
    near_all: list[str] = []
    for key, pattern in service.tags.items():
        present, near = _key_present(key, pattern, tags, keys, rule)
        parts.append(present)
        near_all.extend(text(v) for v in near[:LISTED])
    return "; ".join(parts), near_all


def _key_present(key: str, pattern: str, tags: Sequence[Mapping], keys: set[str], rule: str) -> tuple[str, list[str]]:
    """The nearest tag keys (where no line carries ``key``) or values of ``key`` the lines carry,
    the key in another case first where the lines carry it with a value the claim matches (why:
    ``rule``, :func:`audit.fit_claim_case.case_rule`)."""
    cased, first = cased_hint(key, pattern, tags, rule)
    if key not in keys:
        near = nearest(key, keys)
        return f"tag keys present: {listing(near)}{cased}", first + near
    near = nearest(pattern, {str(t[key]) for t in tags if key in t})
    return f"values of {text(key)} present: {listing(near)}{cased}", first + near


def _tags_claim_lines(service: Service, tags: Sequence[Mapping]) -> bool:
    """Whether some line carries every tag the service claims (False when it claims none)."""
    return bool(service.tags) and any(all(matches(p, str(t.get(k, ""))) for k, p in service.tags.items())
                                      for t in tags)


#: characters of a ResourceId to claim instead, shown whole (a GCP id runs to ~100)
ID_CHARS = 200


def _ids_by_name(lines: pd.DataFrame) -> dict[str, list[str]]:
    """ResourceName → the ResourceIds of the lines that carry it (where the two differ), each once."""
    if "resource_name" not in lines.columns:
        return {}
    pairs = lines[["resource_name", "resource_id"]].drop_duplicates().astype(str)
    pairs = pairs[(pairs["resource_name"] != "") & (pairs["resource_id"] != "")
                  & (pairs["resource_name"] != pairs["resource_id"])]
    return {name: sorted(group["resource_id"]) for name, group in pairs.groupby("resource_name")}


def _claim_misfits(service: Service, tags: Sequence[Mapping], resources: list[str], tags_hit: bool,
                   resource_hits: Mapping[str, bool], ids_by_name: Mapping[str, list[str]] | None = None,
                   rule: str = "") -> list[Misfit]:
    """A misfit per claim that matched no line (each claim evaluated once, by the caller); a
    resource_ids claim that is some lines' ResourceName names the ResourceIds to claim instead."""
    subject = f"service {text(service.name)}"
    out = []
    if service.tags and not tags_hit:
        keys = {str(k) for t in tags for k in t}
        for key, pattern in service.tags.items():
            present, near = _key_present(key, pattern, tags, keys, rule)
            out.append(Misfit("service_claim", subject,
                              f"{subject}: tags claim {text(key)} = \"{text(pattern)}\" matches no billing line; "
                              f"{present}", tuple(text(v) for v in near[:LISTED])))
    for pattern in service.resource_ids:
        if not resource_hits[pattern]:
            named = sorted({i for name, ids in (ids_by_name or {}).items() if matches(pattern, name) for i in ids})
            near = named or nearest(pattern, resources)
            present = (f"it is the ResourceName of lines whose ResourceId is "
                       f"{', '.join(text(i, ID_CHARS) for i in named[:LISTED])}: claim that"
                       if named else f"ResourceIds present: {listing(near)}")
            out.append(Misfit("service_claim", subject,
                              f"{subject}: resource_ids claim \"{text(pattern)}\" matches no billing line; "
                              f"{present}", tuple(text(v, ID_CHARS if named else VALUE_CHARS) for v in near[:LISTED])))
    return out


#: the class a claim cannot give a service (audit/attribute.py): its lines are split by telemetry
UNCLAIMABLE = {"gpu_compute": "gpu_compute lines (the GPU split gives GPU time by telemetry, not by claims)"}


def claims_taken_fit(case: Case, classified: pd.DataFrame) -> list[Misfit]:
    """A ``claim_taken`` warning per claiming service whose claim matches classified lines in scope
    it does not own, saying which and why (each distinct tag set and resource id matched once)."""
    claimants = [s for s in case.services.values() if s.claims_lines]
    if not claimants or classified.empty:
        return []
    classified = lines_where(classified, ~classified["charge_category"].isin(ADJUSTING_CATEGORIES))
    if classified.empty:
        return []
    tags = tags_of(classified)
    amounts = basis_amount(classified, case.cost_basis)
    owners = classified["claimed_by"].fillna("").astype(str).to_numpy(dtype=object)
    counts = (classified["line_count"] if "line_count" in classified.columns
              else pd.Series(1, index=classified.index)).to_numpy(dtype=np.int64)  # invoice lines a row sums
    classes = classified["resource_class"].astype(str).to_numpy(dtype=object)
    out = []
    for service in claimants:
        hit = _claimed(service, tags, classified["resource_id"])
        if not hit.any():
            continue
        why = _not_owned(service.name, owners[hit], classes[hit], counts[hit], amounts[hit].tolist(), case.currency)
        if why:
            subject = f"service {text(service.name)}"
            owned = int(counts[hit][(owners[hit] == service.name) & ~np.isin(classes[hit], list(UNCLAIMABLE))].sum())
            out.append(Misfit("claim_taken", subject,
                              f"{subject}: its claims match {int(counts[hit].sum()):,} line(s) in scope and it owns "
                              f"{owned:,} of them; " + "; ".join(why), ()))
    return out


def _claimed(service: Service, tags: pd.Series, resources: pd.Series) -> np.ndarray:
    """Which lines the service's claims match: every claimed tag, or one of its resource ids."""
    hit = np.zeros(len(tags), dtype=bool)
    if service.tags:
        cache: dict[int, bool] = {}  # lines of one tag set share one dict (audit.lines.tags_of)

        def carries(t: Mapping) -> bool:
            if id(t) not in cache:
                cache[id(t)] = all(matches(p, str(t.get(k, ""))) for k, p in service.tags.items())
            return cache[id(t)]
        hit |= np.array([carries(t) for t in tags.tolist()], dtype=bool)
    if service.resource_ids:
        ids = resources.fillna("").astype(str)
        found = {r: any(matches(p, r) for p in service.resource_ids) for r in ids.unique() if r}
        hit |= ids.map(lambda r: found.get(r, False)).to_numpy(dtype=bool)
    return hit


def _not_owned(name: str, owners: np.ndarray, classes: np.ndarray, counts: np.ndarray, amounts: list[Decimal],
               currency: str) -> list[str]:
    """What of the matched lines the service does not own, grouped by why, with lines and cost."""
    groups: dict[str, tuple[int, Decimal]] = {}
    for owner, klass, count, amount in zip(owners, classes, counts.tolist(), amounts):
        if klass in UNCLAIMABLE:
            why = UNCLAIMABLE[klass]
        elif owner != name:
            why = f"{klass} lines owned by service {text(owner)} (its rule, or its claim first in file order)"
        else:
            continue
        lines, cost = groups.get(why, (0, ZERO))
        groups[why] = (lines + count, cost + amount)
    return [f"{lines:,} are {why}: {cents(cost)} {currency}" for why, (lines, cost) in sorted(groups.items())]



class Partial(NamedTuple):
    """A resource whose lines of one class a tags claim matches in part: the lines it leaves to no service."""

    resource_id: str
    name: str                    # its ResourceName ("" when the lines carry none)
    resource_class: str          # the class of the lines
    left: int                    # invoice lines of it and its class in scope the claim leaves to no service
    lines: int                   # invoice lines of it and its class in scope (charges)
    cost: Decimal                # the cost-basis amount of the lines left
    carried: str                 # the claimed keys' values the lines left carry ("absent" for none)


def claims_partial_fit(case: Case, classified: pd.DataFrame) -> list[Misfit]:
    """A ``claim_partial`` warning per service whose tags claim matches some in-scope lines of a
    resource and class and leaves other lines of them to no service (rule 5: the claim silently
    drops them: the labels are missing or different on part of the resource's lines).

    Lines of one resource and class go together: a class the claim matches no line of on the
    resource (an instance's untagged data transfer beside its tagged hours) is not a label gone
    missing. Only charges count (tax and credits net into the charges they name) and not GPU
    compute (split by telemetry, never by a claim); a line another service owns is that service's,
    not a misfit. Lines the claim would match with a key read in another case are ``claim_key_case``
    (:func:`_cased_misfit`), not part of a ``claim_partial``. The work is per distinct (resource,
    class, tags, owner) combination, never per line in Python."""
    claimants = [s for s in case.services.values() if s.tags]
    if not claimants or classified.empty:
        return []
    by = [c for c in ("resource_id", "resource_class", "charge_category", "tags", "allocated_tags", "claimed_by")
          if c in classified.columns]
    # every line grouped, no take of the lines: which lines count is read off each combination
    codes = classified.groupby(by, sort=False, dropna=False).ngroup().to_numpy()
    # groups are numbered in order of first appearance, so the n-th first occurrence has code n;
    # a resource is named by the ResourceName of its first line
    shown = by + [c for c in ("resource_name", "provider") if c in classified.columns]
    combos = classified[shown].iloc[pd.Series(codes).drop_duplicates().index].fillna("").astype(str).to_dict("records")
    # charges of a resource, not GPU compute: the combinations whose lines a claim can take
    takable = [i for i, c in enumerate(combos) if c["resource_id"] and c["charge_category"] not in ADJUSTING_CATEGORIES
               and c["resource_class"] not in UNCLAIMABLE]
    weights = classified["line_count"].to_numpy(dtype=np.int64) if "line_count" in classified.columns \
        else np.ones(len(classified), dtype=np.int64)
    counts = np.bincount(codes, weights=weights).astype(np.int64).tolist()
    amounts = basis_amount(classified, case.cost_basis).to_numpy(dtype=object)
    tags = {i: line_tags(combos[i]["tags"], combos[i].get("allocated_tags")) for i in takable}
    out = []
    for service in claimants:
        hit = {i for i in takable if all(matches(p, str(tags[i].get(k, ""))) for k, p in service.tags.items())}
        claimed = {_part(combos[i]) for i in hit}
        free = [i for i in takable if i not in hit and not combos[i]["claimed_by"]]
        cased = {i: found for i in free if (found := cased_match(service, tags[i]))} if hit else {}
        if cased:
            out.append(_cased_misfit(service, [combos[i] for i in cased], [counts[i] for i in cased],
                                     _costs(list(cased), codes, amounts), list(cased.values()),
                                     f"{case.currency} {case.cost_basis}"))
        left = [i for i in free if _part(combos[i]) in claimed and i not in cased]
        if left:
            partial = _partial_resources(service, [combos[i] for i in takable], [counts[i] for i in takable],
                                         [(combos[i], tags[i], counts[i]) for i in left], _costs(left, codes, amounts))
            out.append(_partial_misfit(service, partial, f"{case.currency} {case.cost_basis}"))
    return out


def _part(combo: Mapping[str, str]) -> tuple[str, str]:
    """The resource and class whose lines a claim should take alike."""
    return combo["resource_id"], combo["resource_class"]


def _costs(left: list[int], codes: np.ndarray, amounts: np.ndarray) -> list[Decimal]:
    """The summed amount of the lines of each combination in ``left`` (Python over those lines only)."""
    chosen = np.isin(codes, left)
    cost = dict.fromkeys(left, ZERO)
    for code, amount in zip(codes[chosen].tolist(), amounts[chosen].tolist()):
        cost[code] += ZERO if amount is None else amount
    return [cost[i] for i in left]


def _partial_resources(service: Service, takable: list[dict], counts: list[int], left: list[tuple[dict, dict, int]],
                       cost: list[Decimal]) -> list[Partial]:
    """The resources and classes of the combinations ``left`` (each with its tags and lines: matched
    by no claim, owned by no service, of a resource and class the claim matches other lines of), with
    the lines of them ``takable`` holds (``counts`` lines each), largest cost first, then by id."""
    named = {_part(combo): combo.get("resource_name", "") for combo, _, _ in left}
    lines = dict.fromkeys(named, 0)
    for combo, n in zip(takable, counts):
        if _part(combo) in lines:
            lines[_part(combo)] += n
    kept: dict[tuple[str, str], tuple[int, Decimal, dict[str, set[str]]]] = {}
    for (combo, tags, count), amount in zip(left, cost):
        n, total, values = kept.get(_part(combo), (0, ZERO, {k: set() for k in service.tags}))
        for key in service.tags:
            values[key].add(str(tags.get(key, "")))
        kept[_part(combo)] = (n + count, total + amount, values)
    found = [Partial(part[0], named[part], part[1], n, lines[part], total, _carried(values))
             for part, (n, total, values) in kept.items()]
    return sorted(found, key=lambda p: (-abs(p.cost), p.resource_id, p.resource_class))


def _carried(values: Mapping[str, set[str]]) -> str:
    """The values of each claimed key that the lines left carry ("absent" where they carry none)."""
    def shown(found: set[str]) -> str:
        ordered = sorted(found, key=lambda v: (v != "", v))
        written = ["absent" if v == "" else f'"{text(v)}"' for v in ordered[:LISTED]]
        return ", ".join(written) + (f" … ({len(ordered) - LISTED} more)" if len(ordered) > LISTED else "")
    return "; ".join(f"{text(key)} {shown(found)}" for key, found in values.items())


def _resource_named(partial: Partial) -> str:
    """A resource as the warning names it: its ResourceName and, where it differs, its ResourceId
    (what a resource_ids claim takes, shown whole)."""
    if partial.name and partial.name != partial.resource_id:
        return f"{text(partial.name)} (ResourceId {text(partial.resource_id, ID_CHARS)})"
    return text(partial.resource_id, ID_CHARS)


def _partial_misfit(service: Service, found: list[Partial], currency: str) -> Misfit:
    """The warning for one service: its claim, the lines and cost it leaves, and each resource.
    ``currency`` names the cost basis too: the cost is of the charges, before the tax and credits
    that net into them (the adjustment stage spreads those after this check)."""
    subject = f"service {text(service.name)}"
    claim = ", ".join(f'{text(k)} = "{text(p)}"' for k, p in service.tags.items())
    each = "; ".join(f"{_resource_named(p)}: {p.left:,} of its {p.lines:,} {p.resource_class} line(s), "
                     f"{cents(p.cost)} {currency}, "
                     f"carrying {p.carried}" for p in found[:LISTED])
    more = f"; … {len(found) - LISTED} more resource(s)" if len(found) > LISTED else ""
    return Misfit("claim_partial", subject,
                  f"{subject}: tags claim {claim} matches only part of the lines in scope of {len(found)} "
                  f"resource(s), class by class, and leaves {sum(p.left for p in found):,} line(s), "
                  f"{cents(sum((p.cost for p in found), ZERO))} {currency} before tax and credits, to no service "
                  f"(shared or unattributed): "
                  f"{each}{more}. Label those lines, or claim the resources by resource_ids",
                  tuple(text(p.resource_id, ID_CHARS) for p in found[:LISTED]))


def _cased_misfit(service: Service, combos: list[dict], counts: list[int], costs: list[Decimal],
                  swapped: list[dict[str, str]], currency: str) -> Misfit:
    """A ``claim_key_case`` warning: the lines in scope, owned by no service, that a tags claim matching
    other lines would match with its keys read in another case, per resource (largest cost first)."""
    kept: dict[tuple[str, str], list] = {}
    for combo, n, cost, keys in zip(combos, counts, costs, swapped):
        found = kept.setdefault((combo["resource_id"], combo.get("resource_name", "")), [0, ZERO, set()])
        found[0] += n
        found[1] += cost
        found[2].update(keys.values())
    ordered = sorted(kept.items(), key=lambda item: (-abs(item[1][1]), item[0][0]))
    rule = case_rule(c.get("provider", "") for c in combos)
    each = "; ".join(f"{_resource_named(Partial(rid, name, '', n, n, cost, ''))}: {n:,} line(s), {cents(cost)} "
                     f"{currency}, carrying {', '.join(text(k) for k in sorted(keys))}"
                     for (rid, name), (n, cost, keys) in ordered[:LISTED])
    more = f"; … {len(ordered) - LISTED} more resource(s)" if len(ordered) > LISTED else ""
    subject = f"service {text(service.name)}"
    claim = ", ".join(f'{text(k)} = "{text(p)}"' for k, p in service.tags.items())
    return Misfit("claim_key_case", subject,
                  f"{subject}: tags claim {claim} leaves {sum(counts):,} line(s) in scope, "
                  f"{cents(sum(costs, ZERO))} {currency} before tax and credits, to no service whose tag key is "
                  f"written in another case ({rule}): {each}{more}. Write the key alike on those lines, or "
                  "claim the resources by resource_ids", tuple(text(rid, ID_CHARS) for (rid, _), _ in ordered[:LISTED]))
