"""The shipped options catalogue (``audit/data/options.toml``), read once, shared by the rank stage
and ``costaudit whatif`` (which checks the option ids a changed case names)."""
from __future__ import annotations

import tomllib
from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=1)
def catalogue() -> tuple[dict, ...]:
    """The shipped options, in file order."""
    raw = tomllib.loads(resources.files("audit").joinpath("data/options.toml").read_text())
    return tuple(raw["option"])


def catalogue_ids() -> list[str]:
    """The shipped options' ids, in file order."""
    return [o["id"] for o in catalogue()]
