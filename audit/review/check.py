"""The shape and ranges of what a review reads in an audit.json, checked once, when it is loaded.

A review bridges two audits from their figures alone, so a figure no audit writes (a window that
ends before it starts, a day twice or outside the window, a negative quantity or request count, a
projection whose bands are out of order, a service in ``composition`` that ``services`` lacks, an
amount past 10^15) would come out as a confident step of the bridge. Each is one InputError naming
the file and the key (``services.chat.daily[3].parts``); nothing is written.
"""
from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from connectors.errors import InputError

#: the largest magnitude (its decimal exponent) a money figure, quantity or count may have
MAX_EXPONENT = 15
BANDS = ("low", "expected", "high")


def check_document(audit) -> None:
    """Every section a review reads, in its shape and range (``audit``: an :class:`load.Audit`)."""
    window = _window(audit)
    for key in ("services", "buckets"):
        _object(audit, audit.get(key), key)
    for key in ("lines", "composition"):
        if audit.has(key):
            _object(audit, audit.get(key), key)
    services = audit.get("services")
    for name, entry in services.items():
        where = f"services.{name}"
        _object(audit, entry, where)
        _components(audit, entry.get("components"), f"{where}.components")
        _daily(audit, entry.get("daily"), f"{where}.daily", window)
    composed = audit.get("composition", "services", default=None)
    if composed is not None:
        _composition(audit, _object(audit, composed, "composition.services"), services)
    for i, option in enumerate(audit.get("options", default=None) or []):
        if isinstance(option, dict) and isinstance(option.get("by_service"), dict):
            for name, bands in option["by_service"].items():
                _bands(audit, bands, f"options[{i}].by_service.{name}")


def _composition(audit, composed: dict, services: dict) -> None:
    """Its services among ``services``, and its parts footing to the total within a cent a figure
    (rounded once each, as an audit writes them): a composition further off would be drawn as a
    'rounding' step of the bridge."""
    for name in composed:
        if name not in services:
            raise InputError(audit.path, f"composition.services names {name!r}, which services does not hold",
                             expected="the services of composition among services")
    figures = [_amount(audit, v, f"composition.services.{k}") for k, v in composed.items()]
    figures += [_amount(audit, audit.get("composition", k, default="0"), f"composition.{k}")
                for k in ("unattributed", "unallocated")]
    total = _amount(audit, audit.get("total"), "total")
    if abs(total - sum(figures)) > Decimal("0.01") * len(figures):
        raise InputError(audit.path, f"total {total} is {total - sum(figures)} off its composition "
                                     f"({sum(figures)})", expected="a total its composition foots to, to the cent")


def _object(audit, value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise InputError(audit.path, f"{where} is {_kind(value)}, not an object")
    return value


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _window(audit) -> tuple[date, date]:
    """The audit's window as dates of its first and last day (end exclusive), start before end."""
    window = _object(audit, audit.get("window"), "window")
    moments = []
    for key in ("start", "end"):
        try:
            moments.append(datetime.fromisoformat(str(window.get(key))))
        except ValueError:
            raise InputError(audit.path, f"window.{key} is {window.get(key)!r}, not an ISO date-time",
                             expected="the window an audit writes: start before end") from None
    start, end = moments
    if start.tzinfo is None or end.tzinfo is None or end <= start:
        raise InputError(audit.path, f"window runs from {window.get('start')} to {window.get('end')}",
                         expected="an audit's window: UTC start before end")
    return start.date(), end.date()


def _components(audit, components: Any, where: str) -> None:
    if components is None:
        return
    for name, component in _object(audit, components, where).items():
        here = f"{where}.{name}"
        _object(audit, component, here)
        if component.get("quantity") is not None:  # GPU-seconds are never negative (a credit's amount may be)
            _amount(audit, component["quantity"], f"{here}.quantity", negative=component.get("unit") != "gpu_second")


def _daily(audit, days: Any, where: str, window: tuple[date, date]) -> None:
    """One entry per UTC day of the window, in order; counts, costs and GPU-seconds in range."""
    if days is None:
        return
    if not isinstance(days, list):
        raise InputError(audit.path, f"{where} is {_kind(days)}, not a list of days")
    previous = None
    for i, day in enumerate(days):
        here = f"{where}[{i}]"
        _object(audit, day, here)
        try:
            when = date.fromisoformat(str(day.get("day")))
        except ValueError:
            raise InputError(audit.path, f"{here}.day is {day.get('day')!r}, not a date") from None
        if not window[0] <= when <= window[1] or (previous is not None and when <= previous):
            raise InputError(audit.path, f"{here}.day {when} is " + (
                "outside the window" if not window[0] <= when <= window[1] else f"not after {previous}"),
                expected="one entry per UTC day of the window, in order")
        previous = when
        if day.get("requests") is not None:
            _amount(audit, day["requests"], f"{here}.requests", negative=False)
        for part, figures in _object(audit, day.get("parts") or {}, f"{here}.parts").items():
            _object(audit, figures, f"{here}.parts.{part}")
            if figures.get("gpu_seconds") is not None:
                _amount(audit, figures["gpu_seconds"], f"{here}.parts.{part}.gpu_seconds", negative=False)
            if figures.get("cost") is not None:
                _amount(audit, figures["cost"], f"{here}.parts.{part}.cost")


def _bands(audit, bands: Any, where: str) -> None:
    if bands is None:
        return
    _object(audit, bands, where)
    values = [_amount(audit, bands.get(b), f"{where}.{b}") for b in BANDS]
    if values != sorted(values):
        raise InputError(audit.path, f"{where} has low {values[0]}, expected {values[1]}, high {values[2]}",
                         expected="low ≤ expected ≤ high")


def _amount(audit, value: Any, where: str, negative: bool = True):
    number = decimal_of(audit, value, where)
    if not negative and number < 0:
        raise InputError(audit.path, f"{where} is {value!r}, a negative figure", expected="a figure ≥ 0")
    return number


def decimal_of(audit, value: Any, where: str) -> Decimal:
    """``value`` (a decimal string or an int) as Decimal; InputError naming the file and key if not."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(audit.path, f"{where} is {value!r}, not a decimal number")
    try:
        number = Decimal(value)
    except InvalidOperation:
        raise InputError(audit.path, f"{where} is {value!r}, not a decimal number") from None
    if not number.is_finite():
        raise InputError(audit.path, f"{where} is {value!r}, not a finite number")
    if number and number.adjusted() >= MAX_EXPONENT:
        raise InputError(audit.path, f"{where} is {value!r}, past 10^{MAX_EXPONENT}",
                         expected="a figure an audit writes")
    return number
