"""The audits a review reads: an audit.json file, or a case folder audited in memory first.

Each input becomes an :class:`Audit`: the audit.json document with the name it was given, and
accessors that read a figure and, where it is missing or not a number, raise one
:class:`~connectors.errors.InputError` naming the file and the key (``services.chat.requests``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

from audit.review.check import MAX_EXPONENT, check_document, decimal_of
from connectors.bounds import FILE, check_source_path, nested_too_deep
from connectors.errors import InputError

#: what every audit.json of format 1 carries and a review reads
REQUIRED = ("case", "window", "currency", "cost_basis", "total", "services", "buckets", "coverage")
_MISSING = object()
#: an audit.json is read whole: larger than any audit writes is refused before it is read
MAX_BYTES = 64 * 2**20


@dataclass(frozen=True)
class Audit:
    """One audit.json document and where it came from (``path`` as the user named it)."""

    document: dict
    path: str

    def has(self, *keys: str) -> bool:
        return self.get(*keys, default=None) is not None

    def get(self, *keys: str, default: Any = _MISSING) -> Any:
        """The value at ``keys``; ``default`` when absent (InputError naming the key without one)."""
        value: Any = self.document
        for i, key in enumerate(keys):
            if not isinstance(value, dict) or key not in value:
                if default is not _MISSING:
                    return default
                where = ".".join(keys[: i + 1])
                raise InputError(self.path, f"{where} is missing (an audit.json of costaudit {_version(self)} "
                                            "without it cannot be reviewed; run the audit again)")
            value = value[key]
        return value

    def money(self, *keys: str) -> Decimal:
        """A decimal figure (cents or exact) at ``keys``, as Decimal."""
        return decimal_of(self, self.get(*keys), ".".join(keys))

    def exact(self, *keys: str) -> Fraction:
        """A decimal figure at ``keys`` as an exact fraction."""
        return fraction_of(self, self.get(*keys), ".".join(keys))

    @property
    def name(self) -> str:
        return str(self.document.get("case"))


def fraction_of(audit: Audit, value: Any, where: str) -> Fraction:
    """``value`` as an exact Fraction (from its decimal text: no float on the way)."""
    return Fraction(decimal_of(audit, value, where))


def count_of(audit: Audit, value: Any, where: str) -> int | None:
    """A request count (an int or an integer string), None where the audit has none."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise InputError(audit.path, f"{where} is {value!r}, not a count")
    if isinstance(value, int):
        number = value
    else:
        number_d = decimal_of(audit, value, where)
        if number_d != number_d.to_integral_value():
            raise InputError(audit.path, f"{where} is {value!r}, not a whole count")
        number = int(number_d)
    if number < 0:
        raise InputError(audit.path, f"{where} is {value!r}, a negative count")
    if number >= 10 ** MAX_EXPONENT:
        raise InputError(audit.path, f"{where} is past 10^{MAX_EXPONENT}", expected="a count an audit writes")
    return number


def _version(audit: Audit) -> str:
    meta = audit.document.get("meta")
    return str(meta.get("version")) if isinstance(meta, dict) else "(unknown version)"


MISSING = "no such file or folder (give an audit.json or a case folder)"


def check_exists(path: str | Path) -> None:
    """An InputError for a path that names nothing: every input of a review is checked so before
    any is audited (a case folder takes a minute to audit)."""
    if not Path(path).exists():
        raise InputError(str(path), MISSING)


def load(path: str | Path) -> Audit:
    """An audit.json file read, or a case folder (or case.toml) audited in memory."""
    given = str(path)
    path = Path(path)
    if path.is_dir() or path.suffix == ".toml":
        return Audit(audit_case(path), given)
    if path.exists():  # a FIFO or a device would block the read, or never end it
        check_source_path(path, FILE, expected="an audit.json file or a case folder")
        if path.stat().st_size > MAX_BYTES:
            raise InputError(given, f"is {path.stat().st_size:,} bytes",
                             expected=f"an audit.json (at most {MAX_BYTES:,} bytes; an audit writes kilobytes)")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(given, MISSING) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(given, f"could not be read ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(given, f"not JSON: line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise InputError(given, nested_too_deep(), expected="an audit.json of costaudit") from None
    return checked(document, given)


def checked(document: Any, path: str) -> Audit:
    """``document`` as an Audit, once it is an audit.json of costaudit with the keys a review reads."""
    meta = document.get("meta") if isinstance(document, dict) else None
    if not isinstance(meta, dict) or meta.get("tool") != "costaudit":
        raise InputError(path, "not an audit.json of costaudit (no meta.tool \"costaudit\")")
    if not isinstance(meta.get("format"), int) or isinstance(meta.get("format"), bool):
        raise InputError(path, f"meta.format is {meta.get('format')!r}, not an audit.json format number")
    audit = Audit(document, path)
    for key in REQUIRED:
        audit.get(key)
    if not isinstance(document["services"], dict):
        raise InputError(path, "services is not an object of services")
    check_document(audit)
    return audit


def audit_case(path: Path) -> dict:
    """The audit.json document of a case, audited in memory (nothing written)."""
    from audit.audit_json import to_dict
    from audit.case import load_case
    from audit.pipeline import run_audit

    return to_dict(run_audit(load_case(path)))
