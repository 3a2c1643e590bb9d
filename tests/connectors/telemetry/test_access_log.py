"""AccessLogConnector: the two real parsed logs, the same log as Apache text, ELB/ALB lines, windows and
steps, bad input, and a cost per request of the workload_efficiency day."""
from __future__ import annotations

import gzip
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from connectors.base import ReadContext, SourceSpec
from connectors.errors import InputError, InputErrors
from connectors.registry import resolve
from connectors.telemetry.access_log import AccessLogConnector
from tests.paths import DATA

LABS = DATA / "billing" / "aws_wa_labs"
STEP1 = LABS / "workload_efficiency_step1_accesslog_2019-11-26.parquet"
STEP5 = LABS / "workload_efficiency_step5_accesslog_2019-11-29.parquet"
STEP1_CUR = LABS / "workload_efficiency_step1_cur_2019-11-26.csv.gz"
COUNTS = ["lines", "successful", "failed", "health_checks", "unparseable"]


def utc(*parts: int) -> datetime:
    """A tz-aware UTC datetime."""
    return datetime(*parts, tzinfo=timezone.utc)


def read(path: Path, start=utc(2019, 11, 1), end=utc(2019, 12, 1), step=None, **options):
    """Read ``path`` through the base read() (validation included)."""
    spec = SourceSpec(name="log", kind="telemetry", format="access_log", path=Path(path), options=options)
    ctx = ReadContext(start=start, end=end, currency="USD", step_seconds=step)
    return AccessLogConnector(spec, ctx).read()


def sums(frame) -> dict:
    """Total of each count column of ``requests_detail``."""
    return {c: int(frame.tables["requests_detail"][c].sum()) for c in COUNTS}


# --- the real parsed logs (PROVENANCE.md) -----------------------------------------------------

@pytest.mark.parametrize("path, expected", [
    (STEP1, {"lines": 237792, "successful": 108492, "failed": 6039, "health_checks": 123168, "unparseable": 93}),
    (STEP5, {"lines": 280958, "successful": 121348, "failed": 6253, "health_checks": 153264, "unparseable": 93}),
])
def test_real_logs_split_into_classes(path, expected):
    frame = read(path, service="ordering")
    assert frame.rows == expected["lines"] and sums(frame) == expected
    traffic = frame.tables["traffic"]
    assert traffic["requests"].sum() == expected["successful"]
    assert set(traffic["pod"]) == {"ordering"} and set(traffic["model_name"]) == {""}
    # a request log counts no tokens: not measured (NaN), never 0
    assert traffic["prompt_tokens"].isna().all() and traffic["generated_tokens"].isna().all()
    assert frame.tables["requests_detail"]["ts"].notna().all()  # every probe line carries its [time]


def test_step1_hours_and_coverage():
    frame = read(STEP1)
    detail = frame.tables["requests_detail"]
    assert len(detail) == 22 and detail["ts"].iloc[0] == pd.Timestamp("2019-11-26T00:00:00Z")
    assert frame.covered == (utc(2019, 11, 26, 0, 0, 1), utc(2019, 11, 26, 21, 24, 9))
    assert str(frame.tables["traffic"]["ts"].dtype) == "datetime64[ns, UTC]"


def test_step_and_window():
    day = read(STEP5, start=utc(2019, 11, 29), end=utc(2019, 12, 1), step=86400).tables["requests_detail"]
    assert list(day["ts"]) == [pd.Timestamp("2019-11-29T00:00:00Z"), pd.Timestamp("2019-11-30T00:00:00Z")]
    assert day["lines"].sum() == 280958
    first_hour = read(STEP5, start=utc(2019, 11, 29, 20), end=utc(2019, 11, 29, 21))
    assert first_hour.rows == 280958 and len(first_hour.tables["traffic"]) == 1
    assert sums(first_hour)["lines"] == first_hour.tables["requests_detail"]["lines"].iloc[0] < 12000


def test_health_path_option_counts_probes_by_path():
    by_agent = sums(read(STEP1))
    by_path = sums(read(STEP1, health_path="/index.html"))
    assert by_path["health_checks"] == by_agent["health_checks"] + 28571  # every /index.html? request
    assert by_path["successful"] == by_agent["successful"] - 28571


# --- text logs --------------------------------------------------------------------------------

def test_same_log_as_apache_text_gives_the_same_counts(tmp_path):
    """The parsed Parquet written back as combined-format text (its raw probe lines as they were)."""
    target = tmp_path / "access.log.gz"
    line = ("CASE WHEN status IS NULL THEN path ELSE client_ip || ' - - [' || "
            "strftime(timestamp, '%d/%b/%Y:%H:%M:%S +0000') || '] \"' || method || ' ' || path || ' ' || "
            "protocol || '\" ' || status || ' ' || bytes || ' \"' || referer || '\" \"' || user_agent || '\"' END")
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        text = "\n".join(r[0] for r in con.execute(f"SELECT {line} FROM '{STEP1}'").fetchall()) + "\n"
    target.write_bytes(gzip.compress(text.encode("utf-8"), compresslevel=1))
    from_text, from_parquet = read(target), read(STEP1)
    assert from_text.rows == 237792
    # One "unparseable" line of the Parquet is a valid combined-format line whose referer holds
    # backslash-escaped quotes (a 14:11:49 SQL-injection probe, POST → 404): this parser reads it.
    expected = sums(from_parquet)
    expected.update(failed=expected["failed"] + 1, unparseable=expected["unparseable"] - 1)
    assert sums(from_text) == expected
    pd.testing.assert_frame_equal(from_text.tables["traffic"], from_parquet.tables["traffic"])


LOG = """\
10.0.1.80 - - [26/Nov/2019:00:00:07 +0000] "GET /health.html HTTP/1.1" 200 55 "-" "ELB-HealthChecker/2.0"
127.0.0.1 - - [26/Nov/2019:00:10:04 +0000] "GET /index.html?name=William,user=paid HTTP/1.1" 200 91 "-" "Ruby"
127.0.0.1 - frank [26/Nov/2019:01:10:04 +0100] "POST /v1/chat HTTP/1.1" 503 0 "-" "curl/8.0 \\"quoted\\""

44.225.84.206 - - [26/Nov/2019:01:24:18 +0000] "\\x16\\x03\\x01" 400 226 "-" "-"
garbage line with no time
192.168.0.1 - - [26/Nov/2019:02:00:00 +0000] "GET /img.png HTTP/1.0" 304 -
http 2019-11-26T02:23:00.186641Z app/my-lb/50dc6c495c0c9188 192.168.131.39:2817 10.0.0.1:80 0.000 0.001 0.000 \
200 200 34 366 "GET http://www.example.com:80/ping?x=1 HTTP/1.1" "curl/7.46.0" - - arn:aws:elasticloadbalancing:\
us-east-2:123456789012:targetgroup/t/73e2d6bc24d8a067 "Root=1-58337262-36d228ad5d99923122bbe354" "-" "-" 0 \
2019-11-26T02:22:48.364000Z "forward" "-" "-" "10.0.0.1:80" "200" "-" "-"
2019-11-26T02:39:43.945958Z my-lb 192.168.131.39:2817 10.0.0.1:80 0.000073 0.001048 0.000057 404 404 0 29 \
"GET http://www.example.com:80/missing HTTP/1.1" "curl/7.38.0" - -
2019-11-26T02:40:43.945958Z my-lb 192.168.131.39:2817 - -1 -1 -1 504 0 0 0 "- - - " "-" - -
"""


@pytest.fixture()
def text_log(tmp_path) -> Path:
    """Combined, common, ALB and ELB lines, a blank line, a TLS probe and a line of garbage."""
    path = tmp_path / "mixed.log"
    path.write_text(LOG, encoding="utf-8")
    return path


def test_combined_elb_and_alb_lines_parse(text_log):
    frame = read(text_log, health_path="/ping", service="chat")
    detail = frame.tables["requests_detail"].set_index("ts")
    assert frame.rows == 9  # the blank line is not a record
    hour = lambda h: pd.Timestamp(f"2019-11-26T0{h}:00:00Z")  # noqa: E731
    assert detail.loc[hour(0), COUNTS].tolist() == [3, 1, 1, 1, 0]  # +0100 stamp lands at 00:10 UTC
    assert detail.loc[hour(1), COUNTS].tolist() == [1, 0, 0, 0, 1]  # the TLS probe, timed by its [stamp]
    assert detail.loc[hour(2), COUNTS].tolist() == [4, 1, 1, 1, 1]  # 304, ALB /ping, ELB 404, ELB "- - -"
    undated = detail.loc[detail.index.isna(), COUNTS]
    assert undated.iloc[0].tolist() == [1, 0, 0, 0, 1]
    assert frame.tables["traffic"]["requests"].tolist() == [1.0, 0.0, 1.0]
    assert frame.covered == (utc(2019, 11, 26, 0, 0, 7), utc(2019, 11, 26, 2, 39, 43, 945958))


def test_folder_of_gzipped_logs(tmp_path, text_log):
    folder = tmp_path / "logs"
    folder.mkdir()
    for i in range(2):
        (folder / f"part{i}.log.gz").write_bytes(gzip.compress(text_log.read_bytes()))
    frame = read(folder)
    assert frame.rows == 18 and sums(frame)["unparseable"] == 6


def test_text_without_any_request_is_an_error(tmp_path):
    path = tmp_path / "not_a_log.log"
    path.write_text("hello\nworld\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        read(path)
    assert err.value.row == 1 and "no line is an access-log request" in str(err.value)


# --- bad parsed logs --------------------------------------------------------------------------

def write_parquet(path: Path, select: str) -> Path:
    """A Parquet file from a DuckDB SELECT."""
    with duckdb.connect() as con:
        con.execute(f"COPY ({select}) TO '{path}' (FORMAT parquet)")
    return path


def test_missing_columns_are_named(tmp_path):
    path = write_parquet(tmp_path / "p.parquet", f"SELECT client_ip, timestamp, method FROM '{STEP1}' LIMIT 5")
    with pytest.raises(InputError) as err:
        read(path)
    assert err.value.column == "status, path, user_agent" and "p.parquet" in str(err.value)


def test_unparseable_timestamp_names_row_and_column(tmp_path):
    select = ("SELECT * EXCLUDE (file_row_number) REPLACE (CASE WHEN file_row_number = 4 THEN 'yesterday' "
              "ELSE CAST(timestamp AS VARCHAR) END AS timestamp) "
              f"FROM read_parquet('{STEP1}', file_row_number=true) LIMIT 10")
    path = write_parquet(tmp_path / "t.parquet", select)
    with pytest.raises(InputError) as err:
        read(path)
    assert (err.value.row, err.value.column) == (5, "timestamp") and "'yesterday'" in str(err.value)


def test_text_timestamps_and_bad_statuses(tmp_path):
    select = ("SELECT * EXCLUDE (file_row_number) REPLACE (CAST(timestamp AS VARCHAR) AS timestamp, "
              "CASE WHEN file_row_number IN (2, 6) THEN 'OK' ELSE CAST(status AS VARCHAR) END AS status) "
              f"FROM read_parquet('{STEP1}', file_row_number=true) LIMIT 10")
    with pytest.raises(InputErrors) as err:
        read(write_parquet(tmp_path / "s.parquet", select))
    assert [(e.row, e.column) for e in err.value.errors] == [(3, "status"), (7, "status")]


def test_registered_as_access_log():
    assert resolve("access_log") is AccessLogConnector


# --- cost per request of the workload_efficiency day ------------------------------------------

def test_cost_per_request_of_step1_day():
    """CUR day total (PROVENANCE: 89.170633 USD) ÷ successful requests that are not health checks."""
    with duckdb.connect() as con:
        cur = con.execute("SELECT sum(CAST(line_item_unblended_cost AS DECIMAL(38, 10))) FROM read_csv(?, "
                          "all_varchar=true, nullstr='\\N')", [str(STEP1_CUR)]).fetchall()[0][0]
    assert cur.quantize(Decimal("0.000001")) == Decimal("89.170633")
    requests = int(read(STEP1).tables["traffic"]["requests"].sum())
    assert requests == 108492
    per_request = Decimal("89.170633") / Decimal(requests)
    assert per_request.quantize(Decimal("0.000000001")) == Decimal("0.000821910")
    assert (per_request * 1000).quantize(Decimal("0.0001")) == Decimal("0.8219")  # per 1,000 requests


# --- the path filter (METHOD §4: a path filter may narrow the successful requests) ----------------

@pytest.mark.parametrize("path_filter, successful, other", [
    ("re:index|image_file", 120728, 620),       # the lab's "valid" customer requests (status 200 only: 1 is a 304)
    ("/index.html", 34160, 87188),              # exact path, the query string ignored (DuckDB: split_part = /index.html)
])
def test_a_path_filter_narrows_successful_and_counts_the_rest(path_filter, successful, other):
    frame = read(STEP5, service="ordering", path_filter=path_filter)
    detail = frame.tables["requests_detail"]
    assert int(detail["successful"].sum()) == successful and int(detail["other_paths"].sum()) == other
    assert int(detail["successful"].sum() + detail["other_paths"].sum()) == 121348  # the unfiltered successful
    assert int(detail[["successful", "failed", "health_checks", "unparseable", "other_paths"]].sum().sum()) == 280958
    assert frame.tables["traffic"]["requests"].sum() == successful


@pytest.mark.parametrize("bad", ["re:(", "", "re:", 7])
def test_a_bad_path_filter_is_one_error_naming_the_option(bad):
    with pytest.raises(InputError) as caught:
        read(STEP5, service="ordering", path_filter=bad)
    assert "path_filter" in str(caught.value)


def test_a_log_with_no_line_is_an_error(tmp_path):
    """An empty log passed with no word: the service's unit costs were then 'unmeasured' with a
    reason that said no log matched it."""
    path = write_parquet(tmp_path / "empty.parquet", f"SELECT * FROM '{STEP1}' LIMIT 0")
    with pytest.raises(InputError) as err:
        read(path)
    assert "the request log has no line" in str(err.value) and "empty.parquet" in str(err.value)


def test_a_log_outside_the_window_is_named_with_where_its_lines_lie(tmp_path):
    """Every line 400 days after the window: the run gave exit 0 and nothing on stderr."""
    import shutil

    from audit.case import load_case
    from audit.collect import collect_sources
    from audit.pipeline import fit_of
    from tests.paths import FIXTURES

    case_dir = tmp_path / "wa"
    shutil.copytree(FIXTURES / "wa_labs_efficiency", case_dir)
    log = case_dir / "data" / "workload_efficiency_step5_accesslog_2019-11-29.parquet"
    moved = write_parquet(tmp_path / "moved.parquet", f"SELECT * REPLACE (timestamp + INTERVAL 400 DAY AS timestamp) "
                                                      f"FROM '{log}'")
    shutil.copy(moved, log)
    case = load_case(case_dir)
    (misfit,) = [m for m in fit_of(case, collect_sources(case)).misfits if m.kind == "telemetry_outside_window"]
    assert misfit.subject == "telemetry source web-access-log"
    assert "none in the window 2019-11-29 – 2019-12-01: they run from 2021-01-02" in misfit.message
