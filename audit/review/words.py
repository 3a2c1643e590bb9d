"""The main driver of a change in words: "volume +12.0 % (requests 1.2 M → 1.35 M)",
"price −30.1 % on GPU time", "mostly chat's capacity_above_demand (−2,345.67)".
"""
from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from audit.review.effects import BUSY, Split, to_decimal

MINUS = "−"
_SCALES = ((10**9, "bn"), (10**6, "M"), (10**3, "k"))


def signed(value: Decimal) -> str:
    """Money with a sign and thousands separators: +1,234.56, −0.40, 0.00."""
    text = f"{abs(value):,.2f}"
    if value > 0:
        return "+" + text
    return MINUS + text if value < 0 else text


def money(value: Decimal) -> str:
    return (MINUS if value < 0 else "") + f"{abs(value):,.2f}"


def percent(change: Fraction | Decimal, places: int = 1) -> str:
    """A relative change as a signed percentage: +12.0 %, −30.1 %."""
    value = to_decimal(change) if isinstance(change, Fraction) else change
    text = f"{abs(value) * 100:.{places}f} %"
    if text.strip("0. %") == "":
        return "0.0 %"
    return ("+" if value > 0 else MINUS) + text


def count(n: int | None) -> str:
    """A count in few digits: 950, 12.3 k, 1.35 M, 2.1 bn (three significant digits at most)."""
    if n is None:
        return "n/a"
    for size, word in _SCALES:
        if abs(n) >= size:
            value = Decimal(n) / size
            digits = max(0, 3 - len(str(int(abs(value)))))
            text = f"{value:.{digits}f}".rstrip("0").rstrip(".") if digits else f"{value:.0f}"
            return f"{text} {word}"
    return str(n)


def relative(before: Fraction, after: Fraction) -> Fraction | None:
    return (after - before) / before if before else None


def label(component: str, for_price: bool = False) -> str:
    """A component id in words."""
    if component in (BUSY, "gpu_idle"):
        if for_price:
            return "GPU time"
        return "kernel-busy GPU-seconds" if component == BUSY else "idle GPU-seconds"
    kind, _, name = component.partition(":")
    if kind == "shared":
        return f"its share of {name}"
    return name or component


def service_driver(split: Split, amounts: dict[str, Decimal]) -> str:
    """The largest effect of a service (by its rounded amount) and why, in words."""
    effect = max(amounts, key=lambda k: (abs(amounts[k]), -list(amounts).index(k)))
    if amounts[effect] == 0:
        return "no change"
    words = {"volume": _volume, "price": _price, "efficiency": _efficiency, "overhead": _overhead}[effect](split)
    return f"{words}: {signed(amounts[effect])}"


def _volume(split: Split) -> str:
    change = relative(Fraction(split.requests_from), Fraction(split.requests_to))
    shown = percent(change) if change is not None else "n/a"
    return f"volume {shown} (requests {count(split.requests_from)} → {count(split.requests_to)})"


def _largest(split: Split, effect: str) -> str | None:
    ranked = sorted(split.components, key=lambda k: (-abs(split.components[k].effects[effect]), k))
    return ranked[0] if ranked and split.components[ranked[0]].effects[effect] != 0 else None


def _price(split: Split) -> str:
    key = _largest(split, "price")
    if key is None:
        return "price"
    c = split.components[key]
    change = relative(c.price_from, c.price_to)
    return f"price {percent(change) if change is not None else 'n/a'} on {label(key, for_price=True)}"


def _efficiency(split: Split) -> str:
    c = split.components.get(BUSY)
    if c is None:
        return "efficiency"
    change = relative(c.per_request_from, c.per_request_to)
    return f"efficiency: kernel-busy GPU-seconds per request {percent(change) if change is not None else 'n/a'}"


def _overhead(split: Split) -> str:
    key = _largest(split, "overhead")
    if key is None:
        return "overhead"
    c = split.components[key]
    if c.per_request_from == 0:
        return f"overhead: {label(key)} appeared"
    if c.per_request_to == 0:
        return f"overhead: {label(key)} gone"
    change = relative(c.per_request_from, c.per_request_to)
    return f"overhead: {label(key)} per request {percent(change) if change is not None else 'n/a'}"


def part_driver(changes: dict[tuple[str, str | None], tuple[Decimal, Decimal]]) -> str:
    """A bucket's main driver: the part (name, service) whose amount changed most."""
    moved = {k: b - a for k, (a, b) in changes.items() if b != a}
    if not moved:
        return "no change"
    (name, service), delta = max(moved.items(), key=lambda kv: (abs(kv[1]), str(kv[0])))
    before, after = changes[(name, service)]
    who = f"{service}'s {name}" if service else name
    if before == 0:
        return f"mostly {who}, new ({signed(delta)})"
    if after == 0:
        return f"mostly {who}, gone ({signed(delta)})"
    return f"mostly {who} ({signed(delta)}, {percent(Fraction(after - before) / Fraction(before))})"
