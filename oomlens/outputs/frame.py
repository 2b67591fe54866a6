"""The events as a pandas DataFrame: one row per event, for notebooks and dashboards."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..diagnosis import Diagnosis
from ..events import COMPONENTS

if TYPE_CHECKING:
    import pandas

# to_frame() columns and dtypes; every `*_bytes` column is a size field of the contract
FRAME_COLUMNS: dict[str, str] = {
    "id": "string",
    "kind": "category",
    "time": "datetime64[ns]",
    "time_inferred": "bool",
    "time_latest": "datetime64[ns]",
    "node": "string",
    "pid": "Int64",
    "actor": "string",
    "method": "string",
    "rank": "Int64",
    "gpu": "Int64",
    "component": "category",
    "memory": "category",
    "incident": "string",
    "incident_role": "category",
    "path": "string",
    "line": "Int64",
    "end_line": "Int64",
    "label": "string",
    "node_used_bytes": "Int64",
    "node_total_bytes": "Int64",
    "usage_fraction": "Float64",
    "threshold": "Float64",
    "requested_bytes": "Int64",
    "total_bytes": "Int64",
    "free_bytes": "Int64",
    "allocated_bytes": "Int64",
    "reserved_bytes": "Int64",
    "process_bytes": "Int64",
    "used_bytes": "Int64",
    "anon_rss_bytes": "Int64",
    "total_vm_bytes": "Int64",
}
CATEGORIES = {  # closed vocabularies of the contract, every value a category even when unused (kinds: the diagnosis's)
    "component": COMPONENTS,
    "memory": ("host", "gpu"),
    "incident_role": ("root", "cascade"),
}


def frame(diagnosis: Diagnosis) -> pandas.DataFrame:
    """One row per event, sizes in bytes, times as datetimes: for notebooks and dashboards.

    The columns and their dtypes are the same for every diagnosis (FRAME_COLUMNS), even
    an empty one, so code written against one run works on the next. pandas is
    imported here, not with oomlens."""
    import pandas as pd

    role: dict[int, tuple[str | None, str]] = {}
    for incident in diagnosis.incidents:
        role[id(incident.root)] = (incident.id, "root")
        role.update((id(e), (incident.id, "cascade")) for e in incident.cascade)
    rows: dict[str, list[Any]] = {name: [] for name in FRAME_COLUMNS}
    for event in diagnosis.events:
        incident_id, place = role.get(id(event), (None, None))
        values = {
            "id": event.id,
            "kind": event.kind,
            "time": event.time,
            "time_inferred": event.time_inferred,
            "time_latest": event.time_latest,
            "node": event.node,
            "pid": event.pid,
            "actor": event.actor,
            "method": event.method,
            "rank": event.rank,
            "gpu": event.gpu,
            "component": event.component,
            "memory": event.memory,
            "incident": incident_id,
            "incident_role": place,
            "path": event.source.path,
            "line": event.source.line,
            "end_line": event.source.end_line,
            "label": event.fields.get("label"),
        }
        for name in FRAME_COLUMNS:
            rows[name].append(values[name] if name in values else event.fields.get(name))
    categories = {**CATEGORIES, "kind": diagnosis.kinds.names}
    columns = {}
    for name, dtype in FRAME_COLUMNS.items():
        if dtype == "datetime64[ns]":
            columns[name] = pd.to_datetime(pd.Series(rows[name], dtype="object"), format="ISO8601").astype("datetime64[ns]")
        elif dtype == "category":
            columns[name] = pd.Series(rows[name], dtype=pd.CategoricalDtype(list(categories[name])))
        else:
            columns[name] = pd.Series(rows[name], dtype=dtype)
    return pd.DataFrame(columns)
