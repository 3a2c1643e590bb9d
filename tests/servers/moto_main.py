"""``python -m tests.servers.moto_main``: moto's server, its Athena result files written as Athena writes them.

moto's Athena runs no SQL: a query's rows are seeded (``tests/servers/athena.py``), and moto writes
them to the output location as the query's CSV file, as Athena does, the first time the results
are asked for. It puts each value between double quotes as it is; Athena doubles a quote inside a
value (RFC 4180), so a row holding a JSON tag map is no CSV in moto's file. This entry point
replaces that one writer by one that writes Athena's form, then runs moto's own ``main``.
"""
from __future__ import annotations

from moto.athena import models
from moto.s3.models import s3_backends
from moto.s3.utils import bucket_and_name_from_url
from moto.server import main


def store_as_athena(self, exec_id: str) -> None:
    """moto's ``_store_query_result_in_s3`` with Athena's quoting: a quote in a value doubled, NULL
    (no VarCharValue) an empty field, a newline after each row (the header row is the first)."""
    execution = self.executions.get(exec_id)
    location = (execution.config or {}).get("OutputLocation") if execution else None
    if not location:
        return
    bucket, key = bucket_and_name_from_url(location)
    lines = []
    for row in self.query_results[exec_id].rows:
        cells = ['"' + cell["VarCharValue"].replace('"', '""') + '"' if "VarCharValue" in cell else ""
                 for cell in row["Data"]]
        lines.append(",".join(cells) + "\n")
    try:
        s3_backends[self.account_id][self.partition].put_object(
            bucket_name=bucket, key_name=key, value="".join(lines).encode("utf-8"))
    except Exception:  # noqa: BLE001 (as moto's own writer: no bucket, no file)
        pass


models.AthenaBackend._store_query_result_in_s3 = store_as_athena

if __name__ == "__main__":
    main()
