"""Hostile sources (issue 17): tar member names, deep trees, holes, unreadable files, file
names with control characters and links to a folder above: each is read or told in one
line, never a hang, a traceback or a silent skip."""

from __future__ import annotations

import builtins
import gzip
import io
import json
import os
import subprocess
import sys
import tarfile

from oomlens.sources.walk import MAX_DEPTH
from oomlens.watch import Watcher

LINE = (
    b"(raylet) [2025-04-02 15:02:00,117 E 135782 135782] (raylet) node_manager.cc:3069: 1 Workers (tasks / actors) "
    b"killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: "
    b"351e406b196f66bb45eaad02a3b8b4725babfa8cc12949432f7ad7d8, IP: 10.95.143.76) over the last time period.\n"
)


def parse(*args: str, stdin: bytes | None = None, cwd: str | None = None) -> tuple[dict, list[str]]:
    """`oomlens parse ARGS --format json` run as a user runs it: its JSON and stderr lines."""
    run = subprocess.run([sys.executable, "-m", "oomlens", "parse", *args, "--format", "json"], input=stdin, capture_output=True, timeout=60, cwd=cwd)
    err = run.stderr.decode()
    assert "Traceback" not in err, err
    return json.loads(run.stdout), err.splitlines()


def problems(doc: dict) -> dict[str, list[str]]:
    return {i["path"]: i["problems"] for i in doc["inputs"]}


def tar_of(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_tar_members_named_from_the_root_or_above_are_read_once(tmp_path):
    # "/etc/x.log" climbed to "/", whose dirname is "/": the search for its node never ended
    names = ["/etc/x.log", "//x.log", "../../y.log", "./a/../z.log"]
    (tmp_path / "odd.tar").write_bytes(tar_of({name: LINE for name in names}))
    doc, err = parse(str(tmp_path / "odd.tar"))
    assert sorted(problems(doc)) == sorted(f"{tmp_path / 'odd.tar'}:{name}" for name in names)
    assert len(doc["events"]) == 1 and len(doc["events"][0]["sources"]) == 4
    assert err == []


def test_a_tree_deeper_than_the_walk_goes_is_told_and_the_rest_read(tmp_path):
    deep = os.path.join(*["d"] * 490)  # ~490 deep raised RecursionError
    os.makedirs(tmp_path / deep)
    (tmp_path / deep / "x.log").write_bytes(LINE)
    (tmp_path / "top.log").write_bytes(LINE)
    doc, err = parse(".", cwd=str(tmp_path))
    cut = os.path.join(".", *["d"] * MAX_DEPTH)
    assert problems(doc) == {cut: [f"folder nested more than {MAX_DEPTH} deep: not read"], "./top.log": []}
    assert err == [f"oomlens: {cut}: folder nested more than {MAX_DEPTH} deep: not read"]
    assert len(doc["events"]) == 1


def test_a_nul_head_before_text_is_read_past_in_streams_read_once(tmp_path):
    """logrotate's copytruncate leaves the old length as a hole: 64 KiB of NUL bytes, then text."""
    text = bytes(65536) + LINE * 3
    (tmp_path / "raylet.1.out.gz").write_bytes(gzip.compress(text))
    (tmp_path / "logs.tar").write_bytes(tar_of({"logs/raylet.out": text}))
    told = "begins with 65536 NUL bytes (a hole, as logrotate's copytruncate leaves): read past, the text after them read"
    doc, _ = parse(str(tmp_path / "raylet.1.out.gz"))
    assert problems(doc) == {str(tmp_path / "raylet.1.out.gz"): [told]} and doc["events"]
    doc, err = parse(str(tmp_path / "logs.tar"))
    assert problems(doc) == {f"{tmp_path / 'logs.tar'}:logs/raylet.out": [told]} and doc["events"]
    doc, err = parse("-", stdin=text)
    assert problems(doc) == {"-": [told]} and doc["events"]
    assert err == [f"oomlens: -: {told}"]


def test_a_hole_in_a_plain_file_is_told_however_long_and_its_text_read(tmp_path):
    """A writer without O_APPEND goes on at its old offset after copytruncate: the hole is as
    long as the file was (here 100 MB, sparse). Its text is read, and its bytes counted."""
    log = tmp_path / "raylet.out"
    with open(log, "wb") as fh:
        fh.truncate(100_000_000)
        fh.seek(100_000_000)
        fh.write(LINE * 2)
    doc, err = parse(str(log), "--jobs", "1")
    told = "begins with 100000000 NUL bytes (a hole, as logrotate's copytruncate leaves): read past, the text after them read"
    [item] = doc["inputs"]
    assert item["bytes"] == 100_000_000 + 2 * len(LINE) and item["lines"] == 2
    assert item["problems"][0] == told and f"oomlens: {log}: {told}" in err
    assert [e["kind"] for e in doc["events"]] == ["ray_oom_summary"]


def test_watch_reads_past_a_hole_and_tells_it(tmp_path):
    (tmp_path / "raylet.out").write_bytes(bytes(65536) + LINE)
    watcher = Watcher(str(tmp_path))
    assert watcher.poll(final=True)  # not binary: its kill summary is an incident
    assert watcher.problems == [
        f"{tmp_path / 'raylet.out'}: begins with 65536 NUL bytes (a hole, as logrotate's copytruncate leaves): read past, the text after them read"
    ]


def test_a_gzip_member_with_a_bad_check_keeps_all_its_text_and_what_follows(tmp_path):
    """A damaged CRC or length is found after the member's text was handed out: every line
    of it is read, the members after it too, and the damage is told."""
    first = gzip.compress(_stamped(200))
    second = gzip.compress(_stamped(5, 300))
    for at, what in ((-8, "CRC-32"), (-4, "length")):
        bad = bytearray(first)
        bad[at] ^= 0x5A
        (tmp_path / "raylet.1.out.gz").write_bytes(bytes(bad) + second)
        doc, err = parse(str(tmp_path / "raylet.1.out.gz"))
        [item] = doc["inputs"]
        assert len(doc["events"]) == 205 and item["bytes"] == len(_stamped(200)) + len(_stamped(5, 300))
        [problem] = item["problems"]
        assert problem.startswith(f"gzip data damaged before byte {len(_stamped(200))}: a member's {what} does not match its text")
        assert err == [f"oomlens: {tmp_path / 'raylet.1.out.gz'}: {problem}"]


def test_gzip_headers_with_a_name_extra_field_and_comment_are_read(tmp_path):
    """gzip(1) writes the file's name in the header (FNAME); RFC 1952 also allows FEXTRA,
    FCOMMENT and FHCRC: each is read past to the deflate data."""
    import struct
    import zlib

    text = _stamped(30)
    packer = zlib.compressobj(6, zlib.DEFLATED, -15)
    body = packer.compress(text) + packer.flush()
    header = b"\x1f\x8b\x08" + bytes([2 | 4 | 8 | 16]) + bytes(6) + struct.pack("<H", 4) + b"AB\x00\x00" + b"raylet.out\x00" + b"rotated\x00"
    header += struct.pack("<H", zlib.crc32(header) & 0xFFFF)
    (tmp_path / "raylet.2.out.gz").write_bytes(header + body + struct.pack("<II", zlib.crc32(text), len(text)))
    run = subprocess.run(["gzip", "-t", str(tmp_path / "raylet.2.out.gz")], capture_output=True)
    assert run.returncode == 0, run.stderr  # a valid member, as gzip(1) judges
    doc, err = parse(str(tmp_path / "raylet.2.out.gz"))
    assert (len(doc["events"]), err) == (30, [])


def test_nothing_but_nul_bytes_is_still_not_read_as_text(tmp_path):
    (tmp_path / "zeros.gz").write_bytes(gzip.compress(bytes(1 << 20)))
    doc, _ = parse(str(tmp_path / "zeros.gz"))
    assert problems(doc) == {str(tmp_path / "zeros.gz"): ["binary file (not text): not read"]}


def test_a_newline_in_a_file_name_cannot_forge_a_line(tmp_path):
    name = "a\noomlens: all clear\x1b[2J.log"
    (tmp_path / name).write_bytes(bytes(range(1, 9)) * 500)  # binary: one problem line
    doc, err = parse(str(tmp_path))
    shown = str(tmp_path / "a\\noomlens: all clear\\x1b[2J.log")
    assert problems(doc) == {shown: ["binary file (not text): not read"]}
    assert err[0] == f"oomlens: {shown}: binary file (not text): not read"
    assert len(err) == 1  # the problem is the one line


def test_a_link_to_a_folder_above_is_a_loop_not_read(tmp_path):
    logs = tmp_path / "session" / "logs"
    logs.mkdir(parents=True)
    (logs / "raylet.out").write_bytes(LINE)
    (tmp_path / "session" / "sibling").mkdir()
    (tmp_path / "session" / "sibling" / "other.log").write_bytes(LINE.replace(b"1 Workers", b"2 Workers"))
    (logs / "parent").symlink_to("..")
    doc, err = parse(str(logs))
    told = f"a link to {tmp_path.resolve() / 'session'}, a folder it lies in (a loop): not read"
    assert problems(doc) == {str(logs / "raylet.out"): [], str(logs / "parent"): [told]}
    assert err == [f"oomlens: {logs / 'parent'}: {told}"]
    doc, _ = parse(str(logs / "parent"))  # named on its own, it is read
    assert str(logs / "parent" / "sibling" / "other.log") in problems(doc)


def test_watch_tells_an_unreadable_file_once_and_keeps_watching(tmp_path, monkeypatch):
    (tmp_path / "raylet.out").write_bytes(LINE)
    locked = str(tmp_path / "raylet.out")
    real_open = builtins.open

    def refusing(path, *args, **kw):  # chmod 000 does not stop root: refuse as the kernel would
        if str(path) == locked and refuse:
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kw)

    monkeypatch.setattr(builtins, "open", refusing)
    refuse = True
    watcher = Watcher(str(tmp_path))
    assert watcher.poll() == [] and watcher.problems == [f"{locked}: cannot read (Permission denied): still watched, read when it can be"]
    watcher.problems.clear()
    assert watcher.poll() == [] and watcher.problems == []  # once per file
    refuse = False
    assert watcher.poll(final=True) and watcher.problems == []  # read as soon as it can be


def _stamped(count: int, start: int = 0) -> bytes:
    """Kill summaries each with its own second and node, compressing as real lines do."""
    return b"".join(
        LINE.replace(b"15:02:00", f"15:{(start + n) // 60 % 60:02d}:{(start + n) % 60:02d}".encode()).replace(
            b"10.95.143.76", f"10.0.{n % 250}.{n % 7}".encode()
        )
        for n in range(count)
    )


def test_a_cut_zstd_file_says_it_was_cut_and_keeps_its_whole_frames(tmp_path):
    """zstandard's reader ends quietly where a file was cut; the frames are followed as the
    bytes are read, and a file that ends inside one says so."""
    import zstandard

    first, second = (zstandard.ZstdCompressor(write_checksum=True).compress(_stamped(40, start)) for start in (0, 100))
    skippable = b"\x50\x2a\x4d\x18" + (5).to_bytes(4, "little") + b"notes"
    cases = {
        "whole.log.zst": (first + skippable + second, 80),
        "second-cut.log.zst": (first + second[: len(second) // 2], 40),
        "last-byte-cut.log.zst": (first + second[:-1], 80),
    }  # only its checksum cut: all its text read
    for name, (data, events) in cases.items():
        (tmp_path / name).write_bytes(data)
        doc, err = parse(str(tmp_path / name))
        said = problems(doc)[str(tmp_path / name)]
        assert len(doc["events"]) == events, (name, len(doc["events"]))
        if name == "whole.log.zst":
            assert (said, err) == ([], []), name
        else:
            [problem] = said
            assert problem.startswith("zstd data cut after ") and problem.endswith(": the file ends inside a frame"), problem
            assert err == [f"oomlens: {tmp_path / name}: {problem}"]


def test_a_cut_tar_zst_is_called_cut_not_empty(tmp_path):
    import zstandard

    whole = zstandard.ZstdCompressor().compress(tar_of({"logs/raylet.out": _stamped(60)}))
    (tmp_path / "session.tar.zst").write_bytes(whole[: len(whole) // 2])
    run = subprocess.run([sys.executable, "-m", "oomlens", "parse", str(tmp_path / "session.tar.zst")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "empty file" not in run.stderr
    lines = run.stderr.splitlines()
    assert any(line.endswith(": the file ends inside a frame") for line in lines), lines
    assert any(line.endswith("archive cut before its first member was whole: nothing read") for line in lines), lines


def test_a_file_truncated_while_read_tells_what_it_lost(tmp_path):
    """logrotate's copytruncate empties a log while oomlens reads it: the lines read are
    kept, and the bytes the file lost are told, never taken for its end."""
    from oomlens.pipeline import read_input
    from oomlens.sources import discover

    log = tmp_path / "raylet.out"
    log.write_bytes(_stamped(5000))
    [item] = discover([str(log)])
    opener = item.opener
    cut = len(_stamped(100))

    def truncating():
        stream = opener()
        stream.peek(1)  # opened and begun: now the rotation empties it to its first 100 lines
        os.truncate(log, cut)
        return stream

    item.opener = truncating
    found = read_input(item)
    assert len(found) == 100 and item.bytes == cut
    assert item.problems == [
        f"shrank while read (truncated, as logrotate's copytruncate does): {cut} of the {len(_stamped(5000))} bytes it held when opened were read"
    ]


def test_a_byte_range_past_a_file_s_new_end_tells_what_was_gone(tmp_path):
    """A big file is read in byte ranges measured before: a range the file no longer reaches
    says which bytes were gone."""
    from oomlens.options import Options
    from oomlens.ranges import read_range

    log = tmp_path / "raylet.out"
    log.write_bytes(_stamped(50))
    size = len(_stamped(50))
    rows, _own, (problems, _counts), *_ = read_range(str(log), "raylet", None, None, (0, 0, size + 500, size + 1000), 2025, Options(budget=None))
    assert len(rows) == 50
    assert problems == [f"shrank while read (truncated, as logrotate's copytruncate does): bytes {size}-{size + 1000} were gone"]
