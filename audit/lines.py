"""What a billing line says: its resource key, its cost-basis amount, the GPU time it bills.

Read by several stages (classification, the GPU split, the writer) and by ``costaudit billing``;
kept out of the stages so that none of them imports another.
"""
from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from audit.block_ties import block_lines, json_object
from audit.misfit import text
from audit.money import ZERO, cents, dsum
from connectors.billing.catalogue import GpuType, bundling_machine, gpu_skus
from connectors.errors import InputError, InputErrors
from schemas.billing import line_total

GUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def account_key(account: str) -> str:
    """An account id reduced to what identifies it: an Azure subscription is the same whether named by
    its ARM path (``/subscriptions/GUID``, Microsoft's FOCUS SubAccountId) or by its GUID (the cost
    details export's SubscriptionId), in any case; any other id is itself."""
    text = str(account or "").strip()
    low = text.lower()
    if low.startswith("/subscriptions/"):
        low = low[len("/subscriptions/"):].rstrip("/")
    return low if GUID.fullmatch(low) else text


def accounts_in(values: pd.Series, accounts) -> pd.Series:
    """Which of ``values`` (account ids) name one of ``accounts`` (compared by :func:`account_key`)."""
    wanted = {account_key(a) for a in accounts}
    return values.isin([v for v in values.dropna().unique() if account_key(v) in wanted])


def resource_key(resource_id: str) -> str:
    """A billing resource id and a scheduler provider id reduced to the same key.

    AWS ARNs of instances -> the instance id; GCP full resource names -> the instance name; Azure ARM
    ids are case-insensitive -> lower case.
    """
    rid = (resource_id or "").strip()
    if rid.startswith("arn:aws:ec2:") and ":instance/" in rid:
        return rid.rsplit("/", 1)[-1]
    if _gcp_instance(rid):
        return rid.rsplit("/", 1)[-1]
    if rid.lower().startswith("/subscriptions/"):
        return rid.lower()
    return rid


def _gcp_instance(rid: str) -> bool:
    """Whether a ResourceId is a GCP compute instance's full resource name (``…/instances/NAME``)."""
    return "/instances/" in rid and ("compute.googleapis.com" in rid or rid.startswith("projects/"))


AZURE_VM = re.compile(r"/subscriptions/.+/providers/microsoft\.compute/"
                      r"(?:virtualmachines/[^/]+|virtualmachinescalesets/[^/]+(?:/virtualmachines/[^/]+)?)/?")


def names_machine(resource_id: str) -> bool | None:
    """Whether a ResourceId names a machine, where its form tells: True for a GCP compute instance (its
    Core and Ram lines name no instance type) and an Azure VM, scale set or scale set VM (``AZURE_VM``); False for
    another Azure ARM id (a NAT gateway's or a reservation's ``/providers/…``, meter names read as
    instance types all the same); None for any other (an AWS usage type names an instance only there)."""
    rid = (resource_id or "").strip()
    if _gcp_instance(rid):
        return True
    return bool(AZURE_VM.fullmatch(rid.lower())) if rid.lower().startswith(("/subscriptions/", "/providers/")) else None


def vm_key(provider_id: str) -> str:
    """The key of a scale set's VM named by an ``azure://`` provider id (its lower-case ARM id
    ``…/virtualmachinescalesets/SET/virtualmachines/N``, which a per-VM cost details row bills);
    "" for any other provider id."""
    scheme, sep, rest = str(provider_id or "").partition("://")
    found = re.fullmatch(r"(/subscriptions/.+?/virtualmachinescalesets/[^/]+/virtualmachines/\d+)/?", rest.lower())
    return found.group(1) if scheme == "azure" and sep and found else ""


def line_tags(tags: str | None, allocated: str | None = None) -> dict:
    """The tags a line carries: its Tags, with a FOCUS 1.3 split-allocation row's AllocatedTags over
    them (the tags of the workload the charge was split onto win over the shared resource's).

    ``[scope].tags``, a rule's ``Tags.<key>`` and a service's tag claims all read these."""
    merged = _object(tags)
    merged.update(_object(allocated))
    return merged


def tags_of(lines: pd.DataFrame) -> pd.Series:
    """:func:`line_tags` of every line (a table built in memory may lack ``allocated_tags``).

    Exports repeat a handful of tag sets over millions of lines: each distinct pair is parsed once,
    and lines with the same pair share one dict (read it, do not change it)."""
    seen: dict[tuple, dict] = {}
    values = []
    for pair in _tag_pairs(lines):
        if pair not in seen:
            seen[pair] = line_tags(*pair)
        values.append(seen[pair])
    return pd.Series(values, index=lines.index, dtype="object")


def names_no_service(lines: pd.DataFrame) -> pd.Series:
    """Tax, credit, refund and adjustment lines that name no ServiceName: a ``services`` scope cannot
    tell which charges they apply to, and keeps them by their account."""
    return lines["charge_category"].isin(ADJUSTING_CATEGORIES) & (lines["service_name"].fillna("") == "")


def names_no_charge(lines: pd.DataFrame, tagged: pd.Series) -> pd.Series:
    """Tax, credit, refund and adjustment lines that name no resource a charge bills and carry no tags
    (``tagged``: :func:`tags_of`): a ``tags`` scope cannot tell which charges they apply to, and keeps
    them by their account."""
    adjusting = lines["charge_category"].isin(ADJUSTING_CATEGORIES)
    return _no_charge_no_tags(adjusting, _names_charge(lines, adjusting), tagged)


def _no_charge_no_tags(adjusting: pd.Series, names_charge: pd.Series, tagged: pd.Series) -> pd.Series:
    return adjusting & ~names_charge & ~tagged.map(bool).astype(bool)


def _names_charge(lines: pd.DataFrame, adjusting: pd.Series) -> pd.Series:
    """Whether each line names a resource that some charge (not an adjustment) bills."""
    resource = lines["resource_id"].fillna("").astype(str)
    billed = set(resource[~adjusting & (resource != "")])
    return resource.isin(billed)


def adjustments_in_tag_scope(lines: pd.DataFrame, carries: pd.Series, tagged: pd.Series) -> pd.Series:
    """Which adjustment lines a ``tags`` scope keeps (``carries``: each line carries the scope's tags):
    those naming a resource some in-scope charge bills; for a resource no charge bills, those carrying
    the tags; and those that name no resource and carry no tags (:func:`names_no_charge`)."""
    adjusting = lines["charge_category"].isin(ADJUSTING_CATEGORIES)
    resource = lines["resource_id"].fillna("").astype(str)
    kept = set(resource[~adjusting & carries & (resource != "")])
    names_charge = _names_charge(lines, adjusting)
    return adjusting & ((names_charge & resource.isin(kept)) | (~names_charge & carries)) \
        | _no_charge_no_tags(adjusting, names_charge, tagged)


def distinct_tags(lines: pd.DataFrame) -> list[dict]:
    """:func:`line_tags` of each distinct (Tags, AllocatedTags) pair the lines carry, in first-seen order
    (what a check that some line carries a tag needs, without a dict per line)."""
    return [line_tags(*pair) for pair in dict.fromkeys(_tag_pairs(lines))]


def _tag_pairs(lines: pd.DataFrame):
    """(Tags, AllocatedTags) of each line, as plain objects (iterating Arrow-backed text is slow)."""
    tags = lines["tags"].to_numpy(dtype=object)
    if "allocated_tags" not in lines.columns:
        return zip(tags, ["{}"] * len(tags))
    return zip(tags, lines["allocated_tags"].to_numpy(dtype=object))


def line_resources(line: Mapping) -> tuple[str, ...]:
    """The resource keys a line names: its ResourceId and, on a FOCUS 1.3 split-allocation row, the
    AllocatedResourceId it was split onto (a service claiming either claims the line)."""
    keys = (resource_key(line.get("resource_id", "")), resource_key(line.get("allocated_resource_id", "") or ""))
    return tuple(dict.fromkeys(k for k in keys if k))


def _object(text) -> dict:
    if not text or not isinstance(text, str):
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return dict(value) if isinstance(value, dict) else {}


#: cost basis (METHOD §1) → the line column that holds it, and its FOCUS name
BASIS_COLUMNS = {"effective": "effective_cost", "billed": "billed_cost", "list": "list_cost",
                 "contracted": "contracted_cost"}
FOCUS_NAMES = {"effective_cost": "EffectiveCost", "billed_cost": "BilledCost", "list_cost": "ListCost",
               "contracted_cost": "ContractedCost"}
#: the bases priced before commitments: a commitment purchase or fee is no part of them (the usage it
#: covers carries its own list / contracted price)
PRE_COMMITMENT = ("list", "contracted")
#: the charge categories that net into the charges they name (audit/adjust.py), and tax beside them
CREDIT_CATEGORIES = frozenset({"Credit", "Refund", "Adjustment"})
ADJUSTING_CATEGORIES = CREDIT_CATEGORIES | {"Tax"}


#: columns only classification reads (the rules' ``x_`` fields): the charges and every stage after
#: classification go without them, so the charges' take does not copy them (0.04 GiB at 1 M lines)
CLASSIFICATION_ONLY = ("extra",)


#: the most runs of kept lines :func:`lines_where` joins as slices, per line of the table
RUNS_PER_LINE = 1 / 64


def lines_where(lines: pd.DataFrame, mask) -> pd.DataFrame:
    """The lines where ``mask`` holds, with their index, in order.

    A boolean take copies every text column (0.4 GiB of the 1,000-GPU month's bill at 1 M lines).
    When the mask holds everywhere (every line in scope; no tax or credit line) they are the same
    lines without a copy. When it drops a few lines (the tax and credit lines among the charges),
    they are the runs of kept lines joined end to end: slices share the text columns' Arrow
    buffers, and joining them makes a chunked array without copying the text (the numbers and
    object columns are copied, 8 bytes a value)."""
    keep = np.asarray(mask, dtype=bool)
    if bool(keep.all()):
        return lines.copy(deep=False)  # copy-on-write: columns set on it are its own
    edges = np.flatnonzero(np.diff(keep.astype(np.int8), prepend=0, append=0))
    runs = list(zip(edges[0::2].tolist(), edges[1::2].tolist()))
    if not runs or len(runs) > max(1, len(keep) * RUNS_PER_LINE):
        return lines[mask]
    return pd.concat([lines.iloc[start:stop] for start, stop in runs])


def basis_amount(lines: pd.DataFrame, basis: str) -> pd.Series:
    """The cost-basis amount of every line (Decimal): its EffectiveCost, BilledCost, ListCost or
    ContractedCost (METHOD §1).

    On the list and contracted bases a commitment purchase or fee counts 0, an EC2 Capacity Block's
    fee too (:func:`prepaid`): those bases price the usage before commitments, and the covered usage
    carries its own ListCost / ContractedCost. A line
    the basis counts whose column is missing (an export without ListCost / ContractedCost, or a null
    cell) is an error naming the source file, the column and the rows, never a 0.
    """
    column = BASIS_COLUMNS[basis]
    values = lines[column]
    if basis not in PRE_COMMITMENT:
        return values
    purchase = prepaid(lines)
    missing = values.isna() & ~purchase
    if missing.any():
        raise missing_basis(lines[missing], column, basis)
    return values.where(~purchase, Decimal(0))


def prepaid(lines: pd.DataFrame) -> pd.Series:
    """Whether each line buys capacity ahead of its use: a commitment purchase, or an EC2 Capacity
    Block's fee (:func:`audit.block_ties.block_lines`)."""
    return commitment_purchases(lines) | block_lines(lines)[0]


def commitment_purchases(lines: pd.DataFrame) -> pd.Series:
    """Whether each line buys a commitment (a Purchase naming a CommitmentDiscountId: an upfront or
    recurring Savings Plan / reservation fee)."""
    return (lines["charge_category"] == "Purchase") & (lines["commitment_discount_id"].fillna("") != "")


def members_by_commitment(ids: pd.Series, wanted: set[str] | None = None) -> dict[str, list]:
    """Commitment id → the lines under it, in line order: their own id and every ``/``-prefix of it
    (Azure bills a reservation *order*, ``…/reservationOrders/O``, and its usage names the reservation
    under it); only the commitments in ``wanted`` where it is given. Worked out per distinct id, so a
    month of hourly covered lines costs one pass over the ids."""
    codes, distinct = pd.factorize(ids, use_na_sentinel=True)
    order = np.argsort(codes, kind="stable")
    starts = np.searchsorted(codes[order], np.arange(len(distinct) + 1))
    under: dict[str, list[int]] = {}
    for code, commitment in enumerate(distinct):
        if commitment == "":
            continue
        parts = commitment.split("/")
        for end in range(len(parts), 0, -1):
            prefix = "/".join(parts[:end])
            if prefix.strip("/") and (wanted is None or prefix in wanted):
                under.setdefault(prefix, []).append(code)
    labels = ids.index
    return {prefix: list(labels[np.sort(np.concatenate([order[starts[c]:starts[c + 1]] for c in codes_of]))])
            for prefix, codes_of in under.items()}


def purchase_spreads(charges: pd.DataFrame, purchases: pd.DataFrame,
                     column: str = "commitment_discount_id") -> list[tuple[list, list, list[Decimal]]]:
    """(the purchase lines of one commitment, the ``charges`` they move onto, the weights) per
    commitment whose purchase moves (audit/adjust.py spreads it; the fit does not call it unmatched).
    ``column`` names the commitment: a Capacity Block's fee and the lines that ran in it name their
    capacity reservation instead (audit/capacity_blocks.py).

    A line belongs to a commitment when its CommitmentDiscountId is the purchase's or lies under it
    (Azure bills a reservation *order*, ``…/reservationOrders/O``, and its usage names the
    reservation, ``…/reservationOrders/O/reservations/R``). Weights: the lines' EffectiveCost; where
    those are all zero (an actual-cost export, in which covered usage costs 0) their ListCost, else
    their PricingQuantity. A commitment with no such line, or none of those known on all and not all
    zero, is left out: its purchases stay charges of their own, classified by the rules. Purchases
    of one commitment (an hourly recurring fee, month-long) go together: the split is linear, so
    each line gets what splitting them one by one would give it. No purchase line is a target: a
    refund of a reservation under an order (a negative purchase) lies under the order's purchase
    but is no usage of it; it moves onto its own reservation's lines.
    """
    by_commitment: dict[str, list] = {}
    for idx, commitment in purchases[column].items():
        by_commitment.setdefault(commitment, []).append(idx)
    members = members_by_commitment(charges[column], set(by_commitment))
    buying = set(purchases.index)
    out = []
    for commitment, own in by_commitment.items():
        targets = [t for t in members.get(commitment, ()) if t not in buying]
        weights = _purchase_weights(charges.loc[targets, ["effective_cost", "list_cost", "pricing_quantity"]]) \
            if targets else None
        if weights is not None:
            out.append((own, targets, weights))
    return out


def _purchase_weights(targets: pd.DataFrame) -> list[Decimal] | None:
    """The first of EffectiveCost, ListCost, PricingQuantity that is known on every target and not
    all zero; None when there is none."""
    for column in ("effective_cost", "list_cost", "pricing_quantity"):
        values = list(targets[column])
        if all(v is not None for v in values) and dsum(values) != 0:
            return values
    return None


def missing_basis(lines: pd.DataFrame, column: str, basis: str) -> InputErrors:
    """One error per source file: the lines whose ``column`` is missing, on the basis that needs it."""
    paths = lines["source_path"] if "source_path" in lines.columns else pd.Series("billing", index=lines.index)
    errors = []
    for path, group in lines.groupby(paths.astype(str), sort=True):
        first = group.sort_values("row").head(5)
        rows = ", ".join(f"{r} ({_described(line)})" for r, line in zip(first["row"], first.itertuples()))
        rows += ", …" if len(group) > 5 else ""
        errors.append(InputError(path, f"cost_basis = {basis!r} needs {FOCUS_NAMES[column]} on every line it "
                                       f"counts; it is missing on {line_total(group)} line(s) (rows {rows})",
                                 column=FOCUS_NAMES[column],
                                 expected=f"an export with {FOCUS_NAMES[column]}, or another cost_basis"))
    return InputErrors(errors)


def _described(line) -> str:
    """A line as an error names it beside its row: its name (:func:`line_name`), its description and
    when it starts (a row of an aggregate, as a GCP export's, is no line of the file)."""
    name = line_name((str(line.service_name or ""), str(line.resource_id or ""), ""))
    described = text(str(getattr(line, "charge_description", "") or ""), 50)
    start = getattr(line, "start", None)
    when = f" from {pd.Timestamp(start):%Y-%m-%d %H:%M} UTC" if start is not None and not pd.isna(start) else ""
    return ", ".join(p for p in (name, described) if p) + when


def gpu_sku_model(line: Mapping) -> str:
    """The GPU model when the line is a per-GPU meter (GCP), else ""."""
    text = str(line.get("charge_description", ""))
    for pattern, model in gpu_skus():
        if pattern.search(text):
            return model
    return ""


def bundled_machines(resources: Sequence, machines: Sequence[str], texts: Sequence[str],
                     gpis: Sequence[int]) -> list[GpuType | None]:
    """Each line's GPU machine type where it bills the machine's GPUs with its cores, else None: the
    Core line of a GCP GPU machine (:func:`~connectors.billing.catalogue.bundling_machine`) whose GPUs
    the bill never bills apart: neither its resource nor any machine of its type has a line of its
    own billing GPU time (a GPU meter, or an instance of a GPU type). GPU-hours then come from its
    instance-hours (vCPU-hours ÷ the machine's vCPUs) × the machine's GPUs (METHOD §2). A machine
    whose GPUs have their own meter line in some hours bills them apart: in an hour its meter line
    misses, its Core line is no GPU time (before, it was read as the machine's GPUs there, which a
    FOCUS copy of the bill, naming no machine type, did not: the two disagreed on the GPU-hours)."""
    meters: dict[str, bool] = {}
    metered: set = set()  # the resources, and the machine types, a line of which bills GPU time
    machine_of: dict[tuple, GpuType | None] = {}
    found: list[GpuType | None] = []
    for resource, machine, described, gpi in zip(resources, machines, texts, gpis):
        if described not in meters:
            meters[described] = bool(gpu_sku_model({"charge_description": described}))
        if gpi or meters[described]:
            metered.update(((0, resource), (1, machine)) if machine else ((0, resource),))
        if (machine, described) not in machine_of:
            machine_of[(machine, described)] = None if meters[described] else bundling_machine(machine, described)
        found.append(None if gpi else machine_of[(machine, described)])
    return [kind if kind is not None and (0, resource) not in metered and (1, machine) not in metered else None
            for kind, resource, machine in zip(found, resources, machines)]


def as_machine(kind: GpuType, pricing_quantity, consumed_quantity) -> tuple[int, Decimal | None, Decimal | None]:
    """A Core line that bills its machine's GPUs (:func:`bundled_machines`) as an instance line of that
    machine: (GPUs per instance, its quantities ÷ the machine's vCPUs: instance-hours)."""
    priced, consumed = (None if q is None else Decimal(q) / kind.vcpus for q in (pricing_quantity, consumed_quantity))
    return kind.gpus, priced, consumed


def gpu_hours_of(line: Mapping) -> Decimal:
    """GPU-hours a gpu_compute line bills: GPU meter quantity, or instance-hours × GPUs."""
    quantity = line.get("pricing_quantity") or line.get("consumed_quantity") or Decimal(0)
    if line.get("gpus_per_instance"):
        return quantity * line["gpus_per_instance"]
    if gpu_sku_model(line):
        return quantity
    return Decimal(0)


#: how an adjustment is scoped, narrowest first (METHOD §2): the same rule for tax and credits
SCOPE_RULE = ("tax and credits are netted into the narrowest charges each line names: its resource "
              "(its SKU during its charge period, else the charges its period holds, else those overlapping "
              "its period, else all the resource's charges), "
              "else its service in its sub-account (its SKU during its charge period, else its SKU, else the "
              "service's charges), else its account (a credit: the account's usage), pro rata to cost")


#: what became of the in-scope lines no class counts, by ChargeCategory
FOLDED_WORDS = {
    "Tax": "spread into the tax of the classes whose charges they tax (unattributed where none)",
    "Purchase": "commitment purchases and fees, their amount moved onto the lines of their commitment (its "
                "commitment column) or, on the list and contracted bases, no part of the basis",
}
CREDIT_WORDS = "netted into the credits of the classes whose charges they apply to (unattributed where none)"


def unclassed_note(lines: pd.DataFrame, charges: pd.DataFrame) -> str | None:
    """The in-scope ``lines`` that are in no class's line count (not among the ``charges``), counted by
    ChargeCategory (and the provider's line type, CUR's ``x_LineItemType``) with what became of them:
    so that the classes' lines, these and the lines outside the scope add up to the lines read. None
    when every line is in a class."""
    # as object: pandas' isin of Arrow strings hashes ten times slower (3 s at fleet scale)
    classed = lines["line_id"].astype(object).isin(charges["line_id"].astype(object)).to_numpy(dtype=bool)
    folded = lines.loc[~classed,
                       [c for c in ("charge_category", "extra", "line_count") if c in lines.columns]]
    if folded.empty:
        return None
    grouped = folded.assign(extra=folded["extra"].fillna("") if "extra" in folded.columns else "",
                            line_count=folded["line_count"] if "line_count" in folded.columns else 1)
    counts: dict[tuple[str, str], int] = {}
    for (category, extra), count in grouped.groupby(["charge_category", "extra"], sort=False)["line_count"].sum().items():
        kind = (category, str(json_object(extra).get("x_LineItemType", "")))  # each distinct extra parsed once
        counts[kind] = counts.get(kind, 0) + int(count)
    parts = [f"{n:,} {category}{f' ({kind})' if kind else ''}: "
             f"{FOLDED_WORDS.get(category, CREDIT_WORDS)}" for (category, kind), n in sorted(counts.items())]
    return (f"{sum(counts.values()):,} in-scope line(s) are in no class's line count "
            f"(classes[].lines + these + outside_scope.lines = the lines read): {'; '.join(parts)}")


def adjusted(lines: pd.DataFrame) -> bool:
    """Whether any of ``lines`` is tax, a credit, a refund or an adjustment (spread by :data:`SCOPE_RULE`)."""
    return bool(lines["charge_category"].isin(ADJUSTING_CATEGORIES).any())


def listed(named: list[tuple[tuple[str, str, str], Decimal, int]], count: int) -> str:
    """The first ``count`` of :func:`named_amounts`: "name amount (n lines)", then how many more."""
    out = "; ".join(f"{line_name(key)} {cents(a)} ({n} line{'s' if n != 1 else ''})" for key, a, n in named[:count])
    return out + (f"; … {len(named) - count} more" if len(named) > count else "")


def line_name(key: tuple[str, str, str]) -> str:
    """A line's name in a message: "service: resource", else the service, else the description."""
    service, resource, described = key
    if service and resource:
        return f"{text(service, 40)}: {text(resource, 40)}"
    return text(service or resource or described, 50) or "(no service, resource or description)"


#: the columns :func:`named_amounts` names a line by
NAME_COLUMNS = ("service_name", "resource_id", "charge_description")


def named_amounts(lines: pd.DataFrame, amounts) -> list[tuple[tuple[str, str, str], Decimal, int]]:
    """(name key, amount, lines) per distinct (service, resource, description where neither is
    given), largest amount first; :func:`line_name` writes a key (only those shown are written)."""
    service = lines["service_name"].fillna("").astype(str).tolist()
    resource = lines["resource_id"].fillna("").astype(str).tolist()
    described = (lines["charge_description"].fillna("").astype(str).tolist() if "charge_description" in lines.columns
                 else [""] * len(service))
    counts = lines["line_count"].tolist() if "line_count" in lines.columns else [1] * len(service)
    sums: dict[tuple[str, str, str], list] = {}
    for s, r, d, amount, n in zip(service, resource, described, amounts, counts):
        key = (s, r, "" if s or r else d)
        entry = sums.get(key)
        if entry is None:
            entry = sums[key] = [ZERO, 0]
        entry[0] += ZERO if amount is None else amount
        entry[1] += int(n)
    return sorted(((k, a, n) for k, (a, n) in sums.items()), key=lambda x: (-abs(x[1]), x[0]))
