"""What the two scratches (:mod:`connectors.billing.scratch_bigquery`, :mod:`connectors.billing.scratch_athena`)
share: a frame's columns typed for the engine, and the frame as Parquet bytes."""
from __future__ import annotations

from typing import Mapping

import pandas as pd

from connectors.errors import InputError


def column_type(types: Mapping[str, str], dtype, where: str, column: str) -> str:
    """The engine's type (``types``: pandas dtype name → type) of a column; the split's tables hold only
    integers, booleans and text."""
    name = str(dtype)
    if name not in types:
        raise InputError(where, f"column {column} of type {name} cannot be written", column=column,
                         expected="integers, booleans or text")
    return types[name]


def parquet_bytes(frame: pd.DataFrame) -> bytes:
    """``frame`` as one Parquet file, its index dropped."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), buffer)
    return buffer.getvalue()
