"""Billing sources that bill the same charges over the same hours, and telemetry sources that report
the same GPUs in the same intervals (rule 5: no silent misfit).

Two sources with the same bytes are refused when they are read (audit/collect.py). Two that overlap
are not the same file: a month-to-date export beside the month's, an export of 1–20 September beside
one of the whole month, a copy of part of a bill. Each shared charge would be counted twice, and the
total, every bucket and every unit cost with it would be overstated without a word.

Lines are compared by charge: account, sub-account, provider, charge category, description, SKU,
resource and region; where one of the two sources names no resource on any line (a GCP standard
export beside the detailed export of the same bill), without the resource. The readers sum the lines
the audit does not tell apart, so one export's lines need not match the other's one for one;
instead, for each charge, the span one source bills it over (its first start to its last end) is set
against each line of the other source that bills the same charge. A line inside that span bills
hours the first source bills already. Lines that cost nothing on either basis move no money and are
left out. Exports that split a bill legitimately (by account, or by period) share no charge over the
same hours.

One bill in two formats (a FOCUS export beside the provider's own) spells its charges apart: the
subscription as ARM path or GUID, other descriptions and SKU ids. So the sources are also compared per
account, resource and UTC day (as :func:`audit.lines.account_key` and ``resource_key`` spell them):
the same effective cost to the cent in both is the same charge billed twice.
"""
from __future__ import annotations

import pandas as pd

from audit.lines import account_key, resource_key
from audit.money import cents
from connectors.errors import InputError
from schemas.billing import line_total

#: what makes two billing lines bill the same charge (columns of schemas.billing.BillingLine)
CHARGE = ("provider", "billing_account_id", "sub_account_id", "charge_category", "charge_description", "sku_id",
          "resource_id", "region")
#: the same without the resource: the key between a source that names resources and one that names none
BARE = tuple(c for c in CHARGE if c != "resource_id")


def overlap_errors(frames: list[tuple[str, str, pd.DataFrame]], currency: str) -> list[InputError]:
    """One error per pair of billing sources (name, where, lines) that bill a charge over the same hours."""
    if len(frames) < 2:
        return []
    keyed = {name: _keyed(lines) for name, _, lines in frames}
    named = {name: _names_resources(lines) for name, _, lines in frames}
    days = {name: _resource_days(lines) for name, _, lines in frames}
    errors = []
    for i, (first, _, _) in enumerate(frames):
        for second, where, _ in frames[i + 1:]:
            unnamed = [name for name in (first, second) if not named[name]]
            key = "_bare" if unnamed else "_charge"
            inside = _inside(keyed[second], _spans(keyed[first], key), key)
            same = _same_costs(days[first], days[second])
            if len(same) and (not len(inside) or same["cost"].sum() > sum(inside["effective_cost"], start=0)):
                errors.append(_same_costs_error(first, second, where, same, currency))
            elif len(inside):
                errors.append(_error(first, second, where, inside, keyed[first], currency, key, unnamed))
    return errors


def _resource_days(lines: pd.DataFrame) -> pd.DataFrame:
    """Effective cost per (account, resource, UTC day) of the lines that name a resource, to the cent,
    the account and resource as :func:`audit.lines.account_key` and :func:`resource_key` spell them
    (an Azure subscription by GUID or ARM path, an ARM id in any case): keys every format of one
    bill shares, where descriptions and SKU ids differ between a FOCUS export and the provider's own."""
    if not len(lines) or "resource_id" not in lines.columns:
        return pd.DataFrame({"account": [], "resource": [], "day": [], "cost": []})
    kept = lines[_has_resource(lines)]
    sub = kept["sub_account_id"].fillna("").astype(str)
    account = sub.where(sub != "", kept["billing_account_id"].fillna("").astype(str))
    frame = pd.DataFrame({"account": account.map(account_key), "resource": kept["resource_id"].astype(str).map(resource_key),
                          "day": pd.to_datetime(kept["start"], utc=True).dt.floor("D"), "cost": kept["effective_cost"]})
    summed = frame.groupby(["account", "resource", "day"], sort=False)["cost"].sum().reset_index()
    summed["cost"] = summed["cost"].map(cents)
    return summed[summed["cost"] != 0]


def _same_costs(first: pd.DataFrame, second: pd.DataFrame) -> pd.DataFrame:
    """The resource-days both sources bill, for the same cost to the cent."""
    joined = second.merge(first, on=["account", "resource", "day"], suffixes=("", "_first"))
    return joined[joined["cost"] == joined["cost_first"]]


def _same_costs_error(first: str, second: str, where: str, same: pd.DataFrame, currency: str) -> InputError:
    example = same.iloc[0]
    span = f"{same['day'].min():%Y-%m-%d} – {same['day'].max():%Y-%m-%d}"
    return InputError(where, f"billing sources {first!r} and {second!r} bill the same resources for the same cost on the "
                      f"same days: {len(same):,} resource-day(s), {same['cost'].sum():,.2f} {currency} effective, {span} "
                      f"(the first: {example['resource']} on {example['day']:%Y-%m-%d}, {example['cost']:,.2f} in both); "
                      "the same bill in two exports (a FOCUS export beside the provider's own) would be counted twice "
                      "and overstate the invoice",
                      expected="each charge and hour in one billing source (drop one of the two exports)")


def _names_resources(lines: pd.DataFrame) -> bool:
    """Whether any line of a source names its resource."""
    return "resource_id" in lines.columns and bool(_has_resource(lines).any())


def _has_resource(lines: pd.DataFrame) -> pd.Series:
    """Which lines name their resource."""
    return lines["resource_id"].fillna("").astype(str).str.strip() != ""


def _hashes(table: pd.DataFrame, key: tuple[str, ...]):
    """The 64-bit hash of each row's ``key`` columns (those the table has), as text."""
    return pd.util.hash_pandas_object(table[[c for c in key if c in table.columns]].astype(str), index=False).to_numpy()


def _keyed(lines: pd.DataFrame) -> pd.DataFrame:
    """The lines that cost something, with their charge's 64-bit hash as ``_charge`` and the hash
    of the charge without its resource as ``_bare`` (and the invoice lines each row stands for, to count them)."""
    costs = ~((lines["billed_cost"] == 0) & (lines["effective_cost"] == 0)).to_numpy()
    kept = lines[costs]
    hashes = {name: _hashes(kept, key) for name, key in (("_charge", CHARGE), ("_bare", BARE))}
    counted = {"line_count": kept["line_count"].to_numpy()} if "line_count" in kept.columns else {}
    return pd.DataFrame({**hashes, "start": kept["start"].to_numpy(), "end": kept["end"].to_numpy(),
                         "line_id": kept["line_id"].to_numpy(), "effective_cost": kept["effective_cost"].to_numpy(),
                         **counted})


def _spans(keyed: pd.DataFrame, key: str) -> pd.DataFrame:
    """Per charge (hash column ``key``), the first start and the last end a source bills it over."""
    return keyed.groupby(key, sort=False).agg(_from=("start", "min"), _to=("end", "max")).reset_index()


def _inside(keyed: pd.DataFrame, spans: pd.DataFrame, key: str) -> pd.DataFrame:
    """The lines of ``keyed`` whose period meets the span another source bills their charge over."""
    joined = keyed.merge(spans, on=key, how="inner")
    return joined[(joined["start"] < joined["_to"]) & (joined["end"] > joined["_from"])]


def _error(first: str, second: str, where: str, inside: pd.DataFrame, first_lines: pd.DataFrame,
           currency: str, key: str, unnamed: list[str]) -> InputError:
    """The error naming both sources, the lines billed twice, their cost and hours, and one pair."""
    amount = sum(inside["effective_cost"], start=0)
    example = inside.iloc[0]
    same = first_lines[(first_lines[key] == example[key]) & (first_lines["start"] < example["end"])
                       & (first_lines["end"] > example["start"])]
    twin = same["line_id"].iloc[0] if len(same) else "a line"
    span = f"{inside['start'].min():%Y-%m-%d %H:%M} – {inside['end'].max():%Y-%m-%d %H:%M} UTC"
    return InputError(where, f"billing sources {first!r} and {second!r} bill the same charges over the same hours: "
                      f"{line_total(inside):,} line(s) of {second!r} ({amount:,.2f} {currency} effective, {span}) fall in "
                      f"periods {first!r} bills for the same {_compared(unnamed)} (the first: "
                      f"{example['line_id']}, beside {twin}); an overlapping export would count them twice and "
                      "overstate the invoice",
                      expected="each charge and hour in one billing source (drop or trim the overlapping export)")


def _compared(unnamed: list[str]) -> str:
    """What the lines were compared by, for the error: ``unnamed`` are the sources naming no resource."""
    if not unnamed:
        return "account, resource and charge"
    return f"account and charge ({' and '.join(map(repr, unnamed))} name{'s' if len(unnamed) == 1 else ''} no resource)"


# ---- telemetry ----------------------------------------------------------------------------------

#: what makes two activity rows report one GPU unit in one interval (columns of the gpu_activity table)
GPU_INTERVAL = ("node", "gpu", "uuid", "ts")
#: what makes two traffic rows of a serving server's counters count one pod's requests in one interval
POD_INTERVAL = ("family", "namespace", "pod", "model_name", "ts")


def telemetry_overlap_errors(frames: list[tuple[str, str, pd.DataFrame]]) -> list[InputError]:
    """One error per pair of telemetry sources (name, where, gpu_activity) that both report the
    activity of a GPU in the same interval: a second export of the same series (the same file as
    text and gzipped, two Prometheus replicas, an export of part of the month beside the month's).
    Read together, each GPU would look time-sliced between its pod and itself, and the requests its
    pods' counters count would be counted twice (the sources of one counter are added)."""
    return _shared_errors(frames, GPU_INTERVAL, _activity_error)


def counter_overlap_errors(frames: list[tuple[str, str, pd.DataFrame]]) -> list[InputError]:
    """One error per pair of telemetry sources (name, where, traffic) whose serving-server counters
    (vLLM, Triton, TGI: rows with a ``family``) count the same pod in the same interval. The sources
    of one counter are added (they count different pods or periods), so a repeated series would
    count its requests twice. Request logs name no pod and are not compared: two load balancers'
    logs of one service count different requests."""
    counted = [(name, where, traffic[traffic["family"].fillna("") != ""] if "family" in traffic else traffic.iloc[:0])
               for name, where, traffic in frames]
    return _shared_errors(counted, POD_INTERVAL, _counter_error)


def _shared_errors(frames: list[tuple[str, str, pd.DataFrame]], key: tuple[str, ...], error) -> list[InputError]:
    """One ``error(first, second, where, rows)`` per pair of sources whose rows share a ``key``."""
    keyed = [(name, where, _keyed_rows(table, key)) for name, where, table in frames if len(table)]
    errors = []
    for i, (first, _, mine) in enumerate(keyed):
        for second, where, theirs in keyed[i + 1:]:
            shared = theirs[theirs["_unit"].isin(set(mine["_unit"]))]
            if len(shared):
                errors.append(error(first, second, where, shared))
    return errors


def _keyed_rows(table: pd.DataFrame, key: tuple[str, ...]) -> pd.DataFrame:
    """Each row's ``key`` columns and their 64-bit hash ``_unit``, once per distinct key."""
    present = [c for c in key if c in table.columns]
    return table[present].assign(_unit=_hashes(table, key)).drop_duplicates("_unit")


def _span(rows: pd.DataFrame) -> str:
    return f"{rows['ts'].min():%Y-%m-%d %H:%M} – {rows['ts'].max():%Y-%m-%d %H:%M} UTC"


def _counter_error(first: str, second: str, where: str, shared: pd.DataFrame) -> InputError:
    example = shared.iloc[0]
    return InputError(where, f"telemetry sources {first!r} and {second!r} both count the requests of the same pods in "
                      f"the same intervals: {len(shared):,} pod-interval(s) of {example['family']} counters, "
                      f"{_span(shared)} (the first: pod {example['pod']} at {example['ts']:%Y-%m-%d %H:%M} UTC); "
                      "the sources of one counter are added, so these requests would be counted twice",
                      expected="each pod's counters in one telemetry source (drop the second export, or give each "
                               "source its own pods or period)")


def _activity_error(first: str, second: str, where: str, shared: pd.DataFrame) -> InputError:
    example = shared.iloc[0]
    return InputError(where, f"telemetry sources {first!r} and {second!r} both report the activity of the same GPUs in "
                      f"the same intervals: {len(shared):,} GPU-interval(s), {_span(shared)} (the first: GPU {example['gpu']} "
                      f"of node {example['node']} at {example['ts']:%Y-%m-%d %H:%M} UTC); read together, each GPU would "
                      "look time-sliced between its pod and itself, and the requests its pods' counters count would be "
                      "counted twice",
                      expected="each GPU's activity in one telemetry source (drop the second export, or give each "
                               "source its own nodes or period)")
