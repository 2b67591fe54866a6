"""Grammars: load the `.lark` format families and parse candidate blocks into event drafts.

A family is one file `grammars/<name>.lark` plus one transformer module
`oomlens/families/<name>.py`. The grammar file says what the text looks like; its
`//!` directives say how the scanner finds it (lnav-style data, not code):

    //! trigger: <bytes regex>     a raw line that may start this family's block (repeatable;
                                   it matches within one line: a repeated space is `[ \\t]+`)
    //! start: <regex>             where the grammar's input begins in the peeled trigger line
                                   (repeatable); it begins with text, not an optional prefix or
                                   a run of a class: searched at every place of a line, such a
                                   pattern costs the square of a long line (tests/test_hostile.py)
    //! lead: <regex>              text that may stand right before a start and begins the block
                                   then (an exception's class, a rank tag): looked for only just
                                   before a start found (repeatable)
    //! continue: <regex>          a following peeled line that belongs to the block (repeatable)
    //! after: <regex>             a following peeled line belongs to the block, whatever it
                                   holds but a start of its own, right after a line of the block
                                   this matches (a traceback's code under its `File` line:
                                   indented as written, but a collector may have trimmed it)
    //! back: <regex>              a preceding peeled line that belongs to the block when a start
                                   may stand below the lines it follows (repeatable): a paste that
                                   kept a table's rows but not its title
    //! end: <regex>               a peeled line that is the last of its block, the first one too
                                   (repeatable; `match`ed like continue)
    //! max_lines: <n>             the longest block (default 1: single-line messages)
    //! cache: shapes              parse a one-line block once per shape (each number written as
                                   one placeholder of its form): for high-volume lines whose
                                   grammar has no literal digit (its Transformer then gets
                                   tokens' text and type, no positions)
    //! reduce: <regex>            a one-line block whose start this matches is read as that
                                   start and the matches of `keep` alone (a step line's 150
    //! keep: <regex>              metrics, of which the Transformer reads three): what a line
                                   costs no longer grows with what the family ignores
    //! sample: <kind> [key=value ...]   followed by `//| ` lines: a real or constructed
                                   message the test suite parses, with the values it must yield

Text pasted into issues is often cut: a block whose end does not parse still yields the
longest prefix the grammar accepts (LALR lets us stop wherever `$END` is a legal next
token), and the drafts say `truncated`. A reading the grammar ends before words it does not
know (a run's label after a memory line) was not cut: it is whole, the words after it unread.
"""

from __future__ import annotations

import bisect
import functools
import importlib
import os
import re
import shlex
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from .prefilter import Regex, line_superset
from .shapes import MAX_SHAPE_LINE, MAX_SHAPES, NUMBER_RUN, numbers_and_shape

if TYPE_CHECKING:  # lark itself is imported with the first parser a run needs: a run with no hit parses nothing
    from lark import Lark, Token, Transformer, Tree


class Start:
    """Where a family's block begins in a line: the first place its `start` patterns match,
    taken back over the `lead` that stands right before it (within LEAD_REACH characters).
    Matches' `start()` and `end()` as `re`'s are."""

    def __init__(self, core: re.Pattern[str], lead: re.Pattern[str]) -> None:
        self.core, self.lead = core, lead
        self.pattern = core.pattern

    def search(self, text: str, pos: int = 0, endpos: int | None = None) -> re.Match[str] | Begin | None:
        m = self.core.search(text, pos, len(text) if endpos is None else endpos)
        return None if m is None else self._begin(text, m, pos)

    def finditer(self, text: str, pos: int = 0, endpos: int | None = None) -> Iterator[re.Match[str] | Begin]:
        for m in self.core.finditer(text, pos, len(text) if endpos is None else endpos):
            yield self._begin(text, m, pos)

    def _begin(self, text: str, m: re.Match[str], pos: int) -> re.Match[str] | Begin:
        led = self.lead.search(text, max(pos, m.start() - LEAD_REACH), m.start())
        return m if led is None else Begin(text, led.start(), m.end())


class Begin(NamedTuple):
    """A block's beginning in a line (what a `re` match of the start told)."""

    text: str
    at: int
    stop: int

    def start(self) -> int:
        return self.at

    def end(self) -> int:
        return self.stop


LEAD_REACH = 256  # characters before a start its lead may begin at


DIRECTIVE = re.compile(r"^//!\s*(\w+):\s?(.*)$")
# a trigger is searched over many lines at once (the core's buffer): no anchor in it but a
# word's end that a line break also ends
ESCAPED = re.compile(r"\\.|\[(?:\\.|[^\]\\])*\]")  # escapes and character classes, where ^ and $ are literal
LINE_END = re.compile(r"\(\?:\\s\|\$\)")
ANCHOR = re.compile(r"[\^$]")


@dataclass(slots=True)
class Sample:
    """A message the family must parse, and field values it must produce."""

    kind: str
    expect: dict[str, str]
    text: str
    line: int


class Block(NamedTuple):
    """A family's block as the order of its lines tells it: where it starts, and the lines
    that continue it, in words of its own (no plain indented line continues it)."""

    family: Family
    continues: re.Pattern[str]
    anywhere: Regex | re.Pattern[bytes]  # the lines it may start on, over many lines' bytes (more, never fewer)

    @property
    def start(self) -> re.Pattern[str] | Start:
        """Compiled where `anywhere` first finds a line it may begin (few heads hold one)."""
        return self.family.start


@functools.lru_cache(maxsize=8)
def _superset(pattern: str) -> Regex | None:
    """line_superset of a Triggers' pattern, kept by its text as `re` keeps its compiled
    patterns: a Triggers is made for each input read."""
    return line_superset(pattern)


class Triggers:
    """Every family's triggers as one pattern over text, compiled where first searched: only
    a head with a line a wrap may have cut asks it (layout.py), and it costs more to compile
    than most files' whole layout. Its searches are `re`'s, asked only of a window the core's
    DFA finds a trigger in (`re` tries each of the hundred alternatives at every character)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern

    @functools.cached_property
    def compiled(self) -> re.Pattern[str]:
        return re.compile(self.pattern)

    @property
    def superset(self) -> Regex | None:
        return _superset(self.pattern)

    def search(self, text: str, pos: int = 0, endpos: int | None = None) -> re.Match[str] | None:
        endpos = len(text) if endpos is None else endpos
        # the window as `re` sees it from pos: with the character before, which `^` and `\b`
        # look at. Over ASCII the DFA's classes are `re`'s, and it finds every match of the
        # pattern (line_superset): where it finds none, `re` would find none
        window = text[max(pos - 1, 0) : endpos]
        if window.isascii() and self.superset is not None and self.superset.search(window.encode()) is None:
            return None
        return self.compiled.search(text, pos, endpos)


class Cues(NamedTuple):
    """What the families' grammars tell of a paste's layout (layout.py): every trigger over
    text (a wrap that cut one in two) and the blocks whose lines tell their order."""

    triggers: Triggers
    blocks: tuple[Block, ...]


PLAIN_LINES = ("    result = compute(batch, step)", "  and then some words", "\t9 more lines", "        ^^^^^")  # lines any block may hold


def cues(fams: Iterable[Family]) -> Cues:
    """The layout cues of these families (`re` keeps their triggers' pattern compiled by its text)."""
    fams = tuple(fams)
    blocks = tuple(
        Block(fam, fam.continues, fam.start_anywhere)
        for fam in fams
        if fam.continues is not None and not any(fam.continues.match(line) for line in PLAIN_LINES)
    )
    return Cues(Triggers(_either([t for fam in fams for t in fam.triggers])), blocks)


@dataclass
class Family:
    """One format family: its grammar, its transformer, and how to find its blocks.

    Its directives' patterns are kept as written and each compiled where first used (the
    properties of their names): a run reads the blocks of few families, and every process
    compiled them all."""

    name: str
    path: Path
    triggers: list[str]
    max_lines: int
    written: dict[str, list[str]]  # the patterns of each directive (start, lead, continue, end, back, after, reduce, keep) as written
    written_samples: list[tuple[int, str, str]] = field(default_factory=list)  # each sample's line, its directive's `kind key=value ...`, its text
    shapes: dict[str, tuple[Any, bool]] | None = None  # the shape cache, for families that opt in
    transformer_class: type[Transformer] | None = None  # given with the grammar; else oomlens.families.<name>

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """To a worker process by its grammar file and Transformer (read once per process
        there), not its compiled parser and shape cache."""
        return (family, (self.path, self.transformer_class))

    @functools.cached_property
    def samples(self) -> list[Sample]:
        """The messages the family must parse and the values they must yield (the suite
        reads them): their directives are split where asked for, not by every run."""
        made = []
        for line, directive, text in self.written_samples:
            kind, *pairs = shlex.split(directive)
            made.append(Sample(kind, dict(pair.split("=", 1) for pair in pairs), text, line))
        return made

    @functools.cached_property
    def sample_kinds(self) -> frozenset[str]:
        """The kinds the family's samples make (each directive's first word: a run asks no
        more of them, and splitting every directive cost each process a tenth of a second)."""
        return frozenset(directive.split(None, 1)[0] for _, directive, _ in self.written_samples)

    def check(self) -> None:
        """Read now what a run reads only where it needs it: a mistake in it raises here."""
        for name in ("start", "continues", "ends", "back", "after", "reduce", "keep", "samples"):
            getattr(self, name)

    @functools.cached_property
    def start(self) -> re.Pattern[str] | Start:
        """Where a block begins in its peeled trigger line: a Start where a lead may stand
        before it, else the pattern alone (the triggers where it writes no start)."""
        core = re.compile(_either(self.written["start"] or self.triggers))
        leads = self.written["lead"]
        return Start(core, re.compile(f"(?:{_either(leads)})\\Z")) if leads else core

    @functools.cached_property
    def continues(self) -> re.Pattern[str] | None:
        return _compiled(self.written["continue"])

    @functools.cached_property
    def ends(self) -> re.Pattern[str] | None:
        return _compiled(self.written["end"])

    @functools.cached_property
    def back(self) -> re.Pattern[str] | None:
        return _compiled(self.written["back"])

    @functools.cached_property
    def after(self) -> re.Pattern[str] | None:
        """A line after one this matches continues the block, whatever it holds."""
        return _compiled(self.written["after"])

    @functools.cached_property
    def reduce(self) -> re.Pattern[str] | None:
        """A line's start that makes it read as its kept parts (only where `keep` is written)."""
        return re.compile(self.written["reduce"][-1]) if self.written["reduce"] and self.written["keep"] else None

    @functools.cached_property
    def keep(self) -> re.Pattern[str] | None:
        return re.compile(self.written["keep"][-1]) if self.written["keep"] else None

    @functools.cached_property
    def trigger_text(self) -> re.Pattern[str]:
        """The family's triggers, over peeled text."""
        return re.compile(_either(self.triggers))

    @functools.cached_property
    def start_anywhere(self) -> Regex | re.Pattern[bytes]:
        """The lines the family's blocks may start on, over the bytes of many lines: the
        core's DFA, which may find more lines than `start` does (prefilter.line_superset;
        the caller reads each line it finds with `start`), or `re` where no DFA runs it."""
        pattern = _either(self.written["start"] or self.triggers)  # the pattern of `start`, which needs no compiling here
        return line_superset(pattern, re.MULTILINE) or re.compile(pattern.encode(), re.MULTILINE)

    @functools.cached_property
    def parser(self) -> Lark:
        from lark import Lark

        return Lark.open(str(self.path), parser="lalr", lexer="contextual", cache=_cache_file(self.path))

    @functools.cached_property
    def transformer(self) -> Transformer:
        cls = self.transformer_class or importlib.import_module(f"oomlens.families.{self.name}").Transformer
        return cls(visit_tokens=False)  # rules only: no family transforms a token alone

    def parse(self, text: str) -> tuple[list[dict[str, Any]], bool]:
        """Parse one block into event drafts; the flag is False where the text may have been cut
        inside what the grammar reads (parse_prefix)."""
        if self.reduce is not None and "\n" not in text and (head := self.reduce.match(text)):
            # family() sets reduce only together with keep: no check of keep per block
            text = " ".join([head.group(0), *(m.group(0) for m in self.keep.finditer(text, head.end()))])  # type: ignore[union-attr]
        if self.shapes is not None and "\n" not in text and len(text) <= MAX_SHAPE_LINE:
            drafts, complete = self._parse_shape(text, self.shapes)
        else:
            tree, complete = parse_prefix(self.parser, text)
            drafts = self._transform(tree)
        cut = cut_number(text) if not complete else None
        if cut is not None:  # the text stops inside a number that may have gone on: not read
            tree, complete = parse_prefix(self.parser, text[:cut])
            drafts, complete = self._transform(tree), False
        if not drafts:
            return [], False
        if not complete:
            for draft in drafts:
                draft.setdefault("fields", {})["truncated"] = True
        return drafts, complete

    def _parse_shape(self, text: str, shapes: dict[str, tuple[Any, bool]]) -> tuple[Any, bool]:
        """Parse once per line shape and reuse the tree, its numbers read again from each
        line: memory lines come by the hundred thousand. A shape is the line with every
        number (any width, sign, fraction or exponent) written as one `0`, so a metric that
        prints `-1.2e-05` on one step and `0.37` on the next keeps its shape; each number
        goes back into the token that held its place, by its order in the line. `shapes` is
        the family's shape cache.

        A shape seen once is parsed as the line stands: the plan is made when it comes again
        (making one costs more than the parse, and a line with an id in it, a shard's hash,
        has a shape of its own)."""
        numbers, shape = numbers_and_shape(text)
        cached = shapes.get(shape)
        if cached is None:
            if len(shapes) >= MAX_SHAPES:
                shapes.clear()
            shapes[shape] = ONCE
            tree, complete = parse_prefix(self.parser, text)
            return self._transform(tree), complete
        if cached is ONCE:
            tree, complete = parse_prefix(self.parser, shape)
            cached = shapes[shape] = (None if tree is None else self._compile(tree, shape), complete)
        plan, complete = cached
        if plan is None or not complete:  # a cut line: its own parse, its own prefix
            tree, complete = parse_prefix(self.parser, text)
            return self._transform(tree), complete
        try:
            return plan(numbers), complete
        except Exception:  # noqa: BLE001 - a value its Transformer cannot read: the tree, read part by part
            return self._transform(parse_prefix(self.parser, text)[0]), complete

    def _transform(self, tree: Tree | None) -> list[dict[str, Any]]:
        """The drafts of a parse tree. Where a rule's method fails on what the log printed (a
        number no conversion reads), the block keeps what the rest of it says: that rule is
        read as None, its parents as far as they can, and each draft lists in
        `fields["unread"]` the parts it lost (the scanner tells them as a problem)."""
        from lark.exceptions import LarkError

        if tree is None:
            return []
        try:
            return self.transformer.transform(tree)
        except LarkError:
            unread: list[str] = []
            made = _tolerant(self.transformer, tree, unread)
            if not isinstance(made, list):
                raise
            drafts = [d for d in made if isinstance(d, dict)]  # a draft of the failed part is None
            for draft in drafts:
                draft.setdefault("fields", {})["unread"] = unread
            return drafts

    def _compile(self, tree: Tree, shape: str) -> Callable[[list[str]], Any] | None:
        """A shape's tree made one function of the line's numbers: each rule's Transformer
        method called on its children, a token that held numbers written again with the
        line's (a token without one is the same in every line), as lark's Transformer would.
        Written out as one expression, it costs a third less than walking the tree at every
        line. A method of `lark.v_args(inline=True)` is called with its children as
        arguments, as lark calls it; one that wants the tree or its meta has no plan. Nothing of the line goes into the code:
        kept tokens and methods are passed by name. A tree too deep to write out has no
        plan; its lines parse one by one."""
        from lark import Token, Tree

        inline = _inline()
        names: dict[str, Any] = {"Tree": Tree, "read": _Refilled.read, "fill": _Refilled.fill}
        places = [m.span() for m in NUMBER_RUN.finditer(shape)]  # where each number stands in the shape
        starts = [a for a, _ in places]

        def expression(node: Any) -> str:
            if isinstance(node, Token):
                start, end = node.start_pos, node.end_pos
                if start is None or end is None:
                    if "0" in node:  # where it stood is not known: its numbers cannot be put back
                        raise SyntaxError("a token without its place")
                else:
                    first = max(0, bisect.bisect_right(starts, start) - 1)  # a number that begins before the token may run into it
                    inside = [i for i in range(first, bisect.bisect_left(starts, end)) if places[i][1] > start]
                    if any(places[i][0] < start or places[i][1] > end for i in inside):
                        raise SyntaxError("a number split between tokens")  # `0.0` where the grammar reads `0` and `.0`: its digits cannot go back
                    if len(inside) == 1 and places[inside[0]] == (start, end):
                        return f"read(numbers, {inside[0]}, {str(node.type)!r})"  # the token is the number
                    if inside:
                        spans = [(a - start, b - start) for a, b in (places[i] for i in inside)]
                        ends = [0] + [b for _, b in spans]
                        pieces = [str(node)[ends[k] : a] for k, (a, _) in enumerate(spans)] + [str(node)[ends[-1] :]]
                        names[f"k{len(names)}"] = (tuple(pieces), tuple(inside))
                        return f"fill(numbers, k{len(names) - 1}, {str(node.type)!r})"
            if not isinstance(node, Tree):
                names[f"k{len(names)}"] = node
                return f"k{len(names) - 1}"
            children = ", ".join(expression(child) for child in node.children)
            method = getattr(self.transformer, node.data, None)
            wrapper = getattr(method, "visit_wrapper", None)  # lark's v_args: how lark calls the method
            if wrapper is not None and wrapper is not inline:
                raise SyntaxError("a method lark calls with more than its children (v_args meta or tree)")
            names[f"m{len(names)}"] = method if method is not None else node.data
            if method is None:
                return f"Tree(m{len(names) - 1}, [{children}])"
            return f"m{len(names) - 1}({children})" if wrapper is inline else f"m{len(names) - 1}([{children}])"

        try:
            return eval(f"lambda numbers: {expression(tree)}", names)  # noqa: S307 - code made from the grammar's tree alone
        except (SyntaxError, RecursionError, MemoryError):
            return None


@functools.cache
def _inline() -> Any:
    """How lark calls a method of v_args(inline=True): with its children as arguments, which a plan does too."""
    from lark import v_args

    return getattr(v_args(inline=True)(lambda *children: children), "visit_wrapper", None)


class _Refilled(str):
    """A token read again from a line of a cached shape: its text and its lark `type`, not
    the positions a lark Token also carries (a lark Token costs three times as much to
    make, and a shape-cached family's Transformer reads only text and type)."""

    type: str

    @classmethod
    def read(cls, numbers: list[str], index: int, type_: str) -> _Refilled:
        refilled = cls(numbers[index])
        refilled.type = type_
        return refilled

    @classmethod
    def fill(cls, numbers: list[str], template: tuple[tuple[str, ...], tuple[int, ...]], type_: str) -> _Refilled:
        """A token with numbers inside other text (a label that counts something)."""
        pieces, which = template
        text = pieces[0] + "".join(numbers[i] + piece for i, piece in zip(which, pieces[1:], strict=True))
        refilled = cls(text)
        refilled.type = type_
        return refilled


IMPORT = re.compile(r"^%import \.(\w+)", re.MULTILINE)


def _cache_file(path: Path) -> str:
    """Where lark keeps a grammar's compiled parser: named by the grammar's text and the
    texts of the grammars it imports. lark's own `cache=True` is named by the grammar's text
    alone, so two checkouts whose common.lark differ (two releases, two worktrees) would
    share one parser, built from the other's terminals."""
    import hashlib
    import sys
    import tempfile

    import lark

    text = path.read_text(encoding="utf-8")
    digest = hashlib.sha256(text.encode())
    for name in sorted(set(IMPORT.findall(text))):
        imported = path.with_name(f"{name}.lark")
        digest.update(imported.read_bytes() if imported.is_file() else name.encode())
    digest.update(f"{lark.__version__} {sys.version_info[:2]}".encode())
    return str(Path(tempfile.gettempdir()) / f".oomlens_lark_{digest.hexdigest()[:32]}.tmp")


def _tolerant(transformer: Transformer, tree: Tree, unread: list[str]) -> Any:
    """`tree` transformed as lark would, except that a rule whose method raises is None
    (its rule and error noted in `unread`): its parent reads the rest of its children."""
    from lark import Tree
    from lark.exceptions import LarkError

    from .sources import error_line

    children = [_tolerant(transformer, c, unread) if isinstance(c, Tree) else c for c in tree.children]
    try:
        return transformer._call_userfunc(tree, children)
    except LarkError as err:
        unread.append(f"{tree.data}: {error_line(err)}")
        return None


ONCE: tuple[Any, bool] = (None, False)  # a shape cache's mark of a shape seen once, parsed as its line stood
CUT_NUMBER = re.compile(r"(?<![\d.,])\d[\d,]*(?:\.\d*)?$")  # a number where a block that parses only in part stops
CUT_REACH = 1 << 12  # how far from its end a text is looked at for it: a search from the start costs a megabyte line 10 ms


def cut_number(text: str) -> int | None:
    """Where the number `text` stops inside begins (None: it stops inside none). Looked for
    in its last CUT_REACH characters only, and called once per parse: a number longer than
    that is read as it stands (events.sized bounds it)."""
    m = CUT_NUMBER.search(text, max(0, len(text) - CUT_REACH))
    return None if m is None else m.start()


def parse_prefix(parser: Lark, text: str) -> tuple[Any, bool]:
    """Parse `text`, or else its longest prefix (in tokens) after which the input may end;
    the flag is False where the text may have been cut inside what the grammar reads.

    A cut stops a text inside its last word (a wrap, a paste's end). So a prefix that ends
    where the grammar met a word it does not know, with another word after that word's
    token on the same line, is whole: those words were written, not cut (a label after a
    memory line). Unless a terminal expected there may hold them: one that spans words, or
    a literal the text follows into a word (a literal of several words cut short, or a wrap
    joined to it). A word the grammar stops inside (`56.2e-04` where it reads an integer)
    or a free text that runs to the end is read in part, as a cut is.

    The tokens are read once; a prefix is parsed again from them only where it may end,
    the longest first: a copy of the parser at every such token (each as long as the parse
    so far) made a cut 400-frame traceback cost seconds."""
    from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

    try:
        return parser.parse(text), True
    except UnexpectedInput:
        pass
    interactive = parser.parse_interactive(text)
    tokens: list[Token] = []
    ends: list[int] = []  # LALR offers $END wherever a merged lookahead allows a reduce: try each
    written_on = False  # words the grammar does not read, and more after them: no cut
    try:
        for token in interactive.iter_parse():  # yields each token before it feeds it
            if "$END" in interactive.choices():
                ends.append(len(tokens))
            tokens.append(token)
    except UnexpectedToken as err:
        start, end = err.token.start_pos, err.token.end_pos
        written_on = start is not None and end is not None and _written_on(parser, text, start, end, err.expected)
    except UnexpectedCharacters as err:
        at = err.pos_in_stream
        written_on = at is not None and _written_on(parser, text, at, at, err.allowed)
    except LarkError:
        pass  # a cut word does not lex: the state after the last whole token still counts
    if "$END" in interactive.choices():
        try:
            return interactive.feed_eof(), written_on
        except LarkError:
            pass
    for count in reversed(ends[-PREFIX_TRIES:]):
        again = parser.parse_interactive("")
        try:
            for token in tokens[:count]:
                again.feed_token(token)
            return again.feed_eof(), False
        except LarkError:
            continue
    return None, False


PREFIX_TRIES = 8  # the longest prefixes that may end tried, each parsed again from its tokens


_NEXT_WORD = re.compile(r"[ \t]+\S")


def _written_on(parser: Lark, text: str, start: int, end: int, expected: Iterable[str]) -> bool:
    """Whether an unknown token at text[start:end] begins a word, the line goes on with
    another word after it, and no terminal `expected` there may have been cut in the words
    that follow: then the text was not cut there."""
    if not (start == 0 or text[start - 1] in " \t") or "\n" in text[start:] or _NEXT_WORD.search(text, end) is None:
        return False
    rest = text[start:].rstrip()
    for name in expected:
        try:
            pattern = parser.get_terminal(name).pattern
        except KeyError:  # $END, lark's <END-OF-FILE>
            continue
        if pattern.type == "str":
            literal, said = (pattern.value.lower(), rest.lower()) if "i" in pattern.flags else (pattern.value, rest)
            common = len(os.path.commonprefix([literal, said]))
            if common and not said[common - 1].isspace():  # the text is that literal cut, or parts from it inside a word
                return False
        elif _spans_words(pattern.to_regexp()):
            return False
    return True


@functools.cache
def _spans_words(regex: str) -> bool:
    """Whether a match of `regex` may hold a space or a tab (then a cut may stop inside it
    with words before the cut)."""
    from re import _parser as sre

    blank = {ord(" "), ord("\t")}

    def in_set(items: list) -> bool:
        negate = any(op is sre.NEGATE for op, _ in items)
        hit = False
        for op, arg in items:
            if op is sre.LITERAL:
                hit |= arg in blank
            elif op is sre.RANGE:
                hit |= any(arg[0] <= b <= arg[1] for b in blank)
            elif op is sre.CATEGORY:
                hit |= arg in (sre.CATEGORY_SPACE, sre.CATEGORY_NOT_DIGIT, sre.CATEGORY_NOT_WORD)
        return hit != negate

    def spans(seq: Iterable) -> bool:
        for op, arg in seq:
            if op is sre.ANY or (op is sre.LITERAL and arg in blank) or (op is sre.NOT_LITERAL and arg not in blank):
                return True
            if op is sre.IN and in_set(arg):
                return True
            if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT) and spans(arg[2]):
                return True
            if op is sre.SUBPATTERN and spans(arg[3]):
                return True
            if op is sre.BRANCH and any(spans(b) for b in arg[1]):
                return True
            if op is sre.ATOMIC_GROUP and spans(arg):
                return True
        return False

    return spans(sre.parse(regex))


def grammar_dir() -> Path:
    """The `.lark` files: inside the installed package, or beside it in a source checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "grammars", here.parent / "grammars"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("oomlens grammars not found (neither in the package nor beside it)")


def _either(patterns: list[str]) -> str:
    """One pattern that matches where any of `patterns` does, the first that matches first."""
    return "|".join(f"(?:{p})" for p in patterns)


def _compiled(patterns: list[str]) -> re.Pattern[str] | None:
    return re.compile(_either(patterns)) if patterns else None


def read_family(path: Path, transformer: type[Transformer] | None = None) -> Family:
    """Read a family's directives and samples from its grammar file; its Transformer is
    `transformer`, or else `oomlens.families.<name of the file>.Transformer`."""
    triggers: list[str] = []
    # the other pattern directives, each a pattern more where it stands again (of reduce and keep, the last counts)
    written: dict[str, list[str]] = {key: [] for key in ("start", "lead", "continue", "end", "back", "after", "reduce", "keep")}
    max_lines = 1
    shapes = False
    samples: list[tuple[int, str, str]] = []  # as Family.written_samples
    current: int | None = None  # the sample whose text the `//|` lines write
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if raw.startswith("//|"):
            if current is None:
                raise ValueError(f"{path.name}:{number}: sample text before a sample directive")
            body = raw[4:] if raw.startswith("//| ") else raw[3:]
            line, directive, text = samples[current]
            samples[current] = (line, directive, f"{text}\n{body}" if text else body)
            continue
        current = None
        m = DIRECTIVE.match(raw)
        if not m:
            continue
        key, value = m.group(1), m.group(2).rstrip()
        if key == "trigger":
            triggers.append(value)
        elif key in written:
            written[key].append(value)
        elif key == "max_lines":
            max_lines = int(value)
        elif key == "cache":
            if value != "shapes":
                raise ValueError(f"{path.name}:{number}: cache takes 'shapes'")
            shapes = True
        elif key == "sample":
            current = len(samples)
            samples.append((number, value, ""))
        else:
            raise ValueError(f"{path.name}:{number}: unknown directive {key!r}")
    if not triggers:
        raise ValueError(f"{path.name}: a family needs at least one trigger")
    for trigger in triggers:
        if ANCHOR.search(ESCAPED.sub("", LINE_END.sub("", trigger))):
            raise ValueError(
                f"{path.name}: trigger {trigger!r}: ^ and $ are the ends of the buffer the core searches, not of a line (write (?:\\s|$) for a word's end)"
            )
    return Family(
        name=path.stem,
        path=path,
        triggers=triggers,
        max_lines=max_lines,
        written=written,
        written_samples=samples,
        shapes={} if shapes else None,
        transformer_class=transformer,
    )


@functools.cache
def family(path: Path, transformer: type[Transformer] | None = None) -> Family:
    """A family added beside the shipped ones (oomlens.registry), read once per process and
    checked whole: what its file writes wrong fails where it is added, not later in a run
    (the suite checks the shipped ones)."""
    added = read_family(path, transformer)
    added.check()
    return added


@functools.cache
def families() -> tuple[Family, ...]:
    """Every format family shipped, in file-name order (`common.lark` holds shared terminals)."""
    return tuple(read_family(p) for p in sorted(grammar_dir().glob("*.lark")) if p.stem != "common")
