"""Where a Prometheus server holds the series the audit reads, when none lies in the case window.

"No series in the window" leaves the user to guess between a wrong url, a wrong tenant and a wrong
window. When the server does hold some of the series at other times, the refusal names them and the
days they cover (rule 5: the nearest thing the data does contain). Asked only on that refusal: one
label query over :data:`LOOKBACK_DAYS`, and a range query at a step of a day for each of the first
:data:`SPANNED` names held.
"""
from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Sequence

from connectors.errors import SourceError
from connectors.telemetry.promhttp import PromClient
from connectors.telemetry.promquery import promql_string, seconds_text

DAY_S = 86_400
LOOKBACK_DAYS = 1_000  # a range query answers at most 11,000 points: a day each
SPANNED = 3  # the held names whose days are asked for (the first in the audit's order)


def held_elsewhere(client: PromClient, wanted: Sequence[str], window_ms: tuple[int, int]) -> str:
    """A clause (``"; the server holds … from D1 to D2"``) naming the wanted series the server holds
    outside the window and the UTC days they span, or ``""`` (none, or the server would not say)."""
    now_ms = int(time.time() * 1000)
    start_ms = min(window_ms[0], now_ms) - LOOKBACK_DAYS * DAY_S * 1000
    end_ms = max(window_ms[1], now_ms)
    selector = "{__name__=~%s}" % promql_string("|".join(wanted))
    try:
        held = set(client.label_values("__name__", selector, seconds_text(start_ms), seconds_text(end_ms)))
        names = [name for name in wanted if name in held]
        if not names:
            return ""
        # one name a query: over several, count_over_time would drop the names and collide
        days = [series for name in names[:SPANNED] for series in client.query_range(
            f"count(count_over_time({name}[1d]))", seconds_text(start_ms), seconds_text(end_ms), DAY_S)]
    except SourceError:
        return ""
    times = [float(t) for series in days for t, _ in series.get("values") or []]
    listed = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    if not times:
        return f"; the server holds {listed} at other times"
    first, last = (datetime.fromtimestamp(t, timezone.utc) for t in (min(times) - DAY_S, max(times)))
    return f"; the server holds {listed} between {first:%Y-%m-%d} and {last:%Y-%m-%d} (UTC days), outside the window"
