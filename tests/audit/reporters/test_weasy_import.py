"""weasyprint imported without the ldconfig / gcc / ld processes of ctypes' find_library."""
from __future__ import annotations

import subprocess
import sys

from audit.reporters import weasy
from tests.paths import ROOT

COUNT = """
import ctypes.util, sys
started = []
sys.addaudithook(lambda event, args: started.append(args[0]) if event == 'subprocess.Popen' else None)
search = ctypes.util.find_library
from audit.reporters.weasy import weasyprint
module = weasyprint()
assert ctypes.util.find_library is search, 'find_library not restored'
document = module.HTML(string='<p>x</p>').write_pdf()
assert document.startswith(b'%PDF'), document[:8]
print(len(started))
"""


def test_importing_weasyprint_starts_no_process():
    done = subprocess.run([sys.executable, "-c", COUNT], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "0"


def test_a_library_only_find_library_knows_gets_the_ordinary_import(monkeypatch):
    calls = []

    def import_module(name):
        calls.append(name)
        if len(calls) == 1:
            print("WeasyPrint could not import some external libraries")  # what weasyprint prints
            raise OSError("cannot load library 'libpango-1.0-0'")
        return "the module"

    monkeypatch.setattr(weasy.importlib, "import_module", import_module)
    monkeypatch.setattr(weasy, "_forget", lambda package: calls.append(f"forget {package}"))
    weasy.weasyprint.cache_clear()
    try:
        assert weasy.weasyprint() == "the module"
    finally:
        weasy.weasyprint.cache_clear()
    assert calls == ["weasyprint", "forget weasyprint", "weasyprint"]


def test_forget_drops_a_half_made_package():
    sys.modules["zz_half"] = sys.modules["zz_half.sub"] = object()  # type: ignore[assignment]
    sys.modules["zz_halfway"] = marker = object()  # type: ignore[assignment]
    weasy._forget("zz_half")
    assert "zz_half" not in sys.modules and "zz_half.sub" not in sys.modules
    assert sys.modules.pop("zz_halfway") is marker
