"""Importing weasyprint without the processes its library lookup starts.

weasyprint opens GObject, Pango, HarfBuzz and fontconfig through cffi, trying several names for
each (``libpango-1.0-0``, ``pango-1.0``, ``libpango-1.0.so.0`` …). For a name that is not a file
the dynamic loader finds, cffi asks ``ctypes.util.find_library``, which on Linux runs
``ldconfig -p``, then gcc and ld: 54 processes at every import, 0.3–0.7 s of the PDF step, each
started from a process that may hold gigabytes of audit tables.

:func:`weasyprint` imports it with ``find_library`` answering "not found" at once, so each
library is opened by the first of weasyprint's names that the loader resolves itself (the
``.so.N`` name on Linux, ``.dylib`` on macOS, ``.dll`` on Windows). Where that finds nothing (a
library only a compiler's search path knows), the import is made again the ordinary way, and what
weasyprint prints of the first failure is not shown.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import io
import sys
from types import ModuleType


@functools.cache
def weasyprint() -> ModuleType:
    """The weasyprint module, imported once; ImportError / OSError as weasyprint raises them."""
    try:
        with _no_library_search(), contextlib.redirect_stdout(io.StringIO()):
            return importlib.import_module("weasyprint")
    except (ImportError, OSError):
        _forget("weasyprint")
        return importlib.import_module("weasyprint")


@contextlib.contextmanager
def _no_library_search():
    """``ctypes.util.find_library`` finds nothing while the block runs (and is restored after)."""
    import ctypes.util

    found = ctypes.util.find_library
    ctypes.util.find_library = _not_found
    try:
        yield
    finally:
        ctypes.util.find_library = found


def _not_found(name: str) -> None:
    return None


def _forget(package: str) -> None:
    """Drop a package's modules that a failed import left half made."""
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]
