"""The focus-data-toolkit environment the FOCUS 1.3 and conformance tests use.

The toolkit (PyPI ``focus-data-toolkit``, pure Python, no network at run time) generates
provider-realistic FOCUS 1.2 / 1.3 data for AWS, GCP and Azure and lints a file against the FOCUS
column model. It lives in an environment of its own, ``.venv-focus`` (the Makefile's
``.venv-focus/.ok-<version>``, which ``make test`` builds); ``COSTAUDIT_FOCUS_VENV`` overrides the
place. The tests never import it: they run its command line and :mod:`focus_toolkit_lint`.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.paths import ROOT

VERSION = "0.14.1"
PACKAGE = f"focus-data-toolkit=={VERSION}"
VENV = Path(os.environ.get("COSTAUDIT_FOCUS_VENV", ROOT / ".venv-focus"))
LINT = Path(__file__).with_name("focus_toolkit_lint.py")


def ensure_toolkit() -> Path:
    """The toolkit's interpreter, installing the pinned package first when the environment lacks it
    (the same commands as the Makefile's target)."""
    python, marker = VENV / "bin" / "python", VENV / f".ok-{VERSION}"
    if not (marker.exists() and python.exists()):
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", PACKAGE],
                       check=True)
        marker.touch()
    return python


def generate(provider: str, version: str, out: Path, rows: int = 300, seed: int = 1303) -> dict[str, Path]:
    """Generate one provider's FOCUS data (seeded); returns {"cost_and_usage": path, ["contract_commitment": path]}."""
    python = ensure_toolkit()
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(python.with_name("focus-toolkit")), "generate", "--provider", provider,
                    "--focus-version", version, "--rows", str(rows), "--seed", str(seed), "--out", str(out)],
                   check=True, capture_output=True, text=True)
    tag = version.replace(".", "_")
    found = {"cost_and_usage": out / f"focus_{tag}_cost_and_usage_{provider}.csv"}
    commitments = out / f"focus_{tag}_contract_commitment_{provider}.csv"
    if commitments.exists():
        found["contract_commitment"] = commitments
    return found


def lint(dataset: str, paths: list[Path]) -> dict[str, dict]:
    """Each file's distinct violations of the FOCUS column model: path -> {"rows", "violations"} (or
    {"error"} for a file the toolkit cannot read)."""
    python = ensure_toolkit()
    run = subprocess.run([str(python), str(LINT), dataset, *map(str, paths)], capture_output=True, text=True,
                         timeout=600)
    if run.returncode != 0:
        raise AssertionError(f"the FOCUS lint failed ({run.returncode}):\n{run.stderr[-3000:]}")
    return json.loads(run.stdout)
