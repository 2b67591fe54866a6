"""The census (docs/census/*.toml): every message a row says the software prints parses to
the kind and fields the row says, and docs/census/census.md is the table of every row.

`python tests/test_census.py` writes census.md anew from the rows."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

import oomlens

CENSUS = Path(__file__).resolve().parent.parent / "docs" / "census"
COLUMNS = ("source", "where", "versions", "format", "unit", "kind")


def rows() -> list[tuple[str, dict[str, Any]]]:
    """(area, row) for every row of every area file, in file and row order."""
    return [(path.stem, row) for path in sorted(CENSUS.glob("*.toml")) for row in tomllib.loads(path.read_text(encoding="utf-8"))["row"]]


def _cell(column: str, value: Any) -> str:
    text = " ".join(str(value).split()).replace("|", "\\|")
    if column == "kind":
        return text or "(no event)"
    return f"`{text}`" if column == "format" and "`" not in text else text


def table() -> str:
    """census.md: one table of every row, with how many rows, sources and areas there are."""
    found = rows()
    sources = {row["source"] for _, row in found}
    head = [
        "# The census: every message that tells of memory or of a process's end",
        "",
        f"{len(found)} rows from {len(sources)} sources in {len({a for a, _ in found})} areas; written by `python tests/test_census.py`",
        "from the TOML files beside it (README.md there says how a row is read and checked).",
        "",
        "| area | " + " | ".join(COLUMNS) + " |",
        "|---" * (len(COLUMNS) + 1) + "|",
    ]
    body = [f"| {area} | " + " | ".join(_cell(c, row.get(c, "")) for c in COLUMNS) + " |" for area, row in found]
    return "\n".join(head + body) + "\n"


def _value(event: oomlens.Event, key: str) -> Any:
    return getattr(event, key) if hasattr(event, key) and key != "fields" else event.fields.get(key, KeyError)


@pytest.mark.parametrize(("area", "row"), rows(), ids=[f"{a}:{r['source']}:{i}" for i, (a, r) in enumerate(rows())])
def test_every_row_s_sample_parses_to_what_the_row_says(area, row):
    events = oomlens.parse_text(row["sample"])
    if not row["kind"]:
        assert not events, f"a look-alike of {area} made {[e.kind for e in events]}"
        return
    of_kind = [e for e in events if e.kind == row["kind"]]
    assert of_kind, f"no {row['kind']} in {[e.kind for e in events]}"
    wanted = row.get("fields", {})
    assert any(all(_value(e, k) == v for k, v in wanted.items()) for e in of_kind), [{k: _value(e, k) for k in wanted} for e in of_kind]


def test_every_row_names_where_it_was_read():
    for area, row in rows():
        assert all(row.get(c, "").strip() for c in ("source", "where", "versions", "format", "sample")), (area, row)
        assert "kind" in row, (area, row)


def test_the_table_is_written_from_the_rows():
    assert (CENSUS / "census.md").read_text(encoding="utf-8") == table(), "run: python tests/test_census.py"


if __name__ == "__main__":
    (CENSUS / "census.md").write_text(table(), encoding="utf-8")
    sys.exit(0)
