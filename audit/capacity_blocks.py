"""EC2 Capacity Blocks for ML: the upfront fee that pays for a block's GPU instance-hours, and the lines
of the instances that ran in it (METHOD §2: the fee is gpu_compute of those instances).

What AWS writes, as far as public sources show it:

* the fee is one charge per block, paid up front when the block is bought (AWS EC2 User Guide,
  "Capacity Blocks pricing and billing" and "Extend Capacity Blocks": the price is charged up front,
  the operating system by the hour while instances run), under the usage type
  ``<region>-CapacityBlockFee:<instance type>`` (``USE2-CapacityBlockFee:p5.48xlarge``; us-east-1 may
  go without the prefix), booked once and not amortised by AWS (Cost Explorer record type ``Upfront``,
  a cancelled block's money back as ``Refund``): grafana/cloudcost-exporter,
  ``pkg/aws/client/billing.go`` ``getCapacityBlockCosts``. That the CUR line is a ``Fee`` (FOCUS
  ChargeCategory Purchase) whose resource is the block's capacity reservation (``cr-…``) is not in
  those sources but assumed (how a reservation's upfront fee is billed): the class does not depend on
  it (the usage type decides), the tie does (the fee's CapacityReservationId, else its resource);
* the lines of an instance that ran in a capacity reservation name it in CUR 2.0's
  ``capacity_reservation_capacity_reservation_arn`` (AWS Data Exports, "Capacity reservation
  columns": set when a charge is related to a capacity reservation; exported only with "include
  capacity reservation data") and in FOCUS 1.1+'s CapacityReservationId (an id or an ARN).

The fee moves onto the lines that name its reservation as a commitment purchase moves onto the lines
of its commitment (:func:`audit.lines.purchase_spreads`), so the GPU split prices the block's
instance-hours at what the block cost (and audit/prices.py prices them bottom-up at that spread).
Only the share of the fee the instances ran moves: the block's instance-hours are its fee lines'
PricingQuantity (24 for one instance's day; the fee's usage amount, as the tests read it), those run
in it its instances' lines' PricingQuantity, and fee × run ÷ reserved moves onto them. The rest,
reserved hours no instance ran, is paid-but-idle capacity, never model compute (METHOD §2 "unused
reserved capacity", §4): the fee line keeps it (the reader has clipped off the fee's share for hours
run outside W, or not in the data after W, so its PricingQuantity is the hours reserved for W:
connectors/billing/block_window.py), classed ``commitment_unused`` with a reason naming the
reservation and its hours (:func:`idle_reason`). A fee without a quantity, or whose instances ran as
many hours as it reserved or more (a block of several instances whose fee counts block hours, not
instance-hours), moves whole: no idle share is read where the bill does not show one. A
fee whose reservation no other line names stays a charge of its own, gpu_compute by the shipped rule
with the GPUs of the instance type its usage type names, its resource the reservation: the split
leaves it unattributed (GPU not in telemetry) and the fit names it with the nodes that carry its GPU
model (``gpu_resource_not_in_telemetry``), never ``unmatched``.
"""
from __future__ import annotations

from decimal import Decimal
from typing import NamedTuple

import pandas as pd

from audit.block_ties import block_ties
from audit.lines import purchase_spreads
from audit.money import ZERO, dsum, plain


class Block(NamedTuple):
    """A Capacity Block whose fee moves onto the lines that ran in its reservation."""
    reservation: str  #: the capacity reservation (``cr-…``)
    own: list  #: its fee lines
    targets: list  #: the lines that ran in it
    weights: list  #: how its moved share splits over ``targets`` (:func:`audit.lines.purchase_spreads`)
    reserved: Decimal | None  #: instance-hours its fee lines bought (PricingQuantity); None where one lacks it
    ran: Decimal  #: instance-hours its instances' lines ran in it (PricingQuantity)

    def idle(self) -> Decimal:
        """The reserved instance-hours no instance ran; 0 where that is not known (no quantity)."""
        return max(self.reserved - self.ran, ZERO) if self.reserved else ZERO


def has_block_fee(lines: pd.DataFrame, among) -> bool:
    """Whether some line ``among`` (a mask) is a Capacity Block's fee: a fee is told by its own line,
    so this reads the lines where they are, and only a bill with a fee needs them taken."""
    return bool((block_ties(lines)[0] & among).any())


def block_spreads(charges: pd.DataFrame) -> list[Block]:
    """The Capacity Blocks among ``charges`` whose fee moves onto their instances' lines
    (:func:`audit.lines.purchase_spreads`, as a commitment purchase onto its commitment's lines), with
    the hours each reserved and ran."""
    fee, reservation = block_ties(charges)
    if not fee.any():
        return []
    keyed = charges.assign(capacity_reservation=reservation)
    quantity = charges["pricing_quantity"]
    return [Block(reservation[own[0]], own, targets, weights,
                  None if any(quantity[i] is None for i in own) else dsum(quantity[i] for i in own),
                  dsum(q for q in quantity[targets] if q is not None))
            for own, targets, weights in purchase_spreads(keyed, keyed[fee], "capacity_reservation")]


def idle_reason(block: Block) -> str:
    """The reason of a fee line that keeps its block's idle share: the reservation and its hours."""
    reserved, ran, idle = (plain(h.normalize()) for h in (block.reserved or ZERO, block.ran, block.idle()))
    return (f"an EC2 Capacity Block paid but not run (unused reserved capacity): reservation {block.reservation}, "
            f"{reserved} instance-hours reserved (its fee's PricingQuantity), {ran} run in it (its instances' "
            f"lines), {idle} idle")


def moved_fees(charges: pd.DataFrame) -> list:
    """The Capacity Block fee lines among ``charges`` whose money moves onto their instances' lines:
    no GPU resource of their own (the fit does not look for their reservation in telemetry)."""
    return [i for block in block_spreads(charges) for i in block.own]
