"""Telemetry indexed by node and interval for the GPU split (audit/gpusplit.py): each table looked
up once per node and interval rather than filtered per line, and where telemetry saw each node
(audit/gpu_presence.py)."""
from __future__ import annotations

from collections import defaultdict
from typing import Mapping

import pandas as pd

from audit.gpu_presence import Presence
from audit.gpuunits import gpu_key, text_key
from audit.normalised import labelled_pods
from audit.table_rows import column_values, ranks, rows_by_node_interval, table_rows


def index_activity(activity: pd.DataFrame) -> Mapping:
    """(node, interval) -> its activity rows, in GPU order (index, then UUID; ties in table order)."""
    if not len(activity):
        return {}
    return rows_by_node_interval(activity, [ranks(activity["gpu"], gpu_key), ranks(activity["uuid"], text_key)])


def index_unmeasured(unmeasured: pd.DataFrame | None) -> dict:
    """(node, interval) -> {(gpu, uuid): metric} of GPU-intervals whose samples were all excluded."""
    index: defaultdict = defaultdict(dict)
    if unmeasured is None:
        return index
    for row in table_rows(unmeasured):
        index[(row.node, row.ts)].setdefault((row.gpu, row.uuid), row.metric)
    return index


def index_labelled(activity: pd.DataFrame) -> dict[str, set]:
    """node -> the (namespace, pod) pairs DCGM labels name on it in any interval of the window."""
    known: defaultdict = defaultdict(set)
    for node, namespace, pod in labelled_pods(activity).itertuples(index=False, name=None):
        known[node].add((namespace, pod))
    return dict(known)


def index_requests(requests: pd.DataFrame) -> Mapping:
    """(node, interval) -> its GPU requests of at least one GPU, in table order."""
    if not len(requests):
        return {}
    return rows_by_node_interval(requests.loc[(requests["gpus"] > 0).to_numpy(dtype=bool)], [])


def node_presence(activity: pd.DataFrame, samples: Mapping, excluded: Mapping) -> Presence:
    """Where telemetry saw each node: the intervals its GPUs have a DCGM sample, kept (``samples``:
    :func:`index_activity`) or excluded (``excluded``: :func:`index_unmeasured`), and their metrics."""
    named = activity[["node", "source"]].drop_duplicates() if len(activity) else activity
    series = [*zip(column_values(named["node"]), column_values(named["source"]))] if len(named) else []
    series += [(node, metric) for (node, _), metrics in excluded.items() for metric in metrics.values()]
    return Presence.of([*samples, *excluded], series)
