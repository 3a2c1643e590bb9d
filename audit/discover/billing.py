"""What the billing sources ``costaudit init --from`` was given say: currencies, accounts, GPU resources.

Every line is classified by the shipped rules (and the rules of a case given to ``--from``), as
the audit classifies them, by the telemetry's nodes too (the pipeline's node map: a GPU machine's
vCPU and RAM lines are ``gpu_compute`` where telemetry sees GPUs on it, though a FOCUS bill names
no machine type), so that "GPU spend" here means what the audit will call ``gpu_compute`` (before:
cloudgen GKE 10206's FOCUS bill, "GPU 3,815.64", its GPU meters alone, where the audit's
gpu_compute and the native export's both are 4,414.78). Amounts are on the case's cost basis
(EffectiveCost by default), summed as Decimal. The spends compared with one another (an account's GPU lines and its charges, the
instances without GPUs and their tags) are of charges before credits and tax: a credit or tax line
is in an account's ``total`` only, so that a share never sets a gross part against a net whole (before:
cloudgen EKS 9621 with adjustments, "GPU 2,893.75 of 2,480.49", the GPU lines before their credits
against the account after its credits and tax, and the GPU instances' credits counted as spend on
instances without GPUs).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Iterable, Mapping

from audit.case import Rule
from audit.collected import Collected
from audit.discover.read import Read
from audit.lines import (
    ADJUSTING_CATEGORIES,
    as_machine,
    basis_amount,
    gpu_hours_of,
    line_tags,
    names_machine,
    resource_key,
)
from connectors.billing.focus_lines import currency_assumed

ZERO = Decimal(0)
#: tag keys the provider writes itself (AWS's aws:createdBy, aws:autoscaling:groupName; a CUR's
#: resource_tags_aws_* columns): who launched a machine, not which workload it serves
PROVIDER_TAGS = ("aws:", "aws_")


@dataclass
class Account:
    """One billing account (its SubAccountId, else its BillingAccountId) and its spend: ``total`` after
    credits and tax, ``charges`` before them (as ``gpu``, the GPU lines' spend, is)."""

    id: str
    name: str = ""
    total: Decimal = ZERO
    charges: Decimal = ZERO
    gpu: Decimal = ZERO
    gpu_hours: Decimal = ZERO


@dataclass
class GpuResource:
    """One billed GPU machine (or scale set): what the lines that bill it carry."""

    key: str                  # audit.lines.resource_key of its ResourceId
    resource_id: str
    resource_name: str = ""
    instance_type: str = ""
    gpu_model: str = ""
    gpus: int = 0
    gpu_hours: Decimal = ZERO
    cost: Decimal = ZERO
    account: str = ""


@dataclass
class Billing:
    """The billing sources together."""

    lines: int = 0
    currencies: dict[str, int] = field(default_factory=dict)
    accounts: dict[str, Account] = field(default_factory=dict)
    resources: dict[str, GpuResource] = field(default_factory=dict)
    gpu_lines_without_resource: int = 0
    gpu_total: Decimal = ZERO
    total: Decimal = ZERO
    #: (account, tag key, value) -> the spend of the instance lines without GPUs that carry it: what a
    #: request log's CPU service can claim (docs/case.md: a service with claims and no matcher)
    instance_tags: dict[tuple[str, str, str], Decimal] = field(default_factory=dict)
    #: account -> the spend of its instance lines without GPUs
    instances: dict[str, Decimal] = field(default_factory=dict)
    #: (tag key, value) -> the spend of the GPU lines and the lines of no instance that carry it: a
    #: claim of that tag would take them too (a cluster's tag on its GPU nodes and control plane)
    shared_tags: dict[tuple[str, str], Decimal] = field(default_factory=dict)
    #: source name -> what its reader said of a file that names no currency ("no BillingCurrency
    #: column"): its lines' currency is the one the reader was told, so it names none here
    unnamed: dict[str, str] = field(default_factory=dict)


def billing_facts(reads: list[Read], rules: Iterable[Rule] = (), basis: str = "effective",
                  declared: Mapping[str, str] | None = None) -> Billing:
    """Classify every billing line, as the pipeline does by the telemetry's nodes and the case's
    ``[nodes]`` (``declared``), and sum what the proposals rest on."""
    from audit.billing_summary import bundled_lines
    from audit.classify import classify  # the audit's own classification (imports pandas)
    from audit.normalise import collected_node_map

    telemetry = Collected(tuple(r.frame for r in reads if r.source.kind == "telemetry" and r.frame is not None))
    out = Billing()
    for read in reads:
        if read.source.kind != "billing" or read.frame is None or "lines" not in read.tables:
            continue
        nodes = collected_node_map(telemetry, declared or {}, read.tables["lines"])
        lines = classify(read.tables["lines"], tuple(rules), nodes.cluster, nodes.with_gpus)
        records = lines.to_dict("records")
        said = currency_assumed(read.tables.get("notes"))
        if said:
            out.unnamed[read.name] = said[0].split(":")[0]
        for line, amount, kind in zip(records, basis_amount(lines, basis), bundled_lines(records)):
            _add(out, _as_machine(line, kind) if kind is not None else line, amount, named=not said)
    return out


def _as_machine(line: dict, kind) -> dict:
    """A GCP Core line that bills its machine's GPUs (no GPU meter of the resource bills them) as an
    instance line of that machine, as the audit and `costaudit billing` count it (audit/lines.py
    ``as_machine``: before, its vCPU-hours were read as GPU-hours and the machine had no GPU)."""
    gpus, priced, consumed = as_machine(kind, line["pricing_quantity"], line["consumed_quantity"])
    return {**line, "gpus_per_instance": gpus, "pricing_quantity": priced, "consumed_quantity": consumed,
            "gpu_model": line.get("gpu_model") or kind.gpu_model,
            "instance_type": line.get("instance_type") or line.get("machine_type") or ""}


def _add(out: Billing, line: dict, amount: Decimal, named: bool = True) -> None:
    """Count one line; its currency only where its file ``named`` one (not the reader's assumption)."""
    count = int(line.get("line_count") or 1)
    out.lines += count
    currency = str(line.get("currency") or "")
    if currency and named:
        out.currencies[currency] = out.currencies.get(currency, 0) + count
    account_id = str(line.get("sub_account_id") or line.get("billing_account_id") or "")
    name = str(line.get("sub_account_name") or line.get("billing_account_name") or "")
    account = out.accounts.setdefault(account_id, Account(account_id, name))
    account.total += amount
    out.total += amount
    if line["charge_category"] in ADJUSTING_CATEGORIES:
        return  # a credit or tax: in the totals after them only (module docstring)
    account.charges += amount
    if line["resource_class"] != "gpu_compute" and bills_machine(line):
        _add_instance(out, line, amount, account_id)
        return
    for tag in _tags(line):
        out.shared_tags[tag] = out.shared_tags.get(tag, ZERO) + amount
    if line["resource_class"] != "gpu_compute":
        return
    hours = gpu_hours_of(line)
    account.gpu += amount
    account.gpu_hours += hours
    out.gpu_total += amount
    raw = str(line.get("resource_id") or "")
    if not raw:
        out.gpu_lines_without_resource += count
        return
    key = resource_key(raw)
    found = out.resources.setdefault(key, GpuResource(key, raw, account=account_id))
    found.resource_name = found.resource_name or str(line.get("resource_name") or "")
    found.instance_type = found.instance_type or str(line.get("instance_type") or "")
    found.gpu_model = found.gpu_model or str(line.get("gpu_model") or "")
    found.gpus = max(found.gpus, int(line.get("gpus_per_instance") or 0))
    found.gpu_hours += hours
    found.cost += amount


def bills_machine(line: dict) -> bool:
    """Whether a line is an instance line: where its ResourceId's form tells whether it names a machine
    (:func:`audit.lines.names_machine`: a GCP instance's Core and Ram lines, which name no instance
    type; an Azure VM's or scale set's lines, not a NAT gateway's or a reservation's, whose meter names
    read as instance types too), a machine's hours (not its bandwidth); else a line that names an
    instance or machine type (before: the instance type only, so a GKE node pool billed in parts had
    no instance line, and an AKS CPU tier's share was "19.78 of 106.67", every Azure meter of the
    scope counted)."""
    from audit.classify import is_hourly_usage

    said = names_machine(str(line.get("resource_id") or ""))
    if said is None:
        return bool(line.get("instance_type") or line.get("machine_type"))
    return said and is_hourly_usage(line)


def _add_instance(out: Billing, line: dict, amount: Decimal, account: str) -> None:
    """Count a line of an instance without GPUs (:func:`bills_machine`) by its account and the tags
    it carries."""
    out.instances[account] = out.instances.get(account, ZERO) + amount
    for key, value in _tags(line):
        out.instance_tags[(account, key, value)] = out.instance_tags.get((account, key, value), ZERO) + amount


def _tags(line: dict) -> list[tuple[str, str]]:
    """The (key, value) tags a line carries, the provider's own (:data:`PROVIDER_TAGS`) aside."""
    return [(str(k), str(v)) for k, v in line_tags(line.get("tags"), line.get("allocated_tags")).items()
            if str(v) and not str(k).startswith(PROVIDER_TAGS)]


def scoped_instances(billing: Billing, accounts: Iterable[str]) -> tuple[dict[tuple[str, str], Decimal], Decimal]:
    """(tag -> spend of the instance lines without GPUs carrying it, their spend together) in the
    accounts of the proposed scope (every account where none is proposed)."""
    keep = set(accounts) or set(billing.instances)
    tags: dict[tuple[str, str], Decimal] = {}
    for (account, key, value), amount in billing.instance_tags.items():
        if account in keep:
            tags[(key, value)] = tags.get((key, value), ZERO) + amount
    return tags, sum((a for k, a in billing.instances.items() if k in keep), ZERO)


def gpu_accounts(billing: Billing) -> tuple[list[Account], list[Account]]:
    """(accounts with GPU spend, the others), each by spend, largest first."""
    ordered = sorted(billing.accounts.values(), key=lambda a: (-a.gpu, -a.total, a.id))
    return [a for a in ordered if a.gpu != 0], [a for a in ordered if a.gpu == 0]


def by_type(resources: Iterable[GpuResource]) -> dict[str, list[GpuResource]]:
    """GPU resources by instance type ("" where the lines name none)."""
    out: dict[str, list[GpuResource]] = defaultdict(list)
    for r in resources:
        out[r.instance_type].append(r)
    return dict(out)
