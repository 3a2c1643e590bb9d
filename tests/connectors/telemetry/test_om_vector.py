"""The OpenMetrics reader's array paths: the vector block reader (``om_stream._block``) reads
plain blocks as the per-line readers do, values and timestamps as ``float()`` does; and every
table built from the coded frames (categorical label columns, ``om_stream.family_frames``) is the
table built from ``Family.frame()``'s plain string columns, exactly."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.base import ReadContext, SourceSpec
from connectors.telemetry import om_stream, omtext
from connectors.telemetry.distinct import by_values, plain, plain_index
from connectors.telemetry.openmetrics import OpenMetricsConnector
from tests.connectors.telemetry import vllm_phases
from tests.connectors.telemetry.test_om_stream import DCGM, GR, T0, assert_same, sample
from tests.paths import FIXTURES

TESTS = Path(__file__).resolve().parents[2]


def test_plain_blocks_take_the_vector_path(tmp_path, monkeypatch):
    calls = []
    real = om_stream.Reader._block
    monkeypatch.setattr(om_stream.Reader, "_block",
                        lambda self, data: calls.append(real(self, data)) or calls[-1])
    monkeypatch.setattr(om_stream.Reader, "_fast", lambda *a: pytest.fail("per-line path"))
    lines = ["# TYPE x gauge", ""] + [sample(GR, DCGM + f',i="{i % 7}"', f"{i / 3}", T0 + i)
                                     for i in range(500)]
    path = tmp_path / "plain.txt"  # Prometheus text: no '# EOF', whose block would go line by line
    path.write_text("\n".join(lines) + "\n")
    roles, scan = om_stream.read_families(path)
    assert calls and all(calls) and scan.rows == 500
    old_roles, _ = omtext.read_families(path)
    pd.testing.assert_frame_equal(roles["dcgm"].frame(), old_roles["dcgm"].frame(),
                                  check_exact=True)


@pytest.mark.parametrize("value", ["1e5", ".5", "5.", "-0", "+1", "0001.50", "1E-3", "NaN", "nan",
                                   "+Inf", "-Inf", "inf", "Infinity", "-nan", "1e400", "4.9e-325",
                                   "nan(1)", "1_000", "0x10", ".e5", "1e", "+-1", "--1", "1.2.3"])
def test_value_forms_read_alike(tmp_path, value):
    good = [sample(GR, DCGM, "0.5", T0 + i) for i in range(30)]
    path = tmp_path / "v.om"
    path.write_text("\n".join(good + [sample(GR, DCGM, value, T0 + 99)] + good) + "\n")
    assert_same(path)


@pytest.mark.parametrize("stamp", ["1e9", "1735689600.5", "+1735689600", "-5", "1e12", "inf",
                                   "nan(2)", "1_7", "0x10"])
def test_timestamp_forms_read_alike(tmp_path, stamp):
    good = [sample(GR, DCGM, "0.5", T0 + i) for i in range(30)]
    path = tmp_path / "t.om"
    path.write_text("\n".join(good + [sample(GR, DCGM, "1", stamp)] + good) + "\n")
    assert_same(path)


NUMBER = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda x: f"{x:.17e}"),
    st.text(alphabet="0123456789.eE+-_naifxNI", min_size=1, max_size=12))


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(NUMBER, min_size=1, max_size=20))
def test_floats_are_float(texts):
    try:
        expected = [float(t) for t in texts]
    except ValueError:
        expected = None
    try:
        got = om_stream._floats(pa.array(texts, type=pa.large_string()))
    except (ValueError, pa.ArrowInvalid):
        got = None
    if got is None:
        return  # refused: the block goes the per-line way, which says what is wrong (or reads it)
    assert expected is not None, texts  # never a number float() refuses
    assert np.array_equal(got.view(np.int64), np.array(expected).view(np.int64)), texts


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["1", "0.25", "NaN", "-Inf",
                                                                   "7e-1", "x", "1_0"]),
                               st.sampled_from([str(T0), str(T0 + 30), "1e12", ""])),
                     max_size=60),
       size=st.sampled_from([64, 300, 1 << 20]))
def test_any_plain_mix_reads_alike(tmp_path_factory, rows, size):
    old_block = om_stream.BLOCK
    om_stream.BLOCK = size
    try:
        lines = [f'{GR}{{gpu="{g}",UUID="GPU-{g}"}} {v}' + (f" {t}" if t else "")
                 for g, v, t in rows]
        path = tmp_path_factory.mktemp("plain") / "p.om"
        path.write_text("\n".join(lines) + "\n")
        assert_same(path)
    finally:
        om_stream.BLOCK = old_block


def test_by_values_calls_once_per_combination():
    seen = []
    a = pd.Series(pd.Categorical(["x", "y", "x", "x"], categories=["", "x", "y"]))
    b = pd.Series(["p", "p", "q", "p"], dtype="str")
    got = by_values(lambda x, y: seen.append((x, y)) or x + y, a, b)
    assert list(got) == ["xp", "yp", "xq", "xp"] and sorted(seen) == [("x", "p"), ("x", "q"),
                                                                       ("y", "p")]
    assert list(by_values(str, [1.0, np.nan, 1.0])) == ["1.0", "nan", "1.0"]
    assert len(by_values(len, a[:0])) == 0


def test_plain_index_turns_categorical_levels_into_strings():
    frame = pd.DataFrame({"k": [1, 1, 2], "v": [1.0, 2.0, 3.0],
                          "m": pd.Categorical(["b", "a", "b"], categories=["", "a", "b"])})
    sums = plain_index(frame.groupby(["m", "k"]).v.sum())
    assert sums.index.get_level_values("m").dtype == "str"
    assert sums.to_dict() == {("a", 1): 2.0, ("b", 1): 1.0, ("b", 2): 3.0}
    assert plain(frame)["m"].dtype == "str"


def _tables(path: Path, start: datetime, days: float, step: int | None, coded: bool,
            monkeypatch) -> dict[str, pd.DataFrame]:
    """Every table of the connector, from coded frames or from plain ``Family.frame()``s."""
    from connectors.telemetry import openmetrics
    if not coded:
        monkeypatch.setattr(openmetrics, "family_coder", lambda roles: lambda families: {
            r: f.frame() for r, f in families.items()})
    ctx = ReadContext(start, start + timedelta(days=days), "USD", step)
    reader = OpenMetricsConnector(SourceSpec("t", "telemetry", "openmetrics", path), ctx)
    tables = dict(reader.fetch()[0])
    monkeypatch.undo()
    return tables


def _cases(tmp_path: Path):
    phases = tmp_path / "phases.om"
    vllm_phases.write(phases, T0)
    return [
        (FIXTURES / "telemetry_small" / "cluster.om", None),
        (FIXTURES / "telemetry_serving" / "serving.om", None),
        (TESTS / "data" / "shared_gpus" / "mig" / "metrics.om", None),
        (TESTS / "data" / "shared_gpus" / "time_sliced" / "metrics.om", None),
        (phases, T0),
    ]


@pytest.mark.parametrize("step", [None, 300])
def test_tables_from_coded_frames_are_the_plain_ones(tmp_path, monkeypatch, step):
    for path, t0 in _cases(tmp_path):
        roles, _ = om_stream.read_families(path)
        times = np.concatenate([np.asarray(f.t) for f in roles.values() if len(f.t)])
        first = int(np.nanmin(times)) if t0 is None else t0
        start = datetime.fromtimestamp(first - first % 3600, timezone.utc)
        days = (float(np.nanmax(times)) - start.timestamp()) / 86400 + 0.05
        coded = _tables(path, start, days, step, True, monkeypatch)
        plain_tables = _tables(path, start, days, step, False, monkeypatch)
        assert coded.keys() == plain_tables.keys()
        assert any(len(t) for t in coded.values()), path
        for name, table in plain_tables.items():
            pd.testing.assert_frame_equal(coded[name], table, check_exact=True, obj=f"{path} {name}")


@pytest.mark.parametrize("gz", [False, True])
def test_fingerprint_is_hashed_while_reading(tmp_path, monkeypatch, gz):
    import gzip as gzip_module

    from connectors import base
    lines = [sample(GR, DCGM, "0.5", T0 + i) for i in range(300)]
    text = ("\n".join(lines + ["# EOF"]) + "\n").encode()
    path = tmp_path / ("m.om.gz" if gz else "m.om")
    path.write_bytes(gzip_module.compress(text) if gz else text)
    expected = base.file_sha256(path)
    roles, scan = om_stream.read_families(path)
    assert scan.sha256 == expected
    start = datetime.fromtimestamp(T0, timezone.utc)
    ctx = ReadContext(start, start + timedelta(hours=1), "USD", 60)
    reader = OpenMetricsConnector(SourceSpec("t", "telemetry", "openmetrics", path), ctx)
    monkeypatch.setattr(base, "file_sha256", lambda p: pytest.fail("read twice"))
    assert reader.read().sha256 == expected


def test_fingerprint_of_a_file_the_exact_reader_reads(tmp_path):
    from connectors import base
    path = tmp_path / "crlf.om"
    path.write_bytes(("\r\n".join(sample(GR, DCGM, "0.5", T0 + i) for i in range(9)) + "\r\n# EOF\r\n").encode())
    assert om_stream.read_families(path)[1].sha256 is None
    start = datetime.fromtimestamp(T0, timezone.utc)
    ctx = ReadContext(start, start + timedelta(hours=1), "USD", 60)
    reader = OpenMetricsConnector(SourceSpec("t", "telemetry", "openmetrics", path), ctx)
    assert reader.read().sha256 == base.file_sha256(path)
