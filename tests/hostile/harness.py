"""The hostile-input harness: a case around one source, the CLI run in a child process whose peak
RSS is measured, and the checks every hostile input must pass (exit 1, one named error, no
traceback, bounded memory).

Hostile files are built in ``tmp_path`` at test time (never committed): large ones are made by
repeating one compressed gzip member, so a 4 GiB stream of zeros costs a few megabytes on disk.
"""
from __future__ import annotations

import gzip
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.paths import ROOT

RSS_BOUND_MB = 2048
"""Every hostile input is answered within 2 GiB of resident memory."""
HEADER = ("BillingAccountId,ProviderName,ServiceName,ChargeCategory,ChargePeriodStart,ChargePeriodEnd,"
          "BilledCost,EffectiveCost,ListCost,BillingCurrency,PricingQuantity,Tags,Id\n")
RUNNER = """
import atexit, os, resource, sys
def _peak():
    # VmHWM is the high-water mark of this process's own memory: ru_maxrss would carry the RSS of
    # the parent it was forked from across exec (Linux keeps the larger of the two).
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        with open("/proc/self/status") as status:
            peak = next(int(l.split()[1]) for l in status if l.startswith("VmHWM:"))
    except (OSError, StopIteration, ValueError):
        pass
    with open(os.environ["COSTAUDIT_PEAK_FILE"], "w") as out:
        out.write(str(peak))
atexit.register(_peak)
sys.argv = ["costaudit", *sys.argv[1:]]
from audit.cli import main
main()
"""


def focus_row(effective: str = "1.00", quantity: str = "1", tags: str = '"{""team"": ""ml""}"', row: int = 1) -> str:
    """One FOCUS CSV line in the window of :func:`write_case`."""
    return (f"acct-1,AWS,Amazon EC2,Usage,2024-09-01 00:00:00,2024-09-01 01:00:00,1.25,{effective},1.50,USD,"
            f"{quantity},{tags},{row}\n")


def write_focus(path: Path, *rows: str) -> Path:
    """A FOCUS CSV with ``rows`` (one good line when none is given)."""
    path.write_text(HEADER + "".join(rows or (focus_row(),)))
    return path


def write_case(folder: Path, billing: str | Path = "good.csv", extra: str = "", head: str = "") -> Path:
    """A case folder: one FOCUS billing source (a good one is written when ``billing`` is the default)
    plus the ``extra`` TOML; ``head`` lines go into [case]."""
    folder.mkdir(parents=True, exist_ok=True)
    if billing == "good.csv":
        write_focus(folder / "good.csv")
    (folder / "case.toml").write_text(f'''[case]
name = "hostile"
window = ["2024-09-01", "2024-09-02"]
currency = "USD"
loaded_rate = 150
step = "1h"
{head}
[[billing]]
name = "bill"
format = "focus"
path = "{billing}"
{extra}''')
    return folder


def telemetry(fmt: str, path: str) -> str:
    """The TOML of one telemetry source."""
    return f'[[telemetry]]\nname = "t"\nformat = "{fmt}"\npath = "{path}"\n'


def profile(fmt: str, path: str) -> str:
    """The TOML of one profiles source and its service."""
    return (f'[[profiles]]\nname = "p"\nformat = "{fmt}"\npath = "{path}"\nservice = "s"\n'
            '[services.s]\nnamespace = "x"\n')


def gzip_repeated(path: Path, block: bytes, times: int, level: int = 1) -> Path:
    """A gzip file that inflates to ``block`` × ``times``: one member written ``times`` times."""
    member = gzip.compress(block, compresslevel=level)
    with open(path, "wb") as out:
        for _ in range(times):
            out.write(member)
    return path


@dataclass
class Outcome:
    """What one command did."""

    rc: int
    stdout: str
    stderr: str
    peak_mb: int
    seconds: float

    def line(self) -> str:
        """The report line: exit code, peak RSS, time, last line of stderr."""
        last = self.stderr.strip().splitlines()[-1] if self.stderr.strip() else ""
        return f"rc={self.rc} peak={self.peak_mb} MB {self.seconds:.1f}s {last[:200]}"


def costaudit(*args, cwd: Path, timeout: int = 300, address_space_mb: int | None = None) -> Outcome:
    """Run ``costaudit ARGS`` in a child process; its peak RSS comes from getrusage at exit.
    ``address_space_mb`` caps the child's address space (RLIMIT_AS), as a small machine would."""
    peak_file = cwd / ".peak"
    env = {**os.environ, "COSTAUDIT_PEAK_FILE": str(peak_file), "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", RUNNER, *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=timeout, preexec_fn=_limit(address_space_mb))
    seconds = time.monotonic() - started
    peak = int(peak_file.read_text()) // 1024 if peak_file.exists() else -1
    return Outcome(done.returncode, done.stdout, done.stderr, peak, seconds)


def _limit(megabytes: int | None):
    """A preexec_fn capping the address space, or None."""
    if megabytes is None:
        return None

    def apply() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (megabytes << 20, megabytes << 20))
    return apply


def assert_named_error(outcome: Outcome, names: str | Path, *words: str) -> None:
    """Exit 1, one ``costaudit: error:`` line naming ``names`` (and every one of ``words``),
    no traceback, peak RSS under the bound."""
    assert outcome.rc == 1, outcome.line() + "\n" + outcome.stderr[-3000:]
    assert "Traceback" not in outcome.stderr, outcome.stderr[-3000:]
    errors = [ln for ln in outcome.stderr.splitlines() if ln.startswith("costaudit: error:")]
    assert len(errors) == 1, outcome.stderr[-3000:]
    assert str(names) in errors[0], errors[0]
    for word in words:
        assert word in errors[0], errors[0]
    assert 0 < outcome.peak_mb < RSS_BOUND_MB, outcome.line()
