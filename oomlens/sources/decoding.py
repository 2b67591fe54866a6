"""Decoding: a stream's bytes as the text the scan reads. Text is told from binary (holes of
NUL bytes read past), gzip, zstd, xz and bzip2 are decompressed as streams (a cut or a bomb
stopped and told), UTF-16 and UTF-8's byte-order marks become plain UTF-8, and a
collector's records (one a line, or in one JSON document) are read as the lines they hold."""

from __future__ import annotations

import bz2
import codecs
import io
import itertools
import json
import lzma
import os
import re
import tarfile
import zipfile
import zlib
from typing import Any, BinaryIO, Protocol, cast

import zstandard

from ..envelopes import MAX_RECORD, Collector, collector_of, unwrapped
from .inputs import Input, error_line

try:  # ISA-L inflates about 2.5 times as fast as zlib, with the same API and results
    from isal import isal_zlib as inflate
except ImportError:
    inflate = zlib  # type: ignore[misc]

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
XZ_MAGIC = b"\xfd7zXZ\x00"
BZ2_MAGIC = b"BZh"  # then the block size, a digit 1-9
ZIP_MAGIC = b"PK\x03\x04"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")  # PowerShell's `>`, Windows' "Unicode" save: UTF-16 LE or BE
BOM = b"\xef\xbb\xbf"  # UTF-8's byte-order mark: at a file's start, and inside `cat` of two such files
ENCODED = (GZIP_MAGIC, ZSTD_MAGIC, XZ_MAGIC, ZIP_MAGIC, *UTF16_BOMS)  # heads of files whose bytes are not their text
# Text logs compress 5-30x; deflate cannot pass ~1030x, so a 1000x limit would stop a gzip
# bomb only at its end. A stream is a bomb when it is past BOMB_FLOOR bytes *and* more than
# BOMB_RATIO times the compressed bytes consumed so far; at scan speed the floor costs seconds.
BOMB_RATIO = 100
BOMB_FLOOR = 64 << 20
RECORDS_HEAD = 1 << 16  # bytes of a text's head whose lines tell a collector's records (envelopes.collector_of)
SNIFF = 8192  # bytes looked at to tell text from binary, and compressed from plain
STEP = 8192  # bytes asked of a decoder or archive member at a time: a cut loses at most this
INFLATE_STEP = 1 << 18  # bytes of text asked of gzip at a time: its decoder keeps all it decoded before a cut
# isal's stub declares `error` an exception (an instance); it is the class IsalError
DECODE_ERRORS = (
    EOFError,
    OSError,
    zlib.error,
    cast("type[Exception]", inflate.error),
    tarfile.TarError,
    zstandard.ZstdError,
    lzma.LZMAError,
    zipfile.BadZipFile,
)


NUL_RUN = re.compile(rb"\0{8,}")  # a hole: logrotate's copytruncate, a file preallocated or cut by a crash


STRAY_NULS = 4  # NUL bytes outside runs that text may hold (torn writes), whatever its length
STRAY_SHARE = 100  # a file shorter than SNIFF whose other bytes read as text may hold one NUL byte in this many


def is_binary(head: bytes) -> bool:
    """Binary as ripgrep judges it: NUL bytes, or mostly control bytes. Runs of NUL bytes
    (holes a log gets from logrotate's copytruncate or a crash) are not counted, nor are a
    few stray NUL bytes (a torn write): binary data holds one in a few hundred bytes. Where
    too few bytes are left to judge by shares (a few lines before a crash's hole, a short
    file with a torn write), they are text when they read as nothing else (_clean_text).
    Invalid UTF-8 is text: its bytes are read as U+FFFD and the scanner names the lines that
    hold them."""
    if not head:
        return False
    body = NUL_RUN.sub(b"", head)
    if len(body) < min(len(head), 512):  # (almost) nothing but NUL bytes: too little to judge by shares
        return not (body.count(0) <= STRAY_NULS and _clean_text(body.replace(b"\0", b"")))  # a few lines before a crash's hole
    stray = body.count(0)
    if stray > STRAY_NULS and stray * 1000 > len(body):  # more than one in a thousand: random or compressed bytes hold one in 256
        # a file too short for shares to tell: text if all else reads as text (UTF-16 holds a NUL every other byte)
        return not (len(head) < SNIFF and stray * STRAY_SHARE <= len(body) and _clean_text(body.replace(b"\0", b"")))
    return len(_CONTROL_OR_ESC.findall(body)) > len(body) // 5


_CONTROL_BYTES = rb"\x00-\x08\x0e-\x1a\x1c-\x1f"  # control bytes but tab, the line breaks, vertical tab, form feed and ESC
_CONTROL = re.compile(b"[" + _CONTROL_BYTES + b"]")  # a few at most in text beyond doubt (_clean_text): ESC starts colour codes
_CONTROL_OR_ESC = re.compile(b"[" + _CONTROL_BYTES + b"\x1b]")  # what is_binary counts: a fifth of them and more is binary


def _clean_text(body: bytes) -> bool:
    """Whether a few bytes are text beyond doubt: printable UTF-8 (but a character the head
    cut at its end) with a line break, and stray control bytes as few as stray NULs may be
    (a torn write leaves one at a hole's edge): at most STRAY_NULS, one in STRAY_SHARE.
    Random bytes fail the UTF-8 at once; a line of a log passes."""
    try:
        codecs.utf_8_decode(body, "strict", False)
    except UnicodeDecodeError:
        return False
    stray = len(_CONTROL.findall(body))
    return b"\n" in body and body.strip() != b"" and stray <= STRAY_NULS and stray * STRAY_SHARE <= len(body)


def _past_hole(stream: io.BufferedReader, item: Input) -> io.BufferedReader:
    """`stream` read past the NUL bytes it begins with, counted in `item.hole`. A hole is as
    long as the file was when logrotate's copytruncate emptied it (gigabytes: a writer
    without O_APPEND goes on where it was), so it is read past however long; it holds no
    text, and the first line's envelope and time then stand where they are looked for."""
    hole = 0
    head = stream.peek(SNIFF)[:SNIFF]
    while head[:1] == b"\0":
        hole += len(stream.read(len(head) - len(head.lstrip(b"\0"))))
        head = stream.peek(SNIFF)[:SNIFF]
    item.hole = hole
    if hole and 0 < len(head) < SNIFF:  # the text's head is the rest of a read (a pipe's): a whole one to judge by
        head = stream.read(SNIFF)
        return io.BufferedReader(Prefixed(head, stream))
    return stream


def _head(stream: io.BufferedReader, item: Input) -> bytes:
    """The head of a stream to judge text or binary by: a stream of nothing but NUL bytes is
    judged as those bytes."""
    return stream.peek(SNIFF)[:SNIFF] or bytes(min(item.hole, SNIFF))


def hole_problem(skipped: int) -> str:
    """What a hole at the start of a file is told as: it holds no text, and is not lost."""
    return f"begins with {skipped} NUL bytes (a hole, as logrotate's copytruncate leaves): read past, the text after them read"


def _tell_hole(item: Input, hole: int) -> None:
    """Say that a hole at the start of a text was read past."""
    if hole:
        item.problems.append(hole_problem(hole))


def text_size(path: str) -> int:
    """About how many bytes of text a file holds, for reading the biggest first: a gzip file
    says it in its last four bytes (modulo 4 GiB, for one member); zstd is guessed at 8x."""
    try:
        with open(path, "rb") as fh:
            return _text_size(fh)
    except OSError:
        return 0


def _text_size(fh: BinaryIO) -> int:
    """text_size of a file open at its start (discovery sniffs it anyway: no second open)."""
    magic = fh.read(4)
    size = os.fstat(fh.fileno()).st_size
    if magic.startswith(GZIP_MAGIC) and size >= 18:
        fh.seek(-4, os.SEEK_END)
        return max(size, int.from_bytes(fh.read(4), "little"))
    return size * 8 if magic.startswith(ZSTD_MAGIC) else size


def text_stream(raw: BinaryIO | io.RawIOBase, item: Input) -> io.BufferedReader:
    """`raw` as a peekable stream of text bytes: decompressed when it starts like gzip or zstd.

    Problems met while decompressing (a cut, a bomb) go to `item`."""
    # a stream not buffered yet has readinto (a raw file, BytesIO); typing.BinaryIO does not declare it
    buffered: io.BufferedReader = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[arg-type]
    magic = buffered.peek(4)[:4]
    if magic.startswith(GZIP_MAGIC):
        counted = Counting(buffered)
        return _past_hole(io.BufferedReader(Limited(Gunzip(counted), item, "gzip", counted, INFLATE_STEP)), item)
    if magic.startswith(ZSTD_MAGIC):
        counted = ZstdFrames(buffered)
        # zstandard's stub asks for IO[bytes]: the reader calls only read()
        reader = zstandard.ZstdDecompressor().stream_reader(counted, read_across_frames=True)  # type: ignore[arg-type]
        return _past_hole(io.BufferedReader(Limited(reader, item, "zstd", counted)), item)
    if magic.startswith((XZ_MAGIC[:4], BZ2_MAGIC)) and compressed(buffered.peek(SNIFF)[:SNIFF]):
        counted = Counting(buffered)
        # both read concatenated streams (`cat a.xz b.xz`, pbzip2's) as one, as xz and bzip2 do
        # (typeshed asks for IO[bytes]: they call only read())
        unpacked: _Reads1 = lzma.LZMAFile(counted) if magic.startswith(XZ_MAGIC[:4]) else bz2.BZ2File(counted)  # type: ignore[arg-type]
        return _past_hole(io.BufferedReader(Limited(unpacked, item, "xz" if magic.startswith(XZ_MAGIC[:4]) else "bzip2", counted)), item)
    return _past_hole(buffered, item)


def compressed(head: bytes) -> bool:
    """Whether a head that begins like xz or bzip2 is one: xz's whole magic, or bzip2's
    block size digit and block magic (a log line may begin "BZh")."""
    return head.startswith(XZ_MAGIC) or (
        len(head) >= 10 and head[3:4] in b"123456789" and head[4:10] in (b"\x31\x41\x59\x26\x53\x59", b"\x17\x72\x45\x38\x50\x90")
    )


SNIFFED = "sniff"  # as_text: look at the head for a collector's records

DOCUMENT = "document"  # as_text: a collector's records in one JSON document (Document)
# where a document's records begin: a top-level array (gcloud logging read --format json), or the
# array an export's object holds them in (aws logs filter-log-events: "events"; get-log-events and
# a CloudWatch export: "logEvents"; the Logging API's entries.list: "entries")
_DOCUMENT_START = re.compile(r'\A\s*(?:\[|\{[^\[]*?"(?:events|logEvents|entries)"\s*:\s*\[)')
MAX_DOCUMENT_RECORD = 1 << 20  # a record longer than this, still unparsed: the document is read no further


def document_of(head: bytes) -> bool:
    """Whether a head opens one JSON document of a collector's records: its first record,
    read whole, is one a collector of the table reads (a pretty-printed array of objects
    that are no records stays a plain text)."""
    text = head.decode("utf-8", "replace")
    m = _DOCUMENT_START.match(text)
    if m is None:
        return False
    try:
        first, _ = json.JSONDecoder().raw_decode(text, m.end() + len(text[m.end() :]) - len(text[m.end() :].lstrip()))
    except ValueError:
        return False
    return isinstance(first, dict) and collector_of(json.dumps(first).encode() + b"\n") is not None


def records_of(head: bytes) -> Collector | str | None:
    """How a head's records are written: a collector's, one a line (envelopes.collector_of),
    in one JSON document (DOCUMENT), or None for plain text."""
    return collector_of(head) or (DOCUMENT if document_of(head) else None)


def _unmarked(stream: io.BufferedReader, size: int) -> io.BufferedReader:
    """Text over `stream`, buffered by `size` bytes (what a peek may see)."""
    return cast(io.BufferedReader, io.BufferedReader(Text(stream, utf16=utf16(stream.peek(SNIFF)[:SNIFF])), size))


def utf16(head: bytes) -> bool:
    """Whether a head is UTF-16 text: its mark, then lines (a line break is two bytes, one of
    them zero). Bytes that merely begin as a mark would (binary garbage before a log) decode
    to no line break."""
    if head[:2] not in UTF16_BOMS:
        return False
    text = head[2 : len(head) & ~1].decode("utf-16-le" if head[:2] == UTF16_BOMS[0] else "utf-16-be", "replace")
    return "\n" in text


def as_text(stream: io.BufferedReader, collector: Collector | str | None = SNIFFED) -> io.BufferedReader:
    """A stream's text as the scan reads it: UTF-8 with no byte-order mark (Text), and a
    collector's records (docker's json-file, journald's, a cloud's: envelopes.collector_of),
    one a line or in one JSON document (DOCUMENT), read as the lines they hold; `collector`
    when a sniff of the same file told it already (a file is then read as far as its first
    read asks, no further). Read after text_stream and its sniff of an archive: an archive's
    bytes are never touched."""
    text = _unmarked(stream, RECORDS_HEAD if collector == SNIFFED else STEP)
    if collector == SNIFFED:
        head = text.peek(RECORDS_HEAD)[:RECORDS_HEAD]
        collector = records_of(head)
    if collector == DOCUMENT:
        text = cast(io.BufferedReader, io.BufferedReader(Document(text), STEP))
        collector = collector_of(text.peek(RECORDS_HEAD)[:RECORDS_HEAD])
    return io.BufferedReader(Records(text, collector)) if isinstance(collector, Collector) else text


class _Closable(Protocol):
    def close(self) -> object: ...


class _Reads(_Closable, Protocol):
    """What Counting and Gunzip read from: a buffered file, or a Counting."""

    def read(self, size: int = ..., /) -> bytes: ...


class _Reads1(_Closable, Protocol):
    """What Limited reads from: an archive member, a Gunzip, zstandard's reader."""

    def read1(self, size: int = ..., /) -> bytes: ...


class Wrapping(io.RawIOBase):
    """A readable raw stream over another one, which it closes with itself."""

    inner: _Closable

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        if not self.closed:
            self.inner.close()
        super().close()


class Prefixed(Wrapping):
    """Bytes already read from a stream, then the rest of it."""

    inner: _Reads

    def __init__(self, prefix: bytes, inner: _Reads) -> None:
        self.prefix, self.inner = prefix, inner

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.prefix[: len(buffer)] or self.inner.read(len(buffer))
        self.prefix = self.prefix[len(data) :]
        buffer[: len(data)] = data
        return len(data)


class Watched(Wrapping):
    """A file on disk read to its end. One that ends short of the size it had when opened
    was truncated meanwhile (logrotate's copytruncate): the bytes it lost are told."""

    inner: io.FileIO

    def __init__(self, path: str, item: Input) -> None:
        self.inner, self.item = open(path, "rb", buffering=0), item  # noqa: SIM115 - closed with this stream
        self.size, self.at = os.fstat(self.inner.fileno()).st_size, 0

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        got = self.inner.readinto(buffer) or 0
        self.at += got
        if not got and self.at < self.size:
            self.item.problems.append(
                f"shrank while read (truncated, as logrotate's copytruncate does): {self.at} of the {self.size} bytes it held when opened were read"
            )
            self.size = self.at  # told once
        return got


class Counting(Wrapping):
    """Counts the compressed bytes a decompressor has consumed."""

    inner: _Reads

    def __init__(self, inner: _Reads) -> None:
        self.inner = inner
        self.count = 0

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.inner.read(len(buffer))
        buffer[: len(data)] = data
        self.count += len(data)
        return len(data)


class Text(Wrapping):
    """A stream's text as UTF-8 with no byte-order mark: UTF-16 told by its mark (PowerShell's
    `>`) transcoded, and every UTF-8 mark removed wherever it stands (`cat` of two files that
    begin with one puts one at a line's start), before anything reads a line: the first
    envelope, time or trigger of that line is then where it is looked for."""

    inner: _Reads

    def __init__(self, inner: _Reads, utf16: bool = False) -> None:
        self.inner = inner
        self.decoder = codecs.getincrementaldecoder("utf-16")("replace") if utf16 else None
        self.held = b""  # the start of a mark the last read ended with
        self.out, self.at = b"", 0
        self.ended = False

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while self.at >= len(self.out) and not self.ended:
            self._fill(max(len(buffer), STEP))
        got = min(len(buffer), len(self.out) - self.at)
        buffer[:got] = self.out[self.at : self.at + got]
        self.at += got
        return got

    def _fill(self, size: int) -> None:
        data = self.inner.read(size)
        self.ended = not data
        if self.decoder is not None:
            data = self.decoder.decode(data, final=self.ended).encode("utf-8")
        data = self.held + data
        keep = 0 if self.ended else next((n for n in (2, 1) if data.endswith(BOM[:n])), 0)
        self.held = data[len(data) - keep :] if keep else b""
        data = data[: len(data) - keep]
        self.out, self.at = data.replace(BOM, b"") if BOM[:1] in data else data, 0


def marks_in(fh: BinaryIO, lo: int, hi: int) -> int:
    """The bytes of UTF-8 marks in bytes lo..hi of a file, which Text removes: a range read
    whole by another process starts that much sooner in its text."""
    fh.seek(lo)
    count, carry = 0, b""
    while lo < hi and (data := fh.read(min(STEP << 9, hi - lo))):
        lo += len(data)
        data = carry + data
        count += data.count(BOM)
        carry = data[-2:] if not data.endswith(BOM) else b""
    return count * len(BOM)


class Records(Wrapping):
    """The lines a stream of a collector's records holds (envelopes.unwrapped)."""

    inner: io.BufferedReader

    def __init__(self, inner: io.BufferedReader, collector: Collector) -> None:
        self.inner = inner
        self.lines = unwrapped(collector, iter(lambda: inner.readline(MAX_RECORD + 1), b""))
        self.out, self.at = b"", 0

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self.at >= len(self.out):
            self.out, self.at = b"".join(itertools.islice(self.lines, 256)), 0
        got = min(len(buffer), len(self.out) - self.at)
        buffer[:got] = self.out[self.at : self.at + got]
        self.at += got
        return got


class Document(Wrapping):
    """The records of one JSON document (see _DOCUMENT_START), one compact JSON object a
    line, as a collector writes them one a line; read a record at a time, never whole."""

    inner: io.BufferedReader

    def __init__(self, inner: io.BufferedReader) -> None:
        self.inner, self.decoder = inner, json.JSONDecoder()
        self.utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self.buf, self.pos, self.begun, self.ended = "", 0, False, False
        self.out, self.at = b"", 0

    def _more(self) -> bool:
        chunk = self.inner.read(1 << 16)
        self.buf = self.buf[self.pos :] + self.utf8.decode(chunk, final=not chunk)
        self.pos = 0
        return bool(chunk)

    def _record(self) -> bytes | None:
        while not self.begun:
            m = _DOCUMENT_START.match(self.buf)
            if m is not None:
                self.pos, self.begun = m.end(), True
            elif not self._more() or len(self.buf) > MAX_DOCUMENT_RECORD:
                return None
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in " \t\r\n,":
                self.pos += 1
            if self.pos < len(self.buf):
                if self.buf[self.pos] == "]":
                    return None
                try:
                    record, self.pos = self.decoder.raw_decode(self.buf, self.pos)
                except ValueError:
                    pass  # cut by the read: more of it, unless the document ends or the record is past any record
                else:
                    return json.dumps(record, ensure_ascii=False).encode() + b"\n"
            if len(self.buf) - self.pos > MAX_DOCUMENT_RECORD or not self._more():
                return None

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while self.at >= len(self.out) and not self.ended:
            record = self._record()
            if record is None:
                self.ended = True
            else:
                self.out, self.at = record, 0
        got = min(len(buffer), len(self.out) - self.at)
        buffer[:got] = self.out[self.at : self.at + got]
        self.at += got
        return got


class ZstdFrames(Counting):
    """Counts the compressed bytes and follows the zstd frames they form (RFC 8878: frame and
    block headers, block sizes, checksums; skippable frames), without decoding: zstandard's
    stream reader ends quietly where a file was cut, and this tells whether the bytes
    stopped inside a frame."""

    def __init__(self, inner: _Reads) -> None:
        super().__init__(inner)
        self.need, self.state = 4, "magic"  # bytes of header wanted next, and which
        self.header = b""
        self.skip = 0  # bytes of block content (or a skippable frame) to pass over
        self.checksum = False
        self.cut = False  # the bytes ended inside a frame

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        got = super().readinto(buffer)
        if got:
            self._follow(bytes(buffer[:got]))
        else:
            self.cut = self.state != "magic" or bool(self.header) or self.skip > 0
        return got

    def _follow(self, data: bytes) -> None:
        at = 0
        while at < len(data):
            if self.skip:
                taken = min(self.skip, len(data) - at)
                self.skip -= taken
                at += taken
                continue
            taken = min(self.need - len(self.header), len(data) - at)
            self.header += data[at : at + taken]
            at += taken
            if len(self.header) == self.need:
                header, self.header = self.header, b""
                self._step(header)

    def _step(self, header: bytes) -> None:
        """One whole header read: what comes after it."""
        if self.state == "magic":
            if header == ZSTD_MAGIC:
                self.need, self.state = 1, "descriptor"
            elif header[1:] == b"*M" and header[0] & 0xF0 == 0x50:  # a skippable frame
                self.need, self.state = 4, "skippable"
            else:  # not zstd: the decoder says so
                self.need, self.state = 4, "magic"
        elif self.state == "skippable":
            self.skip, self.need, self.state = int.from_bytes(header, "little"), 4, "magic"
        elif self.state == "descriptor":
            d = header[0]
            single, fcs = d >> 5 & 1, d >> 6
            self.checksum = bool(d >> 2 & 1)
            rest = (0 if single else 1) + (0, 1, 2, 4)[d & 3] + ((1 if single else 0), 2, 4, 8)[fcs]
            self.need, self.state = (rest, "frame header") if rest else (3, "block")
        elif self.state == "frame header":
            self.need, self.state = 3, "block"
        elif self.state == "block":
            value = int.from_bytes(header, "little")
            last, kind, size = value & 1, value >> 1 & 3, value >> 3
            self.skip = 1 if kind == 1 else size  # an RLE block holds one byte
            if last:
                self.need, self.state = (4, "checksum") if self.checksum else (4, "magic")
        elif self.state == "checksum":
            self.need, self.state = 4, "magic"


class Damaged(ValueError):
    """A gzip member whose check (CRC-32 or length) fails. Its text was handed out as it was
    decoded, and the next member is read on: the reader says so and goes on."""


MAX_GZIP_HEADER = 1 << 20  # a member's header holds a file name and a comment: longer is not gzip


def gzip_header(data: bytes) -> int | None:
    """The length of the gzip member header `data` begins with (RFC 1952 2.3); None while
    `data` holds only part of it."""
    if len(data) < 10:
        return None
    if data[:2] != GZIP_MAGIC or data[2] != 8:
        raise OSError(f"not a gzip member: it begins {data[:4]!r}")
    flags, at = data[3], 10
    if flags & 4:  # FEXTRA: its length, then itself
        if len(data) < at + 2:
            return None
        at += 2 + int.from_bytes(data[at : at + 2], "little")
    for bit in (8, 16):  # FNAME, FCOMMENT: ended by a zero byte
        if flags & bit:
            end = data.find(b"\0", at)
            if end < 0:
                return None
            at = end + 1
    at += 2 if flags & 2 else 0  # FHCRC
    return at if len(data) >= at else None


class Gunzip(Wrapping):
    """The gzip members of a stream one after another (as `cat a.gz b.gz` makes them).

    Each member's header is read here and its deflate data inflated raw; its CRC-32 and
    length are checked here once its text has been handed out. (zlib's gzip mode checks them
    inside the call that decodes the member's end, and a bad check loses that call's text.)
    Zero padding after a member ends the stream, as gzip allows; any other bytes there must
    start a new member."""

    inner: _Reads

    def __init__(self, inner: _Reads) -> None:
        self.inner = inner
        self.member: Any = None  # the decoder of the member being read (zlib's or ISA-L's); None between members
        self.ended = False  # a member ended whose trailer is not checked yet
        self.pending = b""  # compressed bytes read but not yet given to a decoder
        self.crc = self.size = 0  # of the member's text so far

    def read1(self, size: int = -1) -> bytes:
        size = size if size > 0 else INFLATE_STEP
        while True:
            if self.member is None:
                if self.ended:
                    self._check()
                if not self._start():
                    return b""
            data = self.member.unconsumed_tail or self.pending or self.inner.read(STEP)  # small: bombs show early
            self.pending = b""
            out = self.member.decompress(data, size)  # with no data left: the text it still holds
            if not data and not out:
                raise EOFError("Compressed file ended before the end-of-stream marker was reached")
            if self.member.eof:
                self.pending, self.member, self.ended = self.member.unused_data, None, True
            if out:
                self.crc, self.size = inflate.crc32(out, self.crc), self.size + len(out)
                return out

    def _more(self, wanted: int) -> bool:
        """Read until `wanted` bytes are pending; False if the stream ends first."""
        while len(self.pending) < wanted:
            more = self.inner.read(STEP)
            if not more:
                return False
            self.pending += more
        return True

    def _check(self) -> None:
        """The trailer of the member that ended: its text's CRC-32 and length (mod 2**32)."""
        crc, size = self.crc, self.size & 0xFFFFFFFF
        self.ended, self.crc, self.size = False, 0, 0
        if not self._more(8):
            raise EOFError("Compressed file ended inside a member's trailer (CRC and length)")
        trailer, self.pending = self.pending[:8], self.pending[8:]
        if int.from_bytes(trailer[:4], "little") != crc:
            raise Damaged(f"a member's CRC-32 does not match its text ({int.from_bytes(trailer[:4], 'little'):#010x} != {crc:#010x})")
        if int.from_bytes(trailer[4:], "little") != size:
            raise Damaged(f"a member's length does not match its text ({int.from_bytes(trailer[4:], 'little')} != {size} bytes)")

    def _start(self) -> bool:
        """Read past zero padding and the next member's header; False at the stream's end."""
        self.pending = self.pending.lstrip(b"\0")
        while not self.pending:
            more = self.inner.read(STEP)
            if not more:
                return False
            self.pending = more.lstrip(b"\0")
        while (length := gzip_header(self.pending)) is None:
            if len(self.pending) > MAX_GZIP_HEADER:
                raise OSError(f"not a gzip member: no end of its header in {MAX_GZIP_HEADER} bytes")
            if not self._more(len(self.pending) + 1):
                raise EOFError("Compressed file ended inside a member's header")
        self.pending, self.member = self.pending[length:], inflate.decompressobj(-15)
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.read1(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class Limited(Wrapping):
    """A decompressing (or archive member) stream that stops at a bomb or a cut and says so.

    Reads fill the caller's buffer from small reads of the inner stream, so little or
    nothing of what comes before a cut is lost with it (tarfile drops a whole request)."""

    inner: _Reads1

    def __init__(self, inner: _Reads1, item: Input, codec: str, compressed: Counting | None = None, step: int = STEP) -> None:
        self.inner, self.item, self.codec, self.compressed, self.step = inner, item, codec, compressed, step
        self.total = 0
        self.stopped = False

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        filled = 0
        while filled < len(buffer) and not self.stopped:
            try:
                data = self.inner.read1(min(self.step, len(buffer) - filled))
            except Damaged as err:  # its text was read: say so, and read on
                self.item.problems.append(f"{self.codec} data damaged before byte {self.total}: {err}; the text was read, and what follows")
                continue
            except DECODE_ERRORS as err:
                self._stop(f"{self.codec} data cut or damaged after {self.total} bytes: {error_line(err, named=False)}")
                break
            if not data:
                if isinstance(self.compressed, ZstdFrames) and self.compressed.cut:
                    self._stop(f"zstd data cut after {self.total} bytes: the file ends inside a frame")
                break
            buffer[filled : filled + len(data)] = data
            filled += len(data)
            self.total += len(data)
            if self.compressed is not None and self.total > BOMB_FLOOR and self.total > BOMB_RATIO * self.compressed.count:
                self._stop(
                    f"decompression stopped after {self.total} bytes, more than {BOMB_RATIO}x the "
                    f"{self.compressed.count} compressed bytes read (a decompression bomb?)"
                )
        return filled

    def _stop(self, problem: str) -> None:
        self.stopped = True
        self.item.problems.append(problem)
