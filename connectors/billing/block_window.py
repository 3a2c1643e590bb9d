"""An EC2 Capacity Block's fee clipped to the hours of the block that are the window's.

A Capacity Block is paid up front, on one Fee line in the hour it is bought (audit/capacity_blocks.py
says what AWS writes), for instance-hours that may run after the window W. METHOD §1 clips billing to
W: the part of the fee that pays for hours run outside W is money for time outside W, as the part of
a straddling line outside W is (:mod:`connectors.billing.clip`). The reader sees the whole file, so it
counts, per reservation named by a fee in W, the instance-hours its lines ran outside W (the lines
naming it in CapacityReservationId; a line straddling an edge of W for its part outside, pro rata by
time) and scales every amount of the fee line by (reserved − run outside) ÷ reserved: the audit then
reads the fee's own PricingQuantity as the hours reserved for W, and calls idle only what no line ran
anywhere. Where the file holds no line after W and the block may reach past it, the hours after W are
not in the data: the fee for the reserved hours not run in W is left out as for time after W, never
read as idle. One note per reservation names the hours and the money left out.
"""
from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pandas as pd

from connectors.billing.clip import CLIPPED, share, utc
from connectors.billing.focus_load import Columns
from connectors.duck import quote_text, utc_text

#: a Capacity Block's usage type (``USE2-CapacityBlockFee:p5.48xlarge``, ``USE1-CapacityBlock:…``)
BLOCK_USAGE = r"(?i)(^|-)capacityblock(fee)?:"
RESERVATION = r"(?i)cr-[0-9a-z]+"


def extra_sql(columns: Columns, key: str) -> str:
    """SQL: view ``n``'s column of the extra header ``key`` (any case), NULL where the file lacks it."""
    found = [f"e{i}" for i, name in enumerate(columns.extras) if name.lower() == key]
    return found[0] if found else "NULL::VARCHAR"


def blocks_to_window(con, columns: Columns, lines: pd.DataFrame, window: tuple[datetime, datetime],
                     name: str) -> tuple[pd.DataFrame, list]:
    """``lines`` with their Capacity Block fees clipped to W (:func:`clip_block_fees`) and the notes;
    a file with no Capacity Block purchase is looked at once, for one (the purchases only)."""
    usage = extra_sql(columns, "x_usagetype")
    if not con.execute(f"SELECT EXISTS (SELECT 1 FROM n WHERE ChargeCategory = 'Purchase' "
                       f"AND {usage} ILIKE '%capacityblock%')").fetchall()[0][0]:
        return lines, []
    data_end = con.execute("SELECT max(_pe) FROM n").fetchall()[0][0]
    return clip_block_fees(lines, block_hours(con, columns, window, name), data_end, window[1])


def block_hours(con, columns: Columns, window: tuple[datetime, datetime], name: str) -> pd.DataFrame:
    """Per line that ran in a reservation a Capacity Block fee in W buys, in W or not: the
    reservation, its PricingQuantity (exact text), its period start, the microseconds of its period
    outside W and in all, its ``file:row``; plus the fee rows (``fee`` true, the period in W) with the
    same columns."""
    lo, hi = (f"CAST({quote_text(utc_text(moment))} AS TIMESTAMPTZ)" for moment in window)
    reservation = extra_sql(columns, "capacityreservationid")
    usage = extra_sql(columns, "x_usagetype")
    return con.sql(f"""WITH t AS (SELECT rn, _ps, _pe, trim(PricingQuantity) AS quantity,
          coalesce(ChargeCategory = 'Purchase' AND regexp_matches(coalesce({usage}, ''), '{BLOCK_USAGE}'), false) AS fee,
          lower(coalesce(nullif(regexp_extract(coalesce({reservation}, ''), '{RESERVATION}'), ''),
                         CASE WHEN ChargeCategory = 'Purchase' THEN regexp_extract(coalesce(ResourceId, ''),
                                                                                   '{RESERVATION}') END, '')) AS cr
        FROM n),
      fees AS (SELECT * FROM t WHERE fee AND cr <> '' AND _ps < {hi} AND (_ps >= {lo} OR _pe > {lo}))
      SELECT cr, fee, quantity, rn, _ps AS start, {quote_text(name)} || ':' || rn AS line,
        greatest(epoch_us(least(_pe, {lo})) - epoch_us(_ps), 0)
          + greatest(epoch_us(_pe) - epoch_us(greatest(_ps, {hi})), 0) AS outside_us,
        epoch_us(_pe) - epoch_us(_ps) AS whole_us
      FROM t WHERE fee AND rn IN (SELECT rn FROM fees)
         OR NOT fee AND cr IN (SELECT cr FROM fees)
      ORDER BY rn""").df()


def clip_block_fees(lines: pd.DataFrame, hours: pd.DataFrame, data_end, hi: datetime) -> tuple[pd.DataFrame, list]:
    """``lines`` with each Capacity Block fee line in W scaled to the hours of its block for W, and
    the notes (row, column, note) naming the hours and money left out per reservation.

    The hours for W are those reserved less those run outside W (:func:`hours_outside`). Where the
    file holds no line after W (``data_end``, its last charge period end, is W's end or before) and
    the block may reach past W, the hours run after W are not in the data: the reserved hours not run
    in W are left out as for time after W (a note says so), never read as idle. A block that cannot
    reach past W (its first hour run in it plus its reserved hours ends in W: it holds at least one
    instance) is all in W, whatever the file holds after."""
    notes: list = []
    if hours.empty:
        return lines, notes
    lines = lines.copy()
    for cr, rows in hours.groupby("cr", sort=False):
        fees, ran = rows[rows["fee"]], rows[~rows["fee"]]
        if fees["quantity"].isna().any() or not len(ran):
            continue
        reserved = sum((Decimal(q) for q in fees["quantity"]), Decimal(0))
        outside, inside = hours_outside(ran), hours_run(ran) - hours_outside(ran)
        seen = data_end is not None and not pd.isna(data_end) and utc(data_end) > utc(hi)
        ends = utc(ran["start"].min()) + pd.Timedelta(microseconds=int(reserved * 3_600_000_000))
        unseen = not seen and ends > utc(hi) and reserved > inside
        left_hours = reserved - inside if unseen else min(outside, reserved)
        if not left_hours or not reserved:
            continue
        at = lines["line_id"].isin(fees["line"])
        before = sum(lines.loc[at, "billed_cost"], Decimal(0))
        for column in CLIPPED:
            lines.loc[at, column] = pd.Series([None if a is None or pd.isna(a) else share(a, reserved - left_hours,
                                                                                        reserved)
                                               for a in lines.loc[at, column]], index=lines.index[at], dtype=object)
        left = before - sum(lines.loc[at, "billed_cost"], Decimal(0))
        currency = str(lines.loc[at, "currency"].iloc[0])
        note = (unseen_note(cr, reserved, inside, hi, left, currency) if unseen
                else outside_note(cr, reserved, outside, ran.loc[ran["outside_us"] > 0, "line"].iloc[0], left, currency))
        notes.append((int(fees["rn"].iloc[0]), "BilledCost", note))
    return lines, notes


def hours_run(ran: pd.DataFrame) -> Decimal:
    """The instance-hours of a reservation's lines (their PricingQuantity)."""
    return sum((Decimal(q) for q in ran["quantity"] if q), Decimal(0))


def hours_outside(ran: pd.DataFrame) -> Decimal:
    """The part of a reservation's instance-hours run outside W: each line's PricingQuantity × its
    time outside W ÷ its period (:func:`connectors.billing.clip.share`)."""
    return sum((share(Decimal(q), part, whole) for q, part, whole in
                zip(ran["quantity"], ran["outside_us"], ran["whole_us"]) if q and whole and part), Decimal(0))


def outside_note(cr: str, reserved: Decimal, outside: Decimal, first: str, left: Decimal, currency: str) -> str:
    """The note of a block some of whose hours ran outside W: hours and fee left out."""
    return (f"EC2 Capacity Block {cr}: {plain_hours(outside)} of its {plain_hours(reserved)} reserved "
            f"instance-hours ran outside the window (the lines naming it there, first {first}); "
            f"{left:,.2f} {currency} of its fee is for them and left out (clipped pro rata by hours, "
            "as billing is clipped to the window)")


def unseen_note(cr: str, reserved: Decimal, inside: Decimal, hi: datetime, left: Decimal, currency: str) -> str:
    """The note of a block that may reach past W in a file that ends with W: its hours after W are
    not in the data; the fee for the hours not run in W is left out as for them, not read as idle."""
    return (f"EC2 Capacity Block {cr}: {plain_hours(inside)} of its {plain_hours(reserved)} reserved "
            f"instance-hours ran in the window and the file holds no line after its end "
            f"({hi:%Y-%m-%d %H:%M} UTC), so whether the other {plain_hours(reserved - inside)} ran after it is "
            f"not in the data; {left:,.2f} {currency} of its fee is for them and left out as for time after "
            "the window (not read as idle)")


def plain_hours(value: Decimal) -> str:
    """Hours as plain text without trailing zeros (``24``, ``2.5``)."""
    return format(value.normalize(), "f")
