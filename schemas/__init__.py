"""Table schemas (pandera): one model per table, named for one row.

pandera checks each model's column annotations against the series and index types of every
dataframe library it finds installed; for dask (installed here for the trace fan-out) finding them
means importing ``dask.dataframe``, about 1 s in every process that builds a schema, although no
costaudit table is ever a dask frame. :func:`_pandas_tables_only` registers pandera's dask typing
module as "dask not installed" before pandera looks for it, so a schema costs what its pandas
checks cost. It leaves the module alone where it is already loaded (someone else's code in the
same process validating dask frames keeps its types).
"""

from __future__ import annotations

import sys
import types

DASK_TYPING = "pandera.typing.dask"


def _pandas_tables_only() -> None:
    if DASK_TYPING not in sys.modules:
        module = types.ModuleType(DASK_TYPING, "pandera's dask typing, as costaudit's tables see it: "
                                               "no dask frames (schemas/__init__.py)")
        module.DASK_INSTALLED = False  # type: ignore[attr-defined]
        sys.modules[DASK_TYPING] = module


_pandas_tables_only()
