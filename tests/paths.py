"""Where the shared real data lives: ../shared/data beside the checkout (COSTAUDIT_SHARED overrides)."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("COSTAUDIT_SHARED", ROOT.parent / "shared"))
DATA = SHARED / "data"
