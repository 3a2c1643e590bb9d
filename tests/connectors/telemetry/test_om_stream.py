"""The block reader of OpenMetrics text (om_stream) against the line-by-line reader (omtext):
the same families (series, metadata, samples in file order), counts and errors, whatever the
block boundaries; and the coded frames (categorical label columns) decode to ``Family.frame()``."""
from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.errors import InputError
from connectors.telemetry import om_stream, omtext
from connectors.telemetry.distinct import plain
from tests.paths import DATA, FIXTURES

T0 = 1_735_689_600
GR = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
DCGM = 'gpu="0",UUID="GPU-a",modelName="NVIDIA H100",Hostname="node-a",pod="p",namespace="n"'
REAL = DATA / "metrics" / "datadog-integrations-core"


def outcome(read, path: Path):
    """What a reader makes of a file: its families and counts, or its error."""
    try:
        roles, scan = read(path)
    except InputError as exc:
        return ("error", str(exc), exc.row)
    families = {role: (family.index, family.meta, family.frame()) for role, family in roles.items()}
    return ("ok", scan.rows, scan.untimestamped, families)


def assert_same(path: Path) -> None:
    """Both readers give the same outcome; frames equal, and the coded frames decode to them."""
    new, old = outcome(om_stream.read_families, path), outcome(omtext.read_families, path)
    assert new[0] == old[0], (new[:3], old[:3])
    if new[0] == "error":
        assert new == old
        return
    assert new[1:3] == old[1:3]
    for role, (index, meta, frame) in old[3].items():
        got_index, got_meta, got_frame = new[3][role]
        assert (got_index, got_meta) == (index, meta), role
        pd.testing.assert_frame_equal(got_frame, frame, check_exact=True)
    roles, _ = om_stream.read_families(path)
    for role, coded in om_stream.family_frames(roles).items():
        pd.testing.assert_frame_equal(plain(coded), old[3][role][2], check_exact=True)


@pytest.fixture(params=[64, 1 << 20], ids=["small-blocks", "default-blocks"])
def block(request, monkeypatch):
    """Block sizes: tiny (every boundary case) and the default."""
    monkeypatch.setattr(om_stream, "BLOCK", request.param)
    return request.param


def sample(name: str, labels: str, value: str, t: int | str | None) -> str:
    """One sample line."""
    stamp = "" if t is None else f" {t}"
    return f"{name}{{{labels}}} {value}{stamp}"


def test_small_cluster_fixture_reads_alike():
    assert_same(FIXTURES / "telemetry_small" / "cluster.om")


@pytest.mark.slow
def test_demo_telemetry_reads_alike():
    assert_same(FIXTURES / "demo" / "telemetry" / "metrics.om.gz")


def test_real_snapshot_files_read_alike(block):
    files = sorted(REAL.glob("*")) if REAL.exists() else []
    for path in [p for p in files if p.is_file()][:12]:
        assert_same(path)


MIXED = [
    "# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio \\n of time",
    "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge",
    sample(GR, DCGM, "0.5", T0),
    "",
    sample(GR, DCGM, "NaN", T0 + 30),
    sample(GR, DCGM, "+Inf", T0 + 60),
    sample(GR, DCGM, "0.25", None),                      # no timestamp: counted
    sample(GR, DCGM + ',extra="a b  c"', "0.7", T0),     # spaces inside a label value
    sample(GR, DCGM, "0.6", f"{T0 + 90} # {{trace_id=\"x\"}} 1"),  # an exemplar
    sample(GR, DCGM, "0.6", T0 + 90) + "  ",             # trailing spaces
    sample(GR, DCGM + ',pod2="é"', "0.1", T0),           # non-ASCII
    sample(GR, DCGM, "0.3", T0 + 120).replace(" ", "\t", 1),  # a tab
    'vllm:request_success_total{model_name="m",pod="p",namespace="n"} 3 ' + str(T0),
    'vllm:request_success_total{model_name="m",pod="p",namespace="n"} 1e1 ' + str(T0 + 30),
    'kube_pod_container_resource_requests{resource="cpu",pod="p",namespace="n"} 2 ' + str(T0),
    "unused_metric 1 " + str(T0),
    "unused_metric{a=\"\\\"q\\\"\"} 1 " + str(T0),
]


def test_mixed_lines_read_alike(tmp_path, block):
    path = tmp_path / "mixed.om"
    path.write_text("\n".join(MIXED * 3 + ["# EOF", "", ""]) + "\n", encoding="utf-8")
    assert_same(path)
    path.write_text("\n".join(MIXED), encoding="utf-8")  # no # EOF, no final newline
    assert_same(path)


@pytest.mark.parametrize("bad", [
    sample(GR, DCGM, "1_000", T0),                       # float() reads it, the format does not
    sample(GR, DCGM, "x", T0),
    sample(GR, DCGM, "1", "12:00"),
    sample(GR, DCGM, "1", T0 * 1000),                    # milliseconds
    sample(GR, DCGM, "1", "nan"),
    sample(GR, 'gpu="0",gpu="1"', "1", T0),              # a label twice
    sample(GR, 'gpu="0', "1", T0),                       # an open label set
    "3bad 1 " + str(T0),
    "x 1 2 3",
    "x",
    f"{GR} 1 # comment {T0}",
])
def test_errors_are_the_line_by_line_readers(tmp_path, block, bad):
    good = [sample(GR, DCGM, "0.5", T0 + i) for i in range(40)]
    path = tmp_path / "bad.om"
    path.write_text("\n".join(good + [bad] + good + ["# EOF"]) + "\n")
    assert_same(path)


@pytest.mark.parametrize("tail", ["x 1 2\n", "\r", "  \r\n", "\ra"])
def test_content_after_eof_in_a_later_block(tmp_path, block, tail):
    path = tmp_path / "late.om"
    lines = [sample(GR, DCGM, "0.5", T0 + i) for i in range(20)]
    path.write_bytes(("\n".join(lines + ["# EOF"] + [""] * 30) + "\n" + tail).encode())
    new = outcome(om_stream.read_families, path)
    assert new[:3] == outcome(omtext.read_families, path)[:3]
    assert new[0] == ("error" if tail.strip() else "ok")


@pytest.mark.parametrize("damage", ["truncated gzip", "not UTF-8", "CRLF", "long line"])
def test_files_the_fast_path_hands_back(tmp_path, block, damage, monkeypatch):
    lines = [sample(GR, DCGM, "0.5", T0 + i) for i in range(200)]
    text = "\n".join(lines + ["# EOF"]) + "\n"
    path = tmp_path / "f.om"
    if damage == "truncated gzip":
        path.write_bytes(gzip.compress(text.encode())[:-40])
    elif damage == "not UTF-8":
        path.write_bytes(text.encode().replace(b'pod="p"', b'pod="\xff"', 1))
    elif damage == "CRLF":
        path.write_bytes(text.replace("\n", "\r\n").encode())
    else:
        monkeypatch.setattr(om_stream, "MAX_LINE", 100)
        monkeypatch.setattr(omtext, "MAX_LINE", 100)
        path.write_text(text)
    assert_same(path)


LINES = st.sampled_from(MIXED + [
    sample(GR, DCGM, "0.5", T0 + 10), sample(GR, DCGM, "-Inf", T0 + 20), "# EOF", "   ",
    sample(GR, DCGM.replace("p", "q"), "0.9", T0 + 5), "x 1_0 " + str(T0)])


@settings(max_examples=25, deadline=None)
@given(lines=st.lists(LINES, max_size=25), size=st.sampled_from([16, 64, 300]),
       gz=st.booleans(), final_newline=st.booleans())
def test_any_mix_reads_alike(tmp_path_factory, lines, size, gz, final_newline):
    old_block = om_stream.BLOCK
    om_stream.BLOCK = size
    try:
        text = "\n".join(lines) + ("\n" if final_newline else "")
        path = tmp_path_factory.mktemp("mix") / "m.om"
        path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
        assert_same(path)
    finally:
        om_stream.BLOCK = old_block


def test_series_numbered_in_file_order_after_a_sample_without_timestamp(tmp_path, block):
    # found by test_any_plain_mix_reads_alike: the second series was numbered before the first
    path = tmp_path / "untimed.om"
    path.write_text(f'{GR}{{gpu="0",UUID="GPU-0"}} 1\n{GR}{{gpu="1",UUID="GPU-1"}} 1 {T0}\n')
    assert_same(path)


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_a_file_cut_inside_its_last_line_is_refused(tmp_path, block, gz):
    """Before: a copy that stopped mid-line was read, its last sample with its timestamp cut
    (``… 0.5 17356`` read as 1970). The text formats end every line with a line feed."""
    lines = [sample(GR, DCGM, "0.5", T0 + i) for i in range(200)]
    text = ("\n".join(lines) + "\n")
    cut = text[:-6]
    path = tmp_path / "cut.om"
    path.write_bytes(gzip.compress(cut.encode()) if gz else cut.encode())
    for read in (om_stream.read_families, omtext.read_families):
        with pytest.raises(InputError) as caught:
            read(path)
        assert caught.value.row == 200
        assert "the file ends inside line 200" in str(caught.value) and "it looks cut short" in str(caught.value)
    whole = tmp_path / "whole.om"
    whole.write_text(text + "# EOF")  # '# EOF' may end the file without a line feed
    assert outcome(om_stream.read_families, whole)[:2] == ("ok", 200)
    assert_same(whole)
