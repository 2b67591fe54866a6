"""What users have, read as the plain log it holds (issue 32, items 2, 5, 7): byte-order marks
at a file's start and inside it, UTF-16 with its mark, xz and bzip2 files and tars, zip files,
an archive inside an archive, hard links in a tar, and concatenated tar archives. Each gives
the events of the plain text, or says precisely what was not read; the bomb limit holds."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import sys
import tarfile
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from conftest import SESSIONS
from oomlens import analyze, ranges
from oomlens.sources import decoding

CONSOLE = SESSIONS / "ray2.60-b-rl-actor-oom" / "driver-console.log"
TWO_NODES = SESSIONS / "ray2.58-m-two-node-oom"
BOM = b"\xef\xbb\xbf"


def facts(diagnosis) -> tuple[Counter, tuple]:
    """Each event's kind, pid and numbers, and the verdict: what a way of shipping must keep."""
    events = Counter((e.kind, e.pid, tuple(sorted((k, v) for k, v in e.fields.items() if k.endswith("_bytes")))) for e in diagnosis.events)
    verdict = diagnosis.verdict or {}
    return events, (verdict.get("component"), verdict.get("memory"), verdict.get("root_kind"))


PLAIN = facts(analyze(str(CONSOLE), jobs=1))


def lines_of(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(0, 339), max_size=4, unique=True))
def test_byte_order_marks_at_the_start_and_inside_change_nothing(tmp_path_factory, cuts):
    """`cat` of files that each begin with a mark: a mark at the start and at any line start."""
    lines = lines_of(CONSOLE.read_bytes())
    for cut in sorted(cuts, reverse=True):
        lines[cut] = BOM + lines[cut]
    path = tmp_path_factory.mktemp("bom") / "driver-console.log"
    path.write_bytes(BOM + b"".join(lines))
    assert facts(analyze(str(path), jobs=1)) == PLAIN


def test_a_mark_split_across_reads_is_still_removed():
    """The text arrives in reads of any size: a mark cut between two is removed whole."""
    data = b"a" * 8191 + BOM + b"b\n" + BOM + b"c"
    for step in (1, 2, 3, 8192, 8193):
        text = decoding.Text(_Trickle(data, step))
        assert b"".join(iter(lambda t=text: t.read(5), b"")) == b"a" * 8191 + b"b\nc"


class _Trickle(io.RawIOBase):
    def __init__(self, data: bytes, step: int) -> None:
        self.data, self.step = data, step

    def readable(self) -> bool:
        return True

    def readinto(self, buffer):
        got = self.data[: min(self.step, len(buffer))]
        self.data = self.data[len(got) :]
        buffer[: len(got)] = got
        return len(got)


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_with_its_mark_reads_as_the_text(tmp_path, codec):
    text = CONSOLE.read_text(encoding="utf-8").replace("\n", "\r\n")
    data = text.encode(codec)
    if codec != "utf-16":  # the mark is what tells UTF-16: PowerShell's `>` writes it
        data = "\ufeff".encode(codec) + data
    (tmp_path / "driver-console.log").write_bytes(data)
    diagnosis = analyze(str(tmp_path / "driver-console.log"), jobs=1)
    assert facts(diagnosis) == PLAIN and not diagnosis.problems


def test_a_big_file_read_in_ranges_with_marks_inside_gives_the_whole_file_s_events(tmp_path, monkeypatch):
    """Byte ranges read by several processes: the marks before a range's own part shift it."""
    monkeypatch.setattr(ranges, "RANGE_MIN", 1 << 16)
    text = CONSOLE.read_bytes()
    # each copy its own pids: an event read twice, or lost, at a range's edge shows
    copies = [text.replace(b"1452", f"{2000 + n}".encode()) for n in range(48)]
    (tmp_path / "plain.log").write_bytes(b"".join(copies))
    (tmp_path / "marked.log").write_bytes(b"".join(BOM + line for c in copies for line in lines_of(c)))
    plain, marked = (facts(analyze(str(tmp_path / name), jobs=2)) for name in ("plain.log", "marked.log"))
    assert marked == plain and sum(plain[0].values()) > 48


@pytest.mark.parametrize(
    "name,pack",
    [
        ("driver-console.log.xz", lzma.compress),
        ("driver-console.log.bz2", bz2.compress),
        ("driver-console.log.1", lzma.compress),  # told by its content, not its name
        ("two.xz", lambda d: lzma.compress(d[:5000]) + lzma.compress(d[5000:])),  # `cat a.xz b.xz`
    ],
)
def test_xz_and_bzip2_files_are_read_decompressed(tmp_path, name, pack):
    (tmp_path / name).write_bytes(pack(CONSOLE.read_bytes()))
    diagnosis = analyze(str(tmp_path / name), jobs=1)
    assert facts(diagnosis)[0] == PLAIN[0] and not diagnosis.problems


def test_a_cut_xz_file_says_so_and_keeps_what_came_before(tmp_path):
    data = lzma.compress(CONSOLE.read_bytes())
    (tmp_path / "raylet.out.1.xz").write_bytes(data[: len(data) * 2 // 3])
    [item] = analyze(str(tmp_path / "raylet.out.1.xz"), jobs=1).inputs
    assert item.bytes > 0 and item.problems[0].startswith(f"xz data cut or damaged after {item.bytes} bytes")


@pytest.mark.parametrize("codec,pack", [("xz", lzma.compress), ("bzip2", bz2.compress)])
def test_an_xz_or_bzip2_bomb_is_stopped_as_gzip_s_is(tmp_path, monkeypatch, codec, pack):
    monkeypatch.setattr(decoding, "BOMB_FLOOR", 2 << 20)
    (tmp_path / "bomb.log").write_bytes(pack(b"\n" * (40 << 20)))
    [item] = analyze(str(tmp_path / "bomb.log"), jobs=1).inputs
    assert any("a decompression bomb?" in p for p in item.problems), item.problems
    assert item.bytes < 40 << 20


def session_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def tar_of(files: dict[str, bytes], mode: str = "w") -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode=mode) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def session_facts(diagnosis) -> tuple:
    return facts(diagnosis), sorted((e.kind, e.pid, e.node) for e in diagnosis.events)


FOLDER = session_facts(analyze(str(TWO_NODES), jobs=1))
FILES = session_files(TWO_NODES)


def halves() -> tuple[dict[str, bytes], dict[str, bytes]]:
    """The session's files in two parts, as two nodes' archives would hold them."""
    names = sorted(FILES)
    return {n: FILES[n] for n in names[::2]}, {n: FILES[n] for n in names[1::2]}


@pytest.mark.parametrize("how", ["tar", "tar.gz", "three"])
def test_concatenated_archives_are_all_read(tmp_path, how):
    """`cat a.tar b.tar`, and `tar cz >> all.tar.gz` once per node: every archive's members."""
    first, second = halves()
    if how == "tar":
        data = tar_of(first) + tar_of(second)
    elif how == "tar.gz":
        data = gzip.compress(tar_of(first)) + gzip.compress(tar_of(second))
    else:  # three, with a tar's whole 10 KiB record of zeros between them
        data = tar_of(first) + tar_of({}) + tar_of(second)
    (tmp_path / "all.tar.gz").write_bytes(data)
    diagnosis = analyze(str(tmp_path / "all.tar.gz"), jobs=1)
    assert {i.path.split(":", 1)[1] for i in diagnosis.inputs} == set(FILES)
    assert session_facts(diagnosis) == FOLDER and not diagnosis.problems


def test_damage_between_members_is_told_and_the_members_after_it_read(tmp_path):
    first, second = halves()
    (tmp_path / "s.tar").write_bytes(tar_of(first)[:-1024] + b"x" * 1024 + tar_of(second))
    diagnosis = analyze(str(tmp_path / "s.tar"), jobs=1)
    assert {i.path.split(":", 1)[1] for i in diagnosis.inputs if i.path != str(tmp_path / "s.tar")} == set(FILES)
    assert session_facts(diagnosis) == FOLDER
    [whole] = [i for i in diagnosis.inputs if i.path == str(tmp_path / "s.tar")]
    assert whole.problems == ["archive damaged: 2 block(s) of 512 bytes that are no member's header were passed over"]


@pytest.mark.parametrize("mode,suffix", [("w:xz", ".tar.xz"), ("w:bz2", ".tar.bz2"), ("w:gz", ".tgz")])
def test_an_archive_inside_an_archive_is_read_member_by_member(tmp_path, mode, suffix):
    """A support bundle of each node's .tar.gz (or .tar.xz, .tar.bz2)."""
    first, second = halves()
    bundle = {f"bundle/node-a{suffix}": tar_of(first, mode), f"bundle/node-b{suffix}": tar_of(second, mode)}
    (tmp_path / f"bundle{suffix}").write_bytes(tar_of(bundle, mode))
    diagnosis = analyze(str(tmp_path / f"bundle{suffix}"), jobs=1)
    assert session_facts(diagnosis) == FOLDER and not diagnosis.problems
    assert {i.path.rsplit(":", 1)[1] for i in diagnosis.inputs} == set(FILES)


def test_hard_links_in_a_tar_are_read_once_as_their_target(tmp_path):
    """GNU tar stores a second name of a file as a hard link to the first."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "driver-console.log").write_bytes(CONSOLE.read_bytes())
    os.link(tmp_path / "logs" / "driver-console.log", tmp_path / "logs" / "driver-copy.log")
    with tarfile.open(tmp_path / "s.tar", "w") as tar:
        tar.add(tmp_path / "logs", arcname="logs")
    diagnosis = analyze(str(tmp_path / "s.tar"), jobs=1)
    assert facts(diagnosis) == PLAIN
    [link] = [i for i in diagnosis.inputs if i.bytes == 0]
    assert link.problems == [f"a link to logs/{link.path.rsplit('/', 1)[1].replace('copy', 'console')} in the archive: its text is read there, once"]


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_a_zip_file_is_read_member_by_member(tmp_path, method):
    with zipfile.ZipFile(tmp_path / "logs.zip", "w", method) as zf:
        for name, data in FILES.items():
            zf.writestr(name, data)
    diagnosis = analyze(str(tmp_path / "logs.zip"), jobs=1)
    assert {i.path.split(":", 1)[1] for i in diagnosis.inputs} == set(FILES)
    assert facts(diagnosis) == FOLDER[0] and not diagnosis.problems


def test_a_zip_bomb_is_stopped_at_the_ratio_to_its_declared_compressed_size(tmp_path, monkeypatch):
    monkeypatch.setattr(decoding, "BOMB_FLOOR", 2 << 20)
    with zipfile.ZipFile(tmp_path / "bomb.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("driver.log", b"\n" * (40 << 20))
    [item] = [i for i in analyze(str(tmp_path / "bomb.zip"), jobs=1).inputs if i.path.endswith("driver.log")]
    assert any("a decompression bomb?" in p for p in item.problems), item.problems


def test_garbage_that_begins_as_a_utf16_mark_is_no_utf16(tmp_path):
    """Binary garbage before a log may begin with the bytes of a mark: no line break decodes
    from it, so the log after it is read as UTF-8."""
    (tmp_path / "driver-console.log").write_bytes(b"\xff\xfe\xfd binary garbage \x80\x81\n" + CONSOLE.read_bytes())
    assert facts(analyze(str(tmp_path / "driver-console.log"), jobs=1)) == PLAIN


def test_a_zip_inside_a_tar_and_a_zip_on_standard_input_are_read_member_by_member(tmp_path, monkeypatch):
    """A bundle of per-node zips (a tar of them), and a zip piped in: zipfile seeks, so each
    is spooled to a temporary file first (within the member's bomb limits), then read as a
    zip file on disk is."""
    with zipfile.ZipFile(tmp_path / "node.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in FILES.items():
            zf.writestr(name, data)
    with tarfile.open(tmp_path / "bundle.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "node.zip", arcname="node-1/node.zip")
    bundled = analyze(str(tmp_path / "bundle.tar.gz"), jobs=1)
    assert {i.path.split(":", 2)[2] for i in bundled.inputs if i.path.count(":") == 2} == set(FILES)
    assert facts(bundled) == FOLDER[0] and not bundled.problems
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((tmp_path / "node.zip").read_bytes())))
    piped = analyze("-", jobs=1)
    assert facts(piped) == FOLDER[0] and not piped.problems
