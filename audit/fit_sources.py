"""What a billing source's reader set apart with money on it (rule 5: no money dropped without a word).

A CUR's split cost allocation rows share out their parent instance lines' cost and are kept out of
the lines (:mod:`connectors.billing.cur_split`). Where some of them carry money of their own (an
amount the FOCUS mapping reads: unblended, effective or public on-demand cost), that money is in no
line and so in neither the invoice total nor the bridge: ``split_rows_money`` names the rows
(``file:row``), the amounts and why (nearest: the rows).
"""
from __future__ import annotations

from audit.collected import Collected
from audit.misfit import Misfit, text
from connectors.billing.cur_split import money_words


def split_money_fit(collected: Collected) -> list[Misfit]:
    """A ``split_rows_money`` warning per billing source whose split rows carry money."""
    out = []
    for frame in collected.of("billing"):
        summary = frame.tables.get("split_summary")
        if summary is None or not len(summary) or not summary["money_rows"].iloc[0]:
            continue
        subject = f"billing source {text(frame.spec.name)}"
        rows = tuple(text(r) for r in summary["money_at"].iloc[0].split(", "))
        out.append(Misfit("split_rows_money", subject, f"{subject}: {money_words(summary)}", rows))
    return out
