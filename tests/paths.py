"""Where test inputs live: the repository's fixtures, the tests' own data, and the shared real data
in ../shared/data beside the checkout (COSTAUDIT_SHARED overrides)."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
DEMO = FIXTURES / "demo"
TEST_DATA = ROOT / "tests" / "data"
SHARED = Path(os.environ.get("COSTAUDIT_SHARED", ROOT.parent / "shared"))
DATA = SHARED / "data"
