"""Exact money through any SQL engine: each amount as integer limbs of nine digits.

A split's amounts are 50-digit Decimals (credits and tax spread over lines divide), more than any
engine's DECIMAL holds (DuckDB and Trino 38 digits, BigQuery NUMERIC 9 decimal places; the BigQuery
emulator's NUMERIC is DuckDB's DECIMAL(18, 3)). Every engine sums 64-bit integers exactly, so an
amount is written as the integer ``amount × 10^E`` (E: the most decimal places of any amount),
cut into base-10^9 limbs that carry the amount's sign. A limb is below 10^9 in size, so a sum of
up to 9 × 10^9 of them fits an INT64; the limb sums put back together give the exact sum.
"""
from __future__ import annotations

import decimal
from decimal import Decimal
from typing import Sequence

import numpy as np

BASE = 10 ** 9
POWERS = 10 ** np.arange(8, -1, -1, dtype=np.int64)  # a group's nine digits, most significant first


def scale_of(columns: Sequence[Sequence[Decimal]]) -> int:
    """E: the most decimal places of any amount (0 for whole amounts)."""
    places = 0
    for values in columns:
        for value in values:
            exponent = value.as_tuple().exponent
            if isinstance(exponent, int) and -exponent > places:
                places = -exponent
    return places


WIDE = decimal.Context(prec=1000, Emax=999999, Emin=-999999)  # scaleb exact for any amount read


def limbs(values: Sequence[Decimal], scale: int) -> np.ndarray:
    """The limb columns of ``values`` (rows least significant first, one column per value), as many
    as the largest needs: each amount's digits at ``scale`` cut into nine-digit groups by numpy. A
    column of zeros (the committed money of a bill with no commitment) is one limb of zeros, uncut."""
    if not any(values):
        return np.zeros((1, len(values)), dtype=np.int64)
    texts = [format(abs(v.scaleb(scale, WIDE)), "f") for v in values]
    count = (max(map(len, texts)) + 8) // 9
    digits = np.frombuffer("".join(t.rjust(count * 9, "0") for t in texts).encode("ascii"), dtype=np.uint8)
    groups = (digits.reshape(len(values), count, 9) - ord("0")).astype(np.int64) @ POWERS
    signs = np.fromiter((-1 if v.is_signed() else 1 for v in values), dtype=np.int64, count=len(values))
    return np.ascontiguousarray((groups[:, ::-1] * signs[:, None]).T)


def joined(sums: Sequence[int], scale: int) -> Decimal:
    """The exact Decimal of limb sums (least significant first) at ``scale``."""
    total = int(sums[-1])
    for part in reversed(sums[:-1]):
        total = total * BASE + int(part)
    return Decimal(total).scaleb(-scale, WIDE)
