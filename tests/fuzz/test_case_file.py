"""Fuzz case.toml: the demo case with values replaced by TOML values of every type (NaN and
infinities, huge integers, dates, nested arrays and tables), keys dropped or added, and the text
itself mutated. ``load_case`` returns a Case or raises one ConfigError naming the file."""
from __future__ import annotations

import json
import math
import tomllib
from datetime import date, datetime, time, timezone

from hypothesis import given
from hypothesis import strategies as st

from audit.case import load_case
from audit.errors import ConfigError
from tests.fuzz.harness import FUZZ, MESSAGE_LIMIT, mutated, scratch
from tests.fuzz.values import _paths, _replace
from tests.paths import DEMO

SEED = tomllib.loads((DEMO / "case.toml").read_text())

TOML_SCALARS = st.one_of(
    st.integers(-2 ** 70, 2 ** 70), st.floats(), st.booleans(), st.text(max_size=20),
    st.sampled_from(["", "1h", "0s", "-5m", "99999999999999d", "re:(", "re:" + "(" * 400 + ")" * 400, "USD", "a" * 3000,
                     "/dev/zero", "../../../etc/passwd", "\x00"]),
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                 timezones=st.sampled_from([None, timezone.utc])),
    st.dates(), st.times())
TOML_VALUES = st.recursive(TOML_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=3)), max_leaves=6)


def toml_text(value) -> str:
    """A TOML value (tables inline)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_text(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(str(k), ensure_ascii=False)} = {toml_text(v)}" for k, v in value.items()) + "}"


def document(doc: dict) -> str:
    """A TOML document whose top-level keys are inline values."""
    return "".join(f"{json.dumps(str(k), ensure_ascii=False)} = {toml_text(v)}\n" for k, v in doc.items())


@st.composite
def case_documents(draw) -> bytes:
    doc = SEED
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(_paths(doc)))
        if path and draw(st.integers(0, 4)) == 0 and isinstance(_get(doc, path[:-1]), dict):
            doc = _replace(doc, path[:-1], {k: v for k, v in _get(doc, path[:-1]).items() if k != path[-1]})
        else:
            doc = _replace(doc, path, draw(TOML_VALUES))
    text = document(doc if isinstance(doc, dict) else {"case": doc}).encode()
    return draw(mutated(text, max_ops=2)) if draw(st.integers(0, 3)) == 0 else text


def _get(doc, path):
    for key in path:
        doc = doc[key]
    return doc


@FUZZ
@given(text=case_documents())
def test_case_toml(text):
    with scratch() as folder:
        (folder / "case.toml").write_bytes(text)
        try:
            load_case(folder)
        except ConfigError as exc:
            assert exc.path.endswith("case.toml")
            assert exc.problems and all(len(p) < MESSAGE_LIMIT for p in exc.problems), exc.problems


def test_seed_document_round_trips():
    """The writer is faithful: the seed, written back, loads as the demo case does."""
    assert tomllib.loads(document(SEED)) == SEED


def test_a_case_file_with_a_utf8_bom_reads(tmp_path):
    """A BOM (Notepad's UTF-8) was "not valid TOML: Invalid statement (at line 1, column 1)"."""
    path = tmp_path / "case.toml"
    path.write_bytes(b"\xef\xbb\xbf" + (DEMO / "case.toml").read_bytes())
    assert load_case(path).name == load_case(DEMO).name


def test_a_case_file_not_in_utf8_names_the_line_and_column(tmp_path):
    """A Latin-1 é said "not valid TOML: 'utf-8' codec can't decode byte 0xe9 in position 606:
    invalid continuation byte": a byte offset, no line, and no word of the encoding wanted."""
    path = tmp_path / "case.toml"
    text = (DEMO / "case.toml").read_text().replace("[case]", "[case]\n# café au lait", 1)
    path.write_bytes(text.encode("latin-1"))
    line = text.splitlines().index("# café au lait") + 1
    try:
        load_case(path)
    except ConfigError as exc:
        assert str(exc) == (f"{path}: not UTF-8: byte 0xe9 at line {line}, column 6; a case file must be "
                            "saved as UTF-8")
    else:
        raise AssertionError("a Latin-1 case file loaded")


def test_a_case_file_with_a_bom_and_a_latin1_byte_counts_columns_after_the_bom(tmp_path):
    path = tmp_path / "case.toml"
    path.write_bytes(b"\xef\xbb\xbf# na\xefve\n" + (DEMO / "case.toml").read_bytes())
    try:
        load_case(path)
    except ConfigError as exc:
        assert str(exc) == f"{path}: not UTF-8: byte 0xef at line 1, column 5; a case file must be saved as UTF-8"
    else:
        raise AssertionError("a Latin-1 case file loaded")
