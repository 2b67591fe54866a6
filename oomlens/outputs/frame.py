"""The diagnosis as pandas DataFrames, for notebooks and dashboards: one row per event, or one row per memory reading."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..correlate import component_of
from ..diagnosis import Diagnosis
from ..events import COMPONENTS

if TYPE_CHECKING:
    import pandas

# to_frame() columns and dtypes; every `*_bytes` column is a size field of the contract.
# No column holds pandas' NA (the nullable Int64/Float64/string dtypes): plotly express
# cannot group by it (a discrete colour, a line per group, a symbol, a facet) and older
# plotly could not even serialise it. A number the log may leave out is a float64 (NaN when
# missing; bytes are whole numbers, exact up to 8 PiB); a name or an identity (pid, rank,
# GPU) is an object column of str or int values, None when missing, so that plotly
# colours it one trace per value, not along a scale; a closed vocabulary is a category.
FRAME_COLUMNS: dict[str, str] = {
    "id": "object",
    "kind": "category",
    "time": "datetime64[ns]",
    "time_inferred": "bool",
    "time_latest": "datetime64[ns]",
    "node": "object",
    "pid": "object",
    "actor": "object",
    "method": "object",
    "rank": "object",
    "gpu": "object",
    "component": "category",
    "memory": "category",
    "incident": "object",
    "incident_role": "category",
    "path": "object",
    "line": "int64",
    "end_line": "int64",
    "label": "object",
    "node_used_bytes": "float64",
    "node_total_bytes": "float64",
    "usage_fraction": "float64",
    "threshold": "float64",
    "requested_bytes": "float64",
    "total_bytes": "float64",
    "free_bytes": "float64",
    "allocated_bytes": "float64",
    "reserved_bytes": "float64",
    "process_bytes": "float64",
    "used_bytes": "float64",
    "anon_rss_bytes": "float64",
    "total_vm_bytes": "float64",
}
CATEGORIES = {  # closed vocabularies of the contract, every value a category even when unused (kinds: the diagnosis's)
    "component": COMPONENTS,
    "memory": ("host", "gpu"),
    "incident_role": ("root", "cascade"),
}


def frame(diagnosis: Diagnosis) -> pandas.DataFrame:
    """One row per event, sizes in bytes, times as datetimes: for notebooks and dashboards.

    The columns and their dtypes are the same for every diagnosis (FRAME_COLUMNS), even
    an empty one, so code written against one run works on the next, and they are dtypes
    plotly express plots and colours by as they are (`px.line(frame, x="time",
    y="allocated_bytes", color="pid")`: one line per process). pandas is imported here,
    not with oomlens."""
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
            # a time a log printed past what nanoseconds hold (years 1677 to 2262: 9999-12-31) is not known here
            times = pd.to_datetime(pd.Series(rows[name], dtype="object"), format="ISO8601", errors="coerce")
            columns[name] = times.where(times.between(pd.Timestamp.min, pd.Timestamp.max)).astype("datetime64[ns]")
        elif dtype == "category":
            columns[name] = pd.Series(rows[name], dtype=pd.CategoricalDtype(list(categories[name])))
        elif dtype == "float64":
            columns[name] = pd.Series([math.nan if v is None else v for v in rows[name]], dtype="float64")
        else:
            columns[name] = pd.Series(rows[name], dtype=dtype)
    return pd.DataFrame(columns)


# to_frame("readings") columns and dtypes: one row per memory reading, whatever the
# framework called the number (veRL's allocated, EasyR1's used, Ray's Top-10, the kernel's
# anon-rss): `metric` says which, `bytes` holds it, so one plot works for every run
READING_COLUMNS: dict[str, str] = {
    "time": "datetime64[ns]",
    "node": "object",
    "pid": "object",
    "process": "object",
    "rank": "object",
    "gpu": "object",
    "component": "category",
    "memory": "category",
    "metric": "category",
    "bytes": "float64",
    "total_bytes": "float64",
    "step": "float64",
    "label": "object",
    "event": "object",
}
METRICS = ("used", "allocated", "reserved", "uss", "anon_rss", "total")  # timeline.Sample.metric


def readings_frame(diagnosis: Diagnosis) -> pandas.DataFrame:
    """The memory readings as a tidy long frame: one row per reading (time, node, pid,
    process, rank, GPU, component, memory, metric, bytes, the total it is out of, and the
    training step where the log prints one), the same columns and dtypes for every run, so
    `px.line(frame, x="time", y="bytes", color="process", line_dash="metric")` plots any run."""
    import pandas as pd

    by_id = {event.id: event for event in diagnosis.events}
    rows: dict[str, list[Any]] = {name: [] for name in READING_COLUMNS}
    for sample in diagnosis.timeline:
        event = by_id.get(sample.event)
        component = (event.component if event else None) or component_of(sample.process)
        values = {**sample.to_dict(), "component": component, "step": event.fields.get("step") if event else None}
        for name in READING_COLUMNS:
            rows[name].append(values.get(name))
    categories = {**CATEGORIES, "metric": METRICS}
    columns: dict[str, pandas.Series] = {}
    for name, dtype in READING_COLUMNS.items():
        if dtype == "datetime64[ns]":
            times = pd.to_datetime(pd.Series(rows[name], dtype="object"), format="ISO8601", errors="coerce")
            columns[name] = times.where(times.between(pd.Timestamp.min, pd.Timestamp.max)).astype("datetime64[ns]")
        elif dtype == "category":
            known = list(categories[name])
            known += sorted({v for v in rows[name] if v is not None and v not in known})  # a metric a newer reader adds
            columns[name] = pd.Series(rows[name], dtype=pd.CategoricalDtype(known))
        elif dtype == "float64":
            columns[name] = pd.Series([math.nan if v is None or isinstance(v, bool) else float(v) for v in rows[name]], dtype="float64")
        else:
            columns[name] = pd.Series(rows[name], dtype=dtype)
    return pd.DataFrame(columns)
