"""The import floors, read from the source with ``ast``: no upward import, no cycle, no long module.

Floors: schemas (0) ← connectors and collector (1) ← audit (2) ← audit.cli (3). A module may
import its own floor and the floors below, with two further rules: connectors never import
collector, and collector imports only schemas (and the stdlib / third parties). The audit stages
never import audit.cli; ``audit.__main__`` (``python -m audit``) stands with the CLI. Every import
statement counts, at module level or inside a function, ``import x`` and ``from x import y``
alike, relative ones resolved (names looked up with ``importlib`` at run time are not seen).
The modules are those of the packages pyproject.toml ships; each test is parametrised by module,
so a failure names it.

The audit stages (``STAGES``) never import each other: what they share lives in modules that are
not stages (``SHARED``), and only the pipeline (with the CLI and the billing summary) imports a stage.
"""
from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 500
#: package → its folder, as pyproject.toml declares them (audit.templates installs from templates/)
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
PACKAGES = {p: SETUPTOOLS.get("package-dir", {}).get(p, p.replace(".", "/")) for p in SETUPTOOLS["packages"]}
#: layer → the layers its modules may import
ALLOWED = {
    "schemas": {"schemas"},
    "connectors": {"schemas", "connectors"},
    "collector": {"schemas", "collector"},
    "audit": {"schemas", "connectors", "collector", "audit"},
    "audit.cli": {"schemas", "connectors", "collector", "audit", "audit.cli"},
}
HEAVY = ("torch", "weasyprint", "pandas", "duckdb", "numpy", "isal", "boto3", "dask", "distributed")
#: the audit stages, in pipeline order: none imports another, only STAGE_CALLERS import them
STAGES = ("audit.collect", "audit.normalise", "audit.classify", "audit.adjust", "audit.prices", "audit.gpusplit",
          "audit.attribute", "audit.unit_costs", "audit.reconcile", "audit.rank", "audit.evidence", "audit.render")
#: what stages share, and the only modules of audit (beside the helper packages below) a stage may import
SHARED = ("audit", "audit.case", "audit.catalogue", "audit.money", "audit.errors", "audit.buckets", "audit.collected", "audit.plan",
          "audit.plan_input",
          "audit.normalised", "audit.lines", "audit.services", "audit.ledger", "audit.result", "audit.fit",
          "audit.gpuunits", "audit.table_rows", "audit.split_sql", "audit.split_limbs", "audit.overlap",
          "audit.line_facts", "audit.gpu_lines", "audit.gpu_over", "audit.gpu_timeless", "audit.gpumig",
          "audit.mismatches", "audit.billing_words", "audit.capacity_blocks", "audit.gpu_index",
          "audit.gpu_presence", "audit.gpu_turns", "audit.gpu_unpaid")
#: packages of helpers a stage may use: trace analyzers (evidence), reporters (render)
STAGE_HELPERS = ("audit.trace", "audit.reporters", "audit.pricing")
#: the modules that may import a stage: the pipeline (the order), the CLI, `costaudit billing`'s summary
#: and `costaudit init --from`'s billing facts (both classify lines as the audit does)
STAGE_CALLERS = ("audit.pipeline", "audit.billing_summary", "audit.discover.billing")


def modules() -> dict[str, Path]:
    """Dotted name → file of every module of our packages."""
    out = {}
    for package, folder in PACKAGES.items():
        for path in sorted((ROOT / folder).glob("*.py")):
            out[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return out


MODULES = modules()


def layer(name: str) -> str:
    """The floor a module stands on: audit.cli (with ``python -m audit``), or its top-level package."""
    if name in ("audit.cli", "audit.__main__") or name.startswith("audit.cli."):
        return "audit.cli"
    return name.split(".")[0]


def _ours(name: str) -> str | None:
    """The module of ours that importing ``name`` loads last (its longest known prefix), if any."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _base(module: str, node: ast.ImportFrom) -> str:
    """The absolute name ``from <base> import …`` refers to, relative levels resolved."""
    if not node.level:
        return node.module or ""
    package = module if MODULES[module].stem == "__init__" else module.rpartition(".")[0]
    parts = package.split(".")
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


@cache
def imports(module: str) -> tuple[tuple[str, int], ...]:
    """(module of ours, line) for every import statement anywhere in ``module``."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"), str(MODULES[module]))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _base(module, node)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        found += [(t, node.lineno) for t in map(_ours, targets) if t and t != module]
    return tuple(dict.fromkeys(found))


def graph() -> dict[str, set[str]]:
    return {m: {t for t, _ in imports(m)} for m in MODULES}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(edges)))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def path_back(edges: dict[str, set[str]], start: str, within: set[str]) -> list[str]:
    """One shortest import path start → … → start inside a component (breadth first)."""
    previous, frontier = {}, [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(edges[v] & within):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if w not in previous:
                    previous[w] = v
                    following.append(w)
        frontier = following
    return [start]


# ---- the tests --------------------------------------------------------------------------------

def test_the_packages_are_found():
    assert {"schemas", "connectors", "connectors.billing", "connectors.telemetry", "connectors.profiles",
            "collector", "audit", "audit.cli", "audit.trace", "audit.reporters", "audit.templates"} <= set(PACKAGES)
    assert {"schemas.billing", "connectors.base", "collector", "audit.pipeline", "audit.cli"} <= set(MODULES)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_upward_import(module):
    allowed = ALLOWED[layer(module)]
    wrong = [f"line {line}: {target}" for target, line in imports(module) if layer(target) not in allowed]
    assert not wrong, (f"{module} (floor {layer(module)}) imports outside {sorted(allowed)}: "
                       + "; ".join(wrong))


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_cycle(module):
    edges = graph()
    component = next((c for c in cycles(edges) if module in c), None)
    if component is None:
        return
    loop = path_back(edges, module, set(component))
    lines = dict(imports(module))
    pytest.fail(f"{module} is in an import cycle of {len(component)} modules: {', '.join(component)}; "
                f"one loop: {' -> '.join(loop)} ({module} line {lines.get(loop[1])})")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_is_short(module):
    count = len(MODULES[module].read_text(encoding="utf-8").splitlines())
    assert count <= MAX_LINES, f"{module} ({MODULES[module].relative_to(ROOT)}) has {count} lines (> {MAX_LINES})"


@pytest.mark.parametrize("template", sorted(p.name for p in (ROOT / "templates").glob("*.j2")))
def test_template_is_short(template):
    """A template is held to the modules' limit too (report.html.j2 had 520 lines: its options and
    evidence sections are partials it includes)."""
    count = len((ROOT / "templates" / template).read_text(encoding="utf-8").splitlines())
    assert count <= MAX_LINES, f"templates/{template} has {count} lines (> {MAX_LINES})"


def test_importing_the_cli_loads_no_heavy_library():
    code = (f"import sys, audit.cli\nprint(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


def _in_package(name: str, packages) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def test_the_stages_are_found():
    missing = [s for s in STAGES + SHARED if s not in MODULES]
    assert not missing, f"stage or shared modules named in tests/test_floors.py but not found: {missing}"


@pytest.mark.parametrize("stage", STAGES)
def test_no_stage_imports_another_stage(stage):
    wrong = [f"line {line}: {target}" for target, line in imports(stage) if target in STAGES]
    assert not wrong, (f"stage {stage} imports another stage: " + "; ".join(wrong)
                       + f" (put what stages share in one of {', '.join(SHARED)}, or a new shared module)")
    unknown = [f"line {line}: {target}" for target, line in imports(stage)
               if layer(target) == "audit" and target not in SHARED and not _in_package(target, STAGE_HELPERS)]
    assert not unknown, (f"stage {stage} imports audit modules that are neither shared nor helpers: "
                         + "; ".join(unknown) + " (add a shared module to SHARED in tests/test_floors.py)")


@pytest.mark.parametrize("module", sorted(set(MODULES) - set(STAGES)))
def test_only_the_pipeline_imports_stages(module):
    if module in STAGE_CALLERS or layer(module) == "audit.cli":
        return
    wrong = [f"line {line}: {target}" for target, line in imports(module) if target in STAGES]
    assert not wrong, (f"{module} imports a stage: " + "; ".join(wrong)
                       + f" (only {', '.join(STAGE_CALLERS)} and audit.cli may)")
