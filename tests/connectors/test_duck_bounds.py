"""DuckDB sessions run within a memory limit and spill under the cache, never into the working directory."""
from __future__ import annotations

import os

import pytest

from connectors import duck
from schemas.errors import UsageError


def test_session_has_memory_limit_and_spill_folder_under_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COSTAUDIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("COSTAUDIT_DUCKDB_MEMORY", "300MB")
    with duck.session() as con:
        limit = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
        folder = con.execute("SELECT current_setting('temp_directory')").fetchone()[0]
    assert limit.replace(" ", "").upper().startswith(("286.1MIB", "300MB", "286MIB"))
    assert folder == str(tmp_path / "cache" / "duckdb-tmp")
    assert (tmp_path / "cache" / "duckdb-tmp").is_dir()


def test_default_limit_is_at_most_4gb_and_half_the_memory(monkeypatch):
    monkeypatch.delenv("COSTAUDIT_DUCKDB_MEMORY", raising=False)
    mb = int(duck.default_memory_limit().removesuffix("MB"))
    physical_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    assert 256 <= mb <= 4096 and mb <= max(256, physical_mb // 2)


def test_spill_goes_to_the_cache_folder_not_cwd(tmp_path, monkeypatch):
    """A sort larger than the memory limit spills into the cache folder; nothing lands in the cwd."""
    monkeypatch.setenv("COSTAUDIT_CACHE", str(tmp_path / "cache"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    with duck.session() as con:
        duck.bound(con, "64MB")
        con.execute("SET threads = 1")
        con.execute("SET preserve_insertion_order = false")
        con.execute("CREATE TABLE t AS SELECT range AS i, md5(range::VARCHAR) AS h FROM range(3000000)")
        n = con.execute("SELECT count(*) FROM (SELECT h FROM t ORDER BY h)").fetchone()[0]
        assert duck.spilled_bytes(con) >= 0
    assert n == 3_000_000
    assert not any(work.iterdir())


@pytest.mark.parametrize("given", ["4 gigs", "0", "abc", "-1GB", "0MB", "4GB; SET threads=1"])
def test_a_memory_limit_that_is_no_size_is_named(monkeypatch, given):
    """Before: DuckDB's parser error as a traceback ('4 gigs', '0', 'abc'), or '-1GB' read as no limit."""
    monkeypatch.setenv("COSTAUDIT_DUCKDB_MEMORY", given)
    with pytest.raises(UsageError) as caught:
        duck.default_memory_limit()
    assert str(caught.value) == f"COSTAUDIT_DUCKDB_MEMORY={given!r}: expected a positive size such as 4GB, 512MiB or 80%"


@pytest.mark.parametrize("given, read", [("4GB", "4GB"), (" 512 MiB ", "512MiB"), ("1.5gb", "1.5gb"), ("4G", "4G"),
                                         ("80%", "80%")])  # DuckDB's own spellings
def test_a_memory_limit_is_read_as_written(monkeypatch, given, read):
    monkeypatch.setenv("COSTAUDIT_DUCKDB_MEMORY", given)
    assert duck.default_memory_limit() == read


def test_a_cache_that_cannot_hold_the_spill_folder_is_named(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("COSTAUDIT_CACHE", str(blocker))
    with pytest.raises(UsageError) as caught:
        with duck.session():
            pass
    assert str(caught.value).startswith(f"COSTAUDIT_CACHE: the spill folder {blocker / 'duckdb-tmp'} cannot be made (")
    assert str(caught.value).endswith("); expected a writable folder")
