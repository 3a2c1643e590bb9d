"""mypy against a committed baseline: fail on any error that the baseline does not list.

    python .ci/mypy_check.py            # run mypy (config in pyproject.toml), compare
    python .ci/mypy_check.py --update   # rewrite the baseline from the current errors

Errors are compared without their line numbers (an edit above an old error does not make it new),
as a multiset (a second copy of an old error in the same file is new).
"""
from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

BASELINE = Path(__file__).with_name("mypy-baseline.txt")
LINE = re.compile(r"^(?P<path>[^:\s]+\.py):\d+(?::\d+)?: (?P<kind>error): (?P<text>.*)$")


def current() -> list[str]:
    """The errors of a mypy run, one normalised line each."""
    run = subprocess.run([sys.executable, "-m", "mypy"], capture_output=True, text=True)
    found = [f"{m['path']}: {m['text']}" for m in map(LINE.match, run.stdout.splitlines()) if m]
    if run.returncode not in (0, 1) or (run.returncode == 1 and not found):
        sys.exit(f"mypy failed to run:\n{run.stdout}{run.stderr}")
    return sorted(found)


def main(argv: list[str]) -> int:
    errors = current()
    if "--update" in argv:
        BASELINE.write_text("".join(e + "\n" for e in errors))
        print(f"mypy baseline: {len(errors)} errors written to {BASELINE}")
        return 0
    known = Counter(BASELINE.read_text().splitlines()) if BASELINE.exists() else Counter()
    new = Counter(errors) - known
    fixed = sum((known - Counter(errors)).values())
    for line in sorted(new.elements()):
        print(f"new: {line}")
    print(f"mypy: {len(errors)} errors, {sum(new.values())} new against the baseline, {fixed} fixed")
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
