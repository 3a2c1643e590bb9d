"""One set of output files that replaces a folder at once: the machinery shared by the audit's
reports (:mod:`audit.render`) and the review's (:mod:`audit.reporters.review_render`).

The set is written into a temporary folder beside ``out_dir`` (same parent,
``.<name>.<random>.tmp``). Only when every file of it has been written is it swapped in: where
``out_dir`` does not exist, by one ``os.rename``; over a previous run's folder, by one
``renameat2(RENAME_EXCHANGE)`` on Linux (the old folder then lies at the temporary name and is
removed) or, where the C library, kernel or filesystem lacks it, by two renames (the old folder
aside as ``.<name>.<random>.old.tmp``, the new one in, the old one removed; put back if the second
rename fails). The new set replaces the old one whole. If anything fails before the swap,
``out_dir`` is as it was and the temporary folder is removed (STYLE habit 9). SIGINT and SIGTERM
wait while folders are made, swapped or removed (their handler runs once that step is over).

Because the set replaces the folder, ``out_dir`` must be new, empty, or a folder of such outputs
(:func:`check_target`): one holding anything else is refused, never deleted. A symbolic link to a
folder is followed. Modes: every file 0o644; folders as ``mkdir`` makes them, and a replaced
``out_dir`` keeps its mode. An OSError while writing becomes a :class:`~audit.errors.ReportError`;
anything else passes unchanged (after the clean-up).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from audit.errors import ReportError

#: output name → True when it is a folder of files
Outputs = Mapping[str, bool]
FILE_MODE = 0o644
_HELD = (signal.SIGINT, signal.SIGTERM)
_AT_FDCWD, _RENAME_EXCHANGE = -100, 2
#: errors of renameat2 that mean "not here" (no such call, flag or filesystem support), not "failed"
_NO_EXCHANGE = {errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP}
#: names a folder of outputs may hold beside them: stale temporaries of older versions (which
#: staged inside the folder) and the Finder's index
_TOLERATED = re.compile(r"\..+\.tmp|\.DS_Store")
_SHOWN = 5


def write_set(out_dir: Path, outputs: Outputs, write: Callable[[Path], list[str]]) -> list[Path]:
    """Run ``write(staging)`` (it writes the set into the empty folder ``staging`` and returns the
    names written, relative) and swap the set in as the whole content of ``out_dir``; the paths."""
    out_dir = Path(out_dir)
    real = check_target(out_dir, outputs)
    made: list[Path] = []
    staging: Path | None = None
    try:
        with signals_held():
            _make_parents(real.parent, made)
            staging = _staging(real)
        names = write(staging)
        for name in names:
            os.chmod(staging / name, FILE_MODE)
        with signals_held():
            _swap(staging, real)
            staging = None
    except BaseException as exc:
        with signals_held():
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
            _remove_empty(made)
        if isinstance(exc, OSError):
            raise ReportError(f"{out_dir}: the reports were not written ({exc}); "
                              f"{out_dir} is as it was") from exc
        raise
    return [out_dir / name for name in names]


def check_target(out_dir: Path, outputs: Outputs) -> Path:
    """The folder the set will replace: ``out_dir`` made absolute (where it links to, for a
    symbolic link). ReportError when it is not a folder, or holds anything not in ``outputs``."""
    out_dir = Path(out_dir)
    real = Path(os.path.realpath(out_dir) if out_dir.is_symlink() else os.path.abspath(out_dir))
    if not os.path.lexists(real):
        return real
    if not real.is_dir():
        raise ReportError(f"{out_dir}: is a file, not a folder; the reports go into a folder "
                          "(give --out a new folder, or one a previous run wrote)")
    try:
        foreign = _foreign(real, outputs)
    except OSError as exc:
        raise ReportError(f"{out_dir}: could not be read ({exc}); the reports were not written") from exc
    if foreign:
        more = f" and {len(foreign) - _SHOWN} more" if len(foreign) > _SHOWN else ""
        raise ReportError(f"{out_dir}: holds files no report writes ({', '.join(foreign[:_SHOWN])}{more}); "
                          "the reports replace the whole folder, so give --out a new or empty folder, "
                          "or one a previous run wrote")
    return real


def _foreign(folder: Path, outputs: Outputs) -> list[str]:
    """What in ``folder`` is not an output: any other name, a folder where a file is written, a
    folder inside a folder of files."""
    found: list[str] = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        is_dir = entry.is_dir(follow_symlinks=False)
        if entry.name not in outputs:
            if not _TOLERATED.fullmatch(entry.name):
                found.append(entry.name)
        elif is_dir and not outputs[entry.name]:
            found.append(entry.name + "/")
        elif is_dir:
            found += sorted(f"{entry.name}/{e.name}/" for e in os.scandir(entry.path)
                            if e.is_dir(follow_symlinks=False))
    return found


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait while the block runs: caught, then raised again once it is over
    (with the handlers that were there). Only the main thread can hold them; elsewhere, a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous: dict[int, object] = {}
    try:
        for held in _HELD:
            previous[held] = signal.signal(held, lambda number, _frame: caught.append(number))
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)  # type: ignore[arg-type]
        for number in dict.fromkeys(caught):
            signal.raise_signal(number)


def _make_parents(folder: Path, made: list[Path]) -> None:
    """Make ``folder`` and its missing parents, recording each one made (outermost first)."""
    missing = [p for p in (folder, *folder.parents) if not os.path.lexists(p)]
    for path in reversed(missing):
        os.mkdir(path)
        made.append(path)


def _remove_empty(made: list[Path]) -> None:
    """Remove the folders :func:`_make_parents` made, innermost first, where they are still empty."""
    for path in reversed(made):
        try:
            path.rmdir()
        except OSError:
            return


def _staging(real: Path) -> Path:
    """A new, empty folder beside ``real``: ``.<name>.<random>.tmp``, with ``real``'s mode if it exists."""
    path = _fresh_name(real, "tmp")
    os.mkdir(path, 0o777)
    if real.is_dir():
        os.chmod(path, real.stat().st_mode & 0o7777)
    return path


def _fresh_name(real: Path, suffix: str) -> Path:
    """A name beside ``real`` that nothing has: ``.<name>.<8 random hex>.<suffix>``."""
    while True:
        path = real.parent / f".{real.name}.{os.urandom(4).hex()}.{suffix}"
        if not os.path.lexists(path):
            return path


def _swap(staging: Path, real: Path) -> None:
    """Put ``staging`` at ``real`` in one step and remove what was there. Raises only before the
    swap, with ``real`` as it was."""
    if not os.path.lexists(real):
        os.rename(staging, real)
        return
    if not real.is_dir() or real.is_symlink():
        raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(real))
    if exchange(staging, real):
        shutil.rmtree(staging, ignore_errors=True)  # the previous folder, now at the temporary name
        return
    aside = _fresh_name(real, "old.tmp")
    os.rename(real, aside)
    try:
        os.rename(staging, real)
    except BaseException:
        os.rename(aside, real)
        raise
    shutil.rmtree(aside, ignore_errors=True)


def exchange(first: Path, second: Path) -> bool:
    """Swap two paths in one step with Linux's ``renameat2(RENAME_EXCHANGE)``; False where that is
    not available (another system, an old C library or kernel, a filesystem without it)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        call = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    call.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    call.restype = ctypes.c_int
    if call(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in _NO_EXCHANGE:
        return False
    raise OSError(code, os.strerror(code), str(second))
