"""SIGINT and SIGTERM during a command: an exception that unwinds it, so its clean-up runs.

Python's own SIGTERM handling ends the process at once, leaving whatever was half written; its
SIGINT raises KeyboardInterrupt, which click reports as "Aborted!" with exit 1. Inside
:func:`interruptible` both raise :class:`Interrupted` instead: the stage that is writing removes
its temporary folder on the way out (audit/render.py), and the command prints one line and exits
128 + the signal number, as a shell reports it (130 for Ctrl-C, 143 for SIGTERM). Every command
runs inside it (audit/cli/common.py ``reports_errors``); ``run``, ``review`` and ``whatif`` also say
what became of their output folder. A signal the
process was started ignoring (SIGINT in a shell's background job) stays ignored. The handlers
that were there are put back when the block ends.
"""
from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """The run got SIGINT or SIGTERM. A BaseException, so ``except Exception`` does not swallow it."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    @property
    def exit_code(self) -> int:
        """128 + the signal number: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


@contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT and SIGTERM raise :class:`Interrupted` while the block runs (main thread only).

    A library the signal reaches inside may put an error of its own in place of :class:`Interrupted`:
    DuckDB's Python client runs the handler while a query runs, cancels the query and raises
    ``RuntimeError: Query interrupted``, and a connector may turn that into an input error. So once a
    signal has come, whatever error leaves the block leaves it as :class:`Interrupted` (a block that
    ends without an error caught the interruption on purpose)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def _raise(signum: int, _frame) -> None:
        received.append(signum)
        raise Interrupted(signum)

    previous: dict[int, object] = {}
    try:
        for wanted in SIGNALS:
            if signal.getsignal(wanted) is not signal.SIG_IGN:
                previous[wanted] = signal.signal(wanted, _raise)
        try:
            yield
        except Interrupted:
            raise
        except BaseException:
            if received:
                raise Interrupted(received[0]) from None
            raise
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)  # type: ignore[arg-type]
