"""What each cloud module hands back: the world it drew, its lines, and how its FOCUS file is written."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Callable

import numpy as np

from benchmarks.cloudgen.focus import Line
from benchmarks.cloudgen.world import HOURS, World


@dataclass(frozen=True)
class NativeBilling:
    """The case's lines in the provider's own export format (benchmarks/cloudgen/native.py)."""

    path: str                     # the file, relative to the case folder
    format: str                   # the [[billing]] format that reads it
    write: Callable[[list[Line]], bytes]
    read: str = ""                # what case.toml points at (an export folder), when not the file
    options: tuple[tuple[str, str], ...] = ()   # further [[billing]] keys, TOML values


@dataclass
class CloudCase:
    world: World
    lines: list[Line]
    columns: list[str]
    stamp: Callable[[datetime], str]
    billing_file: str
    currency: str
    accounts: list[str]           # the [scope] accounts (FOCUS SubAccountId)
    summary: str                  # one paragraph for case.toml and PROVENANCE.md
    #: per node: the identifiers each side carries (telemetry provider_id, billing ResourceId / Name)
    identities: list[dict] = field(default_factory=list)
    native: NativeBilling | None = None


def hourly(cls: str, quantity: Decimal, price: Decimal, columns: dict, nodes: tuple[int, ...] = ()) -> list[Line]:
    """The same charge, hour after hour."""
    return [Line(cls, h, h + 1, quantity, price, dict(columns), nodes) for h in range(HOURS)]


def at(hour: int, cls: str, quantity: Decimal, price: Decimal, columns: dict) -> Line:
    """One line for one hour."""
    return Line(cls, hour, hour + 1, quantity, price, dict(columns))


def daily(cls: str, quantity: Decimal, price: Decimal, columns: dict, nodes: tuple[int, ...] = ()) -> list[Line]:
    return [Line(cls, 0, HOURS, quantity, price, dict(columns), nodes)]


def gigabytes(rng: np.random.Generator, mean: float) -> list[Decimal]:
    """Hourly volumes (GB, 6 places) around a mean."""
    return [Decimal(f"{x:.6f}") for x in rng.gamma(8.0, mean / 8.0, HOURS)]


def sku_id(*parts: str) -> str:
    """A stable 16-character AWS-style SKU id."""
    alphabet = "23456789ABCDEFGHJKLMNPQRSTUVWXYZ"
    return "".join(alphabet[b % 32] for b in hashlib.sha256("|".join(parts).encode()).digest()[:16])


def hex_id(rng: np.random.Generator, digits: int) -> str:
    return "".join(rng.choice(np.array(list("0123456789abcdef")), digits))
