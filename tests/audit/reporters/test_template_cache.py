"""The report templates' compiled code is kept in a private folder and reused while the templates
are unchanged (audit/reporters/compiled.py); a folder others may write to is never used."""
from __future__ import annotations

import os
import stat

import pytest
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from audit.reporters import compiled
from audit.reporters.html import OPTIONS, TEMPLATE, TEMPLATES


def env(cache) -> Environment:
    return Environment(loader=FileSystemLoader(str(TEMPLATES)), undefined=StrictUndefined,
                       bytecode_cache=cache, **OPTIONS)


def test_the_folder_follows_costaudit_cache_then_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("COSTAUDIT_CACHE", str(tmp_path / "c"))
    assert compiled.cache_folder() == tmp_path / "c" / "templates"
    monkeypatch.delenv("COSTAUDIT_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert compiled.cache_folder() == tmp_path / "x" / "costaudit" / "templates"


def test_compiled_templates_are_kept_private_and_reused(tmp_path, monkeypatch):
    folder = tmp_path / "cache" / "templates"
    env(compiled.template_cache(OPTIONS, folder)).get_template(TEMPLATE)
    files = sorted(folder.iterdir())
    assert files and stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert not [f for f in files if f.name.endswith(".tmp")]

    def refuse(*args, **kwargs):
        raise AssertionError("compiled again")

    fresh = env(compiled.template_cache(OPTIONS, folder))
    monkeypatch.setattr(fresh, "compile", refuse)
    fresh.get_template(TEMPLATE)  # from the folder, not compiled


def test_other_settings_compile_afresh(tmp_path):
    folder = tmp_path / "templates"
    env(compiled.template_cache(OPTIONS, folder)).get_template(TEMPLATE)
    before = set(folder.iterdir())
    other = {**OPTIONS, "trim_blocks": False}
    Environment(loader=FileSystemLoader(str(TEMPLATES)), bytecode_cache=compiled.template_cache(other, folder),
                **other).get_template(TEMPLATE)
    assert set(folder.iterdir()) > before


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX modes")
def test_a_folder_others_may_write_to_or_a_link_is_not_used(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert compiled.template_cache(OPTIONS, shared) is None
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    assert compiled.template_cache(OPTIONS, tmp_path / "link") is None
    (tmp_path / "file").write_text("x")
    assert compiled.template_cache(OPTIONS, tmp_path / "file") is None
    assert compiled.template_cache(OPTIONS, real) is not None
