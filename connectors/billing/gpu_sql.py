"""The GPU rules of :mod:`audit.classify` in DuckDB SQL, for lines and groups of lines.

Table ``gpu_instances`` (the instance catalogue of :mod:`connectors.billing.catalogue`), the
instance-type lookup (an ``x_*`` hint, else SkuPriceDetails, the usage type, the description), and
the per-GPU meters, with the same regular expressions as the Python rules. The billing totals
(:mod:`connectors.billing.totals`) run them on the groups of a source; the FOCUS reader
(:mod:`connectors.billing.focus_lines`) on its kept lines, to find the lines that may bill GPU time.
"""
from __future__ import annotations

from connectors.billing.catalogue import AZURE_RE, GCP_MACHINE_RE, INSTANCE_RE, gpu_instances, gpu_skus
from connectors.duck import quote_text

# Where audit.classify.instance_type_of looks for an instance type, in its order: an x_* column,
# else the same key in SkuPriceDetails.
HINT_KEYS = ("x_InstanceType", "InstanceType", "x_ArmSkuName", "x_SkuMeterName")


def load_gpu_instances(con) -> None:
    """Table ``gpu_instances`` from connectors/billing/data/gpu_instances.csv (connectors.billing.catalogue)."""
    rows = ", ".join(f"({quote_text(name)}, {quote_text(kind.gpu_model)}, {int(kind.gpus)})"
                     for name, kind in gpu_instances().items())
    con.execute("CREATE TEMP TABLE gpu_instances (instance_type VARCHAR PRIMARY KEY, gpu_model VARCHAR, "
                "gpus INTEGER)")
    if rows:
        con.execute(f"INSERT INTO gpu_instances VALUES {rows}")


def normalised(expr: str) -> str:
    """SQL of :func:`audit.classify.normalise_instance`: trimmed, lower case, no ml. / standard_."""
    trimmed = f"lower(regexp_replace({expr}, '^\\s+|\\s+$', '', 'g'))"
    return f"replace(regexp_replace(regexp_replace({trimmed}, '^ml\\.', ''), '^standard_', ''), ' ', '_')"


def instance_type_sql() -> str:
    """SQL of :func:`audit.classify.instance_type_of` over a group's ``hint``, ``usage`` and ``text``."""
    instance, gcp = quote_text(INSTANCE_RE.pattern), quote_text(GCP_MACHINE_RE.pattern)
    azure = quote_text("(?i)" + AZURE_RE.pattern)
    rest = "substr(usage, strpos(usage, ':') + 1)"
    found = [("lower(text)", instance), ("lower(text)", gcp), ("text", azure)]
    whens = [f"WHEN hint IS NOT NULL THEN {normalised('hint')}",
             f"WHEN strpos(usage, ':') > 0 AND regexp_matches({rest}, {instance}) THEN {normalised(rest)}"]
    whens += [f"WHEN regexp_matches({subject}, {pattern}) THEN "
              f"{normalised(f'regexp_extract({subject}, {pattern}, 1)')}" for subject, pattern in found]
    return f"CASE {' '.join(whens)} ELSE '' END"


def hint_sql() -> str:
    """SQL: a group's first instance-type hint (an x_* column, else the key in SkuPriceDetails)."""
    obj = "CASE WHEN json_valid(spd) AND json_type(spd) = 'OBJECT' THEN spd END"
    parts = []
    for key in HINT_KEYS:
        if key.startswith("x_"):
            parts.append(f"nullif({key}, '')")
        parts.append(f"nullif(json_extract_string({obj}, {quote_text('$.' + key)}), '')")
    return f"coalesce({', '.join(parts)})"


def gpu_line_sql() -> str:
    """SQL: whether a line may bill GPU time, over its ``charge_category`` and the ``hint``, ``usage``,
    ``descr`` and ``text`` of :func:`instance_type_sql` (table ``gpu_instances`` loaded): a usage line
    of an instance type with GPUs, or of a per-GPU meter."""
    return (f"charge_category = 'Usage' AND (({instance_type_sql()}) IN (SELECT instance_type FROM gpu_instances) "
            f"OR ({gpu_meter_sql()}) IS NOT NULL)")


def ensure_gpu_instances(con) -> None:
    """Load table ``gpu_instances`` into the session unless it is there already."""
    if not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'gpu_instances'").fetchall()[0][0]:
        load_gpu_instances(con)


def gpu_meter_sql(descr: str = "descr") -> str:
    """SQL of :func:`audit.lines.gpu_sku_model` over column ``descr``: the first per-GPU meter matched."""
    whens = " ".join(f"WHEN regexp_matches({descr}, {quote_text('(?i)' + p.pattern)}) THEN {quote_text(m)}"
                     for p, m in gpu_skus())
    return f"CASE {whens} END" if whens else "NULL::VARCHAR"
