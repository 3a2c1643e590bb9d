"""`costaudit connectors`: the registered source formats."""
from __future__ import annotations

import typer


def connectors() -> None:
    """List the registered source formats."""
    from connectors.registry import CONNECTORS
    for name, target in sorted(CONNECTORS.items()):
        typer.echo(f"{name:<14} {target}")
