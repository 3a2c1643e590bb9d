"""audit.json ``classes``: each resource class's lines, gross, credits, tax and net at the cent, and a
row for the tax and credits no class took, the rows adding up to the total in scope (docs/audit-json.md).
Split from audit/audit_json.py."""
from __future__ import annotations

from decimal import Decimal

from audit.lines import basis_amount
from audit.money import ZERO, dsum, largest_remainder, table_cents
from schemas.billing import line_total

#: the classes[] row of the tax and credits no charge took (unattributed as unapplied_adjustment)
UNAPPLIED = "unapplied_adjustment"
HALF_CENT = Decimal("0.005")


def classes_of(result, headline: Decimal) -> list[dict]:
    """audit.json ``classes`` of the audit: :func:`class_rows` of its charges, with the total in scope,
    the amount of its tax lines in scope and the audit's rounded total (``headline``)."""
    scoped = result.lines[result.scope_mask]
    taxes = basis_amount(scoped, result.case.cost_basis)[scoped["charge_category"] == "Tax"]
    return class_rows(result.charges, result.reconciliation.conservation.in_scope_total, dsum(taxes), headline)


def class_rows(charges, total: Decimal, tax: Decimal, headline: Decimal | None = None) -> list[dict]:
    """Per class its gross, credits, tax and net, and a row :data:`UNAPPLIED` for the tax and credits
    that no class took (audit/adjust.py leaves them unattributed where they have no charge to apply
    to, or only charges costing 0), so that the rows' nets sum to ``total``, the total in scope, and
    the tax column to ``tax``, the amount of the tax lines in scope (the credits: the rest). The nets
    are rounded together to ``headline``, the audit's total in scope at the cent (rounded with the
    total outside it, METHOD §1), else to their own sum."""
    read = charges[[c for c in ("resource_class", "line_count", "gross", "commitment", "credits", "tax", "net")
                    if c in charges.columns]]  # not a copy of every column per class
    groups = sorted(read.groupby("resource_class"), key=lambda kv: kv[0])
    exact = {klass: {"gross": dsum(frame["gross"]) + dsum(frame["commitment"]), "credits": dsum(frame["credits"]),
                     "tax": dsum(frame["tax"])} for klass, frame in groups}
    lines = {klass: line_total(frame) for klass, frame in groups}
    left_tax = tax - dsum(row["tax"] for row in exact.values())
    left = total - dsum(dsum(row.values()) for row in exact.values())
    # its lines are counted in the notes' "Lines in no class", not here; a residue below half a cent (the
    # exact division of a spread, read from Parquet or text alike) is no row
    if max(abs(left), abs(left_tax)) >= HALF_CENT:
        exact[UNAPPLIED], lines[UNAPPLIED] = {"gross": ZERO, "credits": left - left_tax, "tax": left_tax}, 0
    # the nets are what the buckets carry: rounded together, so that they add up to the total in scope
    nets = largest_remainder({klass: dsum(row.values()) for klass, row in exact.items()}, headline)
    # and every row and column adds up: gross, credits and tax rounded together (audit.money.table_cents)
    # to each class's net and to each column's total, the columns rounded together to the total
    columns = largest_remainder({c: dsum(row[c] for row in exact.values()) for c in ("gross", "credits", "tax")},
                                dsum(nets.values()))
    parts = table_cents(exact, nets, columns)
    return [{"class": klass, "lines": lines[klass], **{c: str(v) for c, v in parts[klass].items()},
             "net": str(nets[klass])} for klass in exact]
