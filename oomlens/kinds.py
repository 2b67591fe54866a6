"""Kinds: what each event kind means after its grammar made it, read from one table
(data/kinds.toml). Folding, correlation, the verdict and every output read a kind's
entry here, so a new message family adds one entry, not a line in each stage.

`Kinds` is an ordered, immutable set of entries; `shipped()` is the table oomlens ships,
and `extend` makes a new set with more (or replaced) entries, the way a dialect extends
its base tables: nothing global changes."""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

from .data import load
from .text import compile_template

ROLES = ("memory", "failure", "reading")
TASK_HEADERS = ("any", "raiser", "own_pid", "not_caller", "own_stack")


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind's entry (the keys are explained at the top of data/kinds.toml)."""

    name: str
    label: str
    role: str
    labels: tuple[tuple[str, str], ...] = ()  # (device, label) where the device changes the name
    memory: str | None = None
    cascade_s: float = 600.0
    identity: tuple[str, ...] | None = None
    also_identity: tuple[tuple[str, ...], ...] = ()
    numberless: tuple[str, ...] | None = None
    partial: bool = False
    waited: str | None = None
    task_header: str = "any"
    phase: bool = True
    burst: bool = False
    counts: str | None = None
    component: str | None = None
    explain: str = "failure"
    readings: str | None = None
    marker: tuple[str, str] = ("circle", "#333333")
    summary: str = "[{label}|a failure]{on_node}{at}"
    details: str = ""
    evidence: str = ""
    intended: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    weak: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    opens_first: bool = False
    raised_within: int = 0
    echoed_within: int = 0
    traceback_of: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    traceback_reach: int = 0
    lead_named: bool = False
    ended: str = "{label}{at}"
    own_remedies: bool = False  # only remedies that name it as their root_kind
    host_settings: tuple[str, ...] = ()  # a setting its file printed that puts its memory on the host
    host_fields: tuple[tuple[str, Any], ...] = ()  # and the fields that then say so
    what: str = ""  # what it means, in the contract's words (DESIGN.md's table of kinds)
    contract: tuple[tuple[str, Any], ...] = ()  # (field, its type) a consumer may rely on: `fields`

    @property
    def folded(self) -> bool:
        """Are reports of one occurrence folded into one event? (Readings never are.)"""
        return self.identity is not None or bool(self.also_identity)

    @property
    def failure(self) -> bool:
        return self.role in ("memory", "failure")

    def on_purpose(self, fields: Mapping[str, Any]) -> bool:
        """Did this occurrence end a process on purpose (`intended`: ray.kill, Ctrl-C, SIGTERM)?"""
        return any(fields.get(name) in values for name, values in self.intended)

    def traceback_of_one(self, fields: Mapping[str, Any]) -> bool:
        """Is this report a traceback cut before its exception (`traceback_of`)?"""
        return any(fields.get(name) in values for name, values in self.traceback_of)

    def is_weak(self, fields: Mapping[str, Any]) -> bool:
        """Is this occurrence weak evidence (`weak`: a traceback cut before its exception)?"""
        return any(fields.get(name) in values for name, values in self.weak)


def kind_of(name: str, entry: Mapping[str, Any]) -> Kind:
    """A Kind from a table entry, checked: a typo in a key or a value fails here, with its name."""
    known = {f.name for f in fields(Kind)} - {"name", "contract"} | {"fields"}
    unknown = set(entry) - known
    if unknown:
        raise ValueError(f"kind {name!r}: unknown key(s) {', '.join(sorted(unknown))}")
    if "label" not in entry or "role" not in entry:
        raise ValueError(f"kind {name!r}: needs a label and a role")
    values = dict(entry)
    if "fields" in values:
        values["contract"] = tuple(values.pop("fields").items())
        for field, spec in values["contract"]:
            field_schema(spec, f"kind {name!r}, field {field!r}")  # a type it does not know fails here
    if "host_fields" in values:
        values["host_fields"] = tuple(values["host_fields"].items())
    for key in ("identity", "numberless", "marker", "host_settings"):
        if values.get(key) is not None:
            values[key] = tuple(values[key])
    if "labels" in values:
        unknown_devices = set(values["labels"]) - set(devices())
        if unknown_devices:
            raise ValueError(f"kind {name!r}: labels for unknown device(s) {', '.join(sorted(unknown_devices))}")
        values["labels"] = tuple(values["labels"].items())
    for key in ("intended", "weak", "traceback_of"):
        if key in values:
            values[key] = tuple((name, tuple(wanted)) for name, wanted in values[key].items())
    if "also_identity" in values:
        values["also_identity"] = tuple(tuple(names) for names in values["also_identity"])
    kind = Kind(name=name, **values)
    if kind.role not in ROLES:
        raise ValueError(f"kind {name!r}: role {kind.role!r} is none of {', '.join(ROLES)}")
    if kind.memory not in (None, "host", "gpu"):
        raise ValueError(f"kind {name!r}: memory is 'host' or 'gpu'")
    if kind.task_header not in TASK_HEADERS:
        raise ValueError(f"kind {name!r}: task_header {kind.task_header!r} is none of {', '.join(TASK_HEADERS)}")
    for template in (kind.summary, kind.details, kind.evidence, kind.ended):
        compile_template(template)
    if kind.counts is not None and kind.counts == name:
        raise ValueError(f"kind {name!r}: counts itself")
    return kind


# A contract field's type (kinds.toml `[kind.fields]`) as JSON Schema: null where a log did
# not print it, unless the type ends in "!"; `$defs` are those of the shipped schema
FIELD_TYPES: dict[str, dict[str, Any]] = {
    "bytes": {"$ref": "#/$defs/bytes"},
    "bytes!": {"type": "integer", "minimum": 0},
    "signed_bytes": {"type": ["integer", "null"]},  # a size left that may be below zero (vLLM's KV cache that did not fit)
    "integer": {"$ref": "#/$defs/nullable_integer"},
    "integer!": {"type": "integer"},
    "string": {"$ref": "#/$defs/nullable_string"},
    "string!": {"type": "string"},
    "fraction": {"type": ["number", "null"], "minimum": 0},
    "boolean": {"type": "boolean"},
    "true": {"const": True},
    "strings": {"type": "array", "items": {"type": "string"}},
}


def field_schema(spec: str | Mapping[str, Any], where: str = "field") -> dict[str, Any]:
    """The JSON Schema of one contract field: a type's name, or a table of `type`, `doc`
    (its description), `one_of` (the values it takes, or null) and, for `type = "list"`,
    `items` (the fields of each object in it)."""
    if isinstance(spec, str):
        spec = {"type": spec}
    unknown = set(spec) - {"type", "doc", "one_of", "items"}
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    kind = spec.get("type")
    if kind == "list":
        items = spec.get("items") or {}
        required = [name for name, item in items.items() if isinstance(item, str) and item.endswith("!")]
        item: dict[str, Any] = {"type": "object"} | ({"required": required} if required else {})
        item["properties"] = {name: field_schema(sub, f"{where}.{name}") for name, sub in items.items()}
        schema: dict[str, Any] = {"type": "array", "items": item}
    elif kind in FIELD_TYPES:
        schema = dict(FIELD_TYPES[kind])
    else:
        raise ValueError(f"{where}: type {kind!r} is none of {', '.join([*FIELD_TYPES, 'list'])}")
    if "one_of" in spec:
        schema = {"enum": [*spec["one_of"], None]}
    if "doc" in spec:
        schema["description"] = spec["doc"]
    return schema


def sizes_in_contract(name: str, fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` with a size below zero made None (a size no memory has: veRL's `-1` for a
    device it could not query, a number a log garbled), unless the kind's contract types the
    field `signed_bytes` (vLLM's KV cache left, below zero where it did not fit)."""
    below = [k for k, v in fields.items() if type(v) is int and v < 0 and k.endswith("_bytes")]
    if not below:  # nearly every reading: the fields as they are, no copy (this runs once a memory line)
        return fields
    signed = _signed(name)
    return fields | {k: None for k in below if k not in signed}


@functools.cache
def _signed(name: str) -> frozenset[str]:
    kind = shipped().get(name)
    return frozenset(f for f, spec in kind.contract if (spec if isinstance(spec, str) else spec.get("type")) == "signed_bytes") if kind else frozenset()


def field_doc(name: str, spec: str | Mapping[str, Any]) -> str:
    """A contract field as DESIGN.md's table of fields lists it: its name, and its doc or values."""
    if isinstance(spec, str):
        return f"`{name}`"
    said = spec.get("doc") or (", ".join(f"`{v}`" for v in spec["one_of"]) if "one_of" in spec else "")
    return f"`{name}` ({said})" if said else f"`{name}`"


def read_kinds(text: str) -> list[Kind]:
    """The entries of a kinds table written in TOML (the shipped one's form)."""
    return [kind_of(name, entry) for name, entry in tomllib.loads(text).items()]


class Kinds(Mapping[str, Kind]):
    """Kind entries by name, in the table's order (the order failures are listed in)."""

    def __init__(self, entries: Iterable[Kind]) -> None:
        self._by_name = {k.name: k for k in entries}
        self.names = tuple(self._by_name)
        self.failures = frozenset(k.name for k in self._by_name.values() if k.failure)
        self.memory_failures = frozenset(k.name for k in self._by_name.values() if k.role == "memory")
        self.memory_lines = frozenset(k.name for k in self._by_name.values() if k.role == "reading")
        for kind in self._by_name.values():
            if kind.counts is not None and kind.counts not in self._by_name:
                raise ValueError(f"kind {kind.name!r}: counts {kind.counts!r}, which has no entry")

    def __getitem__(self, name: str) -> Kind:
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def __repr__(self) -> str:
        return f"Kinds({', '.join(self.names)})"

    def order(self, name: str) -> int:
        return self.names.index(name)

    def label(self, name: str, device: str | None = None) -> str:
        """How a person calls the kind; of a device, as its entry's `labels` name it there
        (an NPU's allocator failure is no "CUDA OOM")."""
        entry = self._by_name.get(name)
        if entry is None:
            return name
        return dict(entry.labels).get(device, entry.label) if device is not None else entry.label

    def label_across(self, name: str, devices: Iterable[str | None]) -> str:
        """One label for the kind's events on these devices (a legend, a filter's option)."""
        labels = dict.fromkeys(self.label(name, d) for d in devices)
        return " / ".join(labels) or self.label(name)

    def tag(self, name: str, device: str | None) -> str:
        """The kind's name, with the device beside it where the device changes its label."""
        return f"{name} ({device})" if device is not None and self.label(name, device) != self.label(name) else name

    def extend(self, *entries: Kind) -> Kinds:
        """These kinds and `entries` (an entry of a known name replaces it in place)."""
        merged = dict(self._by_name)
        merged.update((k.name, k) for k in entries)
        return Kinds(merged.values())


@functools.cache
def devices() -> dict[str, dict[str, str]]:
    """The accelerators an event's `device` names (data/devices.toml), and how each is told."""
    return load("devices.toml")


def device_values(device: str | None, gpu: int | None, memory: str | None = None) -> dict[str, str]:
    """What a template may write of an event's device: `device_name`, `device_unit`,
    `device_memory` (data/devices.toml; "unknown" when the event names none), `on_device`
    (" on NPU 3"; "" when no index was printed) and `memory_name`: the
    memory that ran out as a person calls it ("host memory", else the device's)."""
    table = devices()
    words = table.get(device or "unknown", table["unknown"])
    on = f" on {words['unit']} {gpu}" if gpu is not None else ""  # no index printed: the device is named by its memory
    named = "host memory" if memory == "host" else words["memory"]
    return {"device_name": words["name"], "device_unit": words["unit"], "device_memory": words["memory"], "on_device": on, "memory_name": named}


@functools.cache
def shipped() -> Kinds:
    """The kinds oomlens ships (data/kinds.toml): the kinds of this release in contract v1's open vocabulary."""
    return Kinds(kind_of(name, entry) for name, entry in load("kinds.toml").items())
