"""The wheel: every package and data file ships, and the installed tool writes the reports.

The slow test builds a wheel from a copy of the sources, installs it into a fresh virtual
environment that sees neither the repository nor the editable install (third-party libraries
come from this interpreter's site-packages, added by a ``.pth`` line, whose own ``.pth`` files
are not run), and runs ``costaudit run`` on the demo from a folder outside the repository.
"""
from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
PACKAGES: list[str] = SETUPTOOLS["packages"]
PACKAGE_DIR: dict[str, str] = SETUPTOOLS.get("package-dir", {})
PACKAGE_DATA: dict[str, list[str]] = SETUPTOOLS.get("package-data", {})
#: what ``pip wheel`` needs of the source tree, besides the package folders
PROJECT_FILES = ("pyproject.toml", "README.md")


def folder(package: str) -> Path:
    return ROOT / PACKAGE_DIR.get(package, package.replace(".", "/"))


def test_every_package_folder_is_listed():
    listed = {folder(p) for p in PACKAGES}
    tops = {folder(p).relative_to(ROOT).parts[0] for p in PACKAGES}
    found = {init.parent for top in tops for init in (ROOT / top).rglob("__init__.py")
             if "__pycache__" not in init.parts}
    assert not found - listed, f"packages missing from pyproject.toml: {sorted(map(str, found - listed))}"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_data_file_is_package_data(package):
    """Files other than Python in a package folder ship only when package-data names them."""
    base = folder(package)
    data = [p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file()
            and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
            and not any((base / q / "__init__.py").is_file() for q in p.relative_to(base).parents[:-1])]
    patterns = PACKAGE_DATA.get(package, [])
    missing = [d for d in data if not any(fnmatch.fnmatch(d, pattern) for pattern in patterns)]
    assert not missing, f"{package}: not in [tool.setuptools.package-data]: {missing}"


def _copy_sources(to: Path) -> Path:
    to.mkdir()
    for name in PROJECT_FILES:
        shutil.copy2(ROOT / name, to / name)
    for top in sorted({folder(p).relative_to(ROOT).parts[0] for p in PACKAGES}):
        shutil.copytree(ROOT / top, to / top, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return to


def _fresh_venv(at: Path) -> Path:
    """A venv without pip whose only view of this environment is its third-party libraries."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(at)], check=True, timeout=120)
    python = at / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    paths = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (Path(site) / "costaudit_test_deps.pth").write_text("".join(f"{p}\n" for p in paths), encoding="utf-8")
    return python


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


@pytest.mark.slow
def test_installed_wheel_writes_html_and_pdf(tmp_path):
    pytest.importorskip("weasyprint")
    env = _clean_env()
    src = _copy_sources(tmp_path / "src")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                    "-q", "-w", str(tmp_path / "wheel"), str(src)], check=True, env=env, timeout=300)
    wheel, = (tmp_path / "wheel").glob("costaudit-*.whl")
    python = _fresh_venv(tmp_path / "venv")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                    "-q", str(wheel)], check=True, env=env, timeout=300)

    where = subprocess.run(
        [str(python), "-c", "import audit, audit.reporters.html as h; print(audit.__file__); print(h.TEMPLATES)"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert where.returncode == 0, where.stderr
    venv = (tmp_path / "venv").resolve()
    for line in where.stdout.split():
        assert Path(line).resolve().is_relative_to(venv), f"not from the installed wheel: {line}"

    out = tmp_path / "out"
    run = subprocess.run([str(tmp_path / "venv" / "bin" / "costaudit"), "run", str(ROOT / "fixtures" / "demo"),
                          "--out", str(out), "--format", "html,pdf"],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    for name in ("report.html", "report.pdf"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    assert (out / "report.pdf").read_bytes().startswith(b"%PDF")
