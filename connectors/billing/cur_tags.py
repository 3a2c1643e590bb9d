"""The tags of a CUR line as FOCUS writes them (a JSON object), in SQL: from flat tag columns
(``resourceTags/*``, ``resource_tags_*``) or from a CUR 2.0 tag MAP. User-defined tags lose their
``user:`` / ``user_`` prefix; AWS-generated tags keep theirs."""
from __future__ import annotations

import json
import re

from connectors.billing.focus_load import NULL_TEXT, text_or_null
from connectors.duck import quote_text


def tag_key(name: str) -> str:
    """A tag column's key as FOCUS writes it: user-defined tags lose their ``user:`` prefix."""
    return re.sub(r"^user[:_]", "", name)


def flat_tags(columns: list[tuple[str, str]]) -> str:
    """SQL: JSON object text of the non-null flat tag columns (key → value)."""
    if not columns:
        return "'{}'"
    seen: set[str] = set()
    parts = []
    for key, ref in columns:
        key = key if key not in seen else "user:" + key  # two spellings of one key: keep both
        seen.add(key)
        value = text_or_null(ref)
        parts.append(f"CASE WHEN ({value}) IS NOT NULL THEN {quote_text(json.dumps(key) + ':')} "
                     f"|| CAST(to_json({value}) AS VARCHAR) END")
    return f"'{{' || concat_ws(',', {', '.join(parts)}) || '}}'"


def map_tags(ref: str) -> str:
    """SQL: JSON object text of a CUR 2.0 tag MAP, null values dropped, ``user_`` prefixes removed.

    Where removing the prefixes would make two keys one (``user:team`` and ``user_team``), every key
    of that MAP keeps its own spelling, so neither value is lost (and the MAP is still read)."""
    literals = ", ".join(quote_text(t) for t in NULL_TEXT)
    kept = f"[e FOR e IN map_entries({ref}) IF e.value IS NOT NULL AND trim(e.value) NOT IN ({literals})]"
    short = "regexp_replace(regexp_replace(e.key, '^resourceTags/', ''), '^user[:_]', '')"
    keys = f"[{short} FOR e IN {kept}]"
    stripped = f"map_from_entries([struct_pack(k := {short}, v := e.value) FOR e IN {kept}])"
    spelled = f"map_from_entries([struct_pack(k := e.key, v := e.value) FOR e IN {kept}])"
    chosen = f"CASE WHEN len(list_distinct({keys})) = len({keys}) THEN {stripped} ELSE {spelled} END"
    return f"coalesce(CAST(to_json({chosen}) AS VARCHAR), '{{}}')"


def is_text(dtype: str) -> bool:
    """Whether a DuckDB column type is text (a CUR 2.0 MAP column written as its JSON text)."""
    return dtype.upper() in ("VARCHAR", "JSON")


def map_of_text(ref: str) -> str:
    """SQL: a MAP column written as JSON object text (a CSV export; a Parquet file that keeps it as
    text) as its MAP; NULL where empty (text that is no JSON object: :func:`cur_checks.map_errors`)."""
    return f"TRY_CAST(TRY_CAST({text_or_null(ref)} AS JSON) AS MAP(VARCHAR, VARCHAR))"


#: a CSV file's relation's column (:func:`connectors.billing.cur_sql.file_relation_sql`): ``<column>:<text>``
#: of the line's first MAP cell that is no JSON object (read as no MAP, its tags or product
#: attributes would be lost with no word), else NULL
BAD_MAP = "_m"


def bad_map_sql(csv_maps: tuple[tuple[str, str], ...]) -> str:
    """SQL over a CSV file's read: :data:`BAD_MAP` of the line; ``csv_maps`` are the file's MAP columns
    (name, reference), JSON text in a CSV export."""
    whens = " ".join(f"WHEN {text_or_null(ref)} IS NOT NULL AND {map_of_text(ref)} IS NULL "
                     f"THEN {quote_text(name + ':')} || {ref}" for name, ref in csv_maps)
    return f"CASE {whens} END"
