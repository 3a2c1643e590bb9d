"""schemas/__init__.py: building costaudit's schemas does not import dask.dataframe."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.paths import ROOT

BUILD_EVERY_SCHEMA = textwrap.dedent("""
    import importlib, inspect, pkgutil, sys
    import pandas as pd
    import pandera.pandas as pa
    import schemas
    built = 0
    for info in pkgutil.iter_modules(schemas.__path__):
        module = importlib.import_module(f"schemas.{info.name}")
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, pa.DataFrameModel) \\
                    and value.__module__ == module.__name__:
                value.to_schema()
                built += 1
    from schemas.usage import GpuInterval
    try:
        GpuInterval.validate(pd.DataFrame({"x": [1]}), lazy=True)
    except pa.errors.SchemaErrors:
        pass
    print(built, "dask.dataframe" in sys.modules)
""")


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=True)
    return done.stdout.strip()


def test_every_schema_builds_and_validates_without_importing_dask():
    built, dask_loaded = run(BUILD_EVERY_SCHEMA).split()
    assert int(built) >= 10
    assert dask_loaded == "False"


def test_a_process_that_already_has_pandera_dask_typing_keeps_it():
    code = ("import pandera.typing.dask as d; import schemas, sys; "
            "print(sys.modules['pandera.typing.dask'] is d, d.DASK_INSTALLED)")
    assert run(code) == "True True"
