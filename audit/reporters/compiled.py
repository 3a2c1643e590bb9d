"""The report templates' compiled code, kept between runs (jinja2's bytecode cache).

Compiling report.html.j2 and its partials takes 0.2-0.3 s, a tenth of the PDF step, in every
process. jinja2 can keep the compiled code of a template in a folder and reuse it while the
template's source is unchanged (it stores the source's checksum beside the code). The folder is
``$COSTAUDIT_CACHE/templates`` (else ``$XDG_CACHE_HOME/costaudit/templates``, else
``~/.cache/costaudit/templates``), as the other caches of costaudit.

The cache holds code that jinja2 loads and runs, so it is used only in a folder the user owns that
no one else may write to (made with mode 0700 where missing); anywhere else, or where the folder
cannot be made, templates are compiled in the process as before. A file is written under a temporary
name and renamed (jinja2's own), so a run that stops half way leaves no partial file. A file's name
is keyed by the template's path, jinja2's version and the environment's settings, so a change of
either compiles afresh.
"""
from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path


def cache_folder() -> Path:
    """``$COSTAUDIT_CACHE/templates``, else ``$XDG_CACHE_HOME/costaudit/templates``, else
    ``~/.cache/costaudit/templates``."""
    if os.environ.get("COSTAUDIT_CACHE"):
        return Path(os.environ["COSTAUDIT_CACHE"]) / "templates"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "costaudit" / "templates"


def private_folder(folder: Path) -> bool:
    """Whether ``folder`` exists (made with mode 0700 if it did not), is a real folder (not a link)
    owned by this user, and no one else may write to it."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(folder)
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return False
    return not hasattr(os, "getuid") or info.st_uid == os.getuid()


def template_cache(options: dict, folder: Path | None = None):
    """A jinja2 bytecode cache in ``folder`` (:func:`cache_folder`) keyed by ``options`` too; None
    where the folder is not private."""
    import jinja2
    from jinja2 import FileSystemBytecodeCache

    folder = cache_folder() if folder is None else folder
    if not private_folder(folder):
        return None
    salt = f"{jinja2.__version__}|{sorted(options.items())!r}"

    class KeyedCache(FileSystemBytecodeCache):
        def get_cache_key(self, name: str, filename: str | None = None) -> str:
            key = super().get_cache_key(name, filename)
            return hashlib.sha256(f"{key}|{salt}".encode()).hexdigest()

    return KeyedCache(str(folder), "costaudit-%s.jinja")
