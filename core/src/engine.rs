//! The matching itself, without Python: what `lib.rs` exposes and the property tests drive.

use regex_automata::{
    hybrid::dfa::{Cache, OverlappingState, DFA},
    meta,
    nfa::thompson,
    util::syntax,
    Anchored, Input, MatchError, MatchKind, PatternID,
};

/// Bytes read as Latin-1, one character a byte, as Python's `re` reads them: no Unicode
/// classes, and a byte that is not UTF-8 is a character like any other.
pub(crate) fn syntax_config() -> syntax::Config {
    syntax::Config::new().unicode(false).utf8(false)
}

/// Room for the lazy DFA's states: all triggers at once want more than the default.
const CACHE_BYTES: usize = 8 << 20;

/// Many patterns at once, every match of each reported by where it ends (a lazy DFA built
/// as it reads: compiling costs a parse, not the DFA's every state).
pub struct Matcher {
    forward: DFA,
    reverse: Option<DFA>,
}

/// The lazy DFAs' states, built as bytes are read: one per matcher and process.
pub struct Caches {
    forward: Cache,
    reverse: Option<Cache>,
}

/// A run of lines holding matches: [lo, hi) with its line breaks, where its last match ends,
/// and where each pattern's matches end (patterns in the order first seen).
#[derive(Debug, PartialEq, Eq)]
pub struct Run {
    pub lo: usize,
    pub hi: usize,
    pub last: usize,
    pub ends: Vec<(usize, Vec<usize>)>,
}

impl Matcher {
    pub fn new(patterns: &[String], starts: bool) -> Result<Matcher, String> {
        let build = |reverse: bool| {
            DFA::builder()
                .configure(
                    DFA::config()
                        .match_kind(MatchKind::All)
                        .cache_capacity(CACHE_BYTES)
                        .starts_for_each_pattern(reverse),
                )
                .syntax(syntax_config())
                .thompson(thompson::Config::new().reverse(reverse))
                .build_many(patterns)
                .map_err(|err| err.to_string())
        };
        let forward = build(false)?;
        let reverse = if starts { Some(build(true)?) } else { None };
        Ok(Matcher { forward, reverse })
    }

    pub fn caches(&self) -> Caches {
        Caches {
            forward: self.forward.create_cache(),
            reverse: self.reverse.as_ref().map(|r| r.create_cache()),
        }
    }

    /// Calls `found(end, pattern)` for every match in `hay`, in the order of their ends,
    /// until it returns false. `^` and `$` are the ends of `hay`.
    pub fn each(&self, caches: &mut Caches, hay: &[u8], mut found: impl FnMut(usize, usize) -> bool) -> Result<(), MatchError> {
        let input = Input::new(hay);
        let mut state = OverlappingState::start();
        loop {
            self.forward.try_search_overlapping_fwd(&mut caches.forward, &input, &mut state)?;
            match state.get_match() {
                None => return Ok(()),
                Some(m) => {
                    if !found(m.offset(), m.pattern().as_usize()) {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// The runs of lines of `hay` that hold a match (a match belongs to the line of its last
    /// byte; lines that follow each other make one run).
    pub fn spans(&self, caches: &mut Caches, hay: &[u8]) -> Result<Vec<Run>, MatchError> {
        let mut all = Vec::new();
        self.each(caches, hay, |stop, pattern| {
            all.push((stop, pattern));
            true
        })?;
        all.sort_unstable();
        let mut runs: Vec<Run> = Vec::new();
        for (stop, pattern) in all {
            let joined = match runs.last_mut() {
                Some(run) if stop <= run.hi => true,
                Some(run) => {
                    let (lo, hi) = line_around(hay, stop.saturating_sub(1));
                    if lo <= run.hi {
                        run.hi = hi;
                        true
                    } else {
                        false
                    }
                }
                None => false,
            };
            if !joined {
                let (lo, hi) = line_around(hay, stop.saturating_sub(1));
                runs.push(Run {
                    lo,
                    hi,
                    last: stop,
                    ends: Vec::new(),
                });
            }
            let run = runs.last_mut().expect("a run was just found or made");
            run.last = stop;
            match run.ends.iter_mut().find(|(p, _)| *p == pattern) {
                Some((_, stops)) => stops.push(stop),
                None => run.ends.push((pattern, vec![stop])),
            }
        }
        Ok(runs)
    }

    /// (start, end) of the match that ends last in `hay` (the last pattern on a tie): its
    /// leftmost start where the matcher was made with `starts`, else 0.
    pub fn last_match(&self, caches: &mut Caches, hay: &[u8]) -> Result<Option<(usize, usize)>, MatchError> {
        let mut last: Option<(usize, usize)> = None;
        self.each(caches, hay, |stop, pattern| {
            if last.is_none_or(|(s, _)| stop >= s) {
                last = Some((stop, pattern));
            }
            true
        })?;
        let Some((stop, pattern)) = last else { return Ok(None) };
        let (Some(reverse), Some(cache)) = (&self.reverse, caches.reverse.as_mut()) else {
            return Ok(Some((0, stop)));
        };
        let pid = PatternID::new(pattern).expect("a pattern the matcher reported");
        let input = Input::new(hay).range(..stop).anchored(Anchored::Pattern(pid));
        let start = reverse.try_search_rev(cache, &input)?.map_or(0, |m| m.offset());
        Ok(Some((start, stop)))
    }
}

/// The line holding byte `at` of `hay`, with its line break: [start, stop).
pub fn line_around(hay: &[u8], at: usize) -> (usize, usize) {
    let lo = hay[..at].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let hi = hay[at..].iter().position(|&b| b == b'\n').map_or(hay.len(), |i| at + i + 1);
    (lo, hi)
}

/// A match's groups: each one's span and text (None where it took no part).
pub struct Found {
    pub spans: Vec<Option<(usize, usize)>>,
    pub texts: Vec<Option<Vec<u8>>>,
}

/// One pattern, leftmost-first as Python's `re` (whose choice among alternatives it makes).
pub struct Searcher {
    regex: meta::Regex,
}

impl Searcher {
    pub fn new(pattern: &str) -> Result<Searcher, String> {
        let regex = meta::Regex::builder().syntax(syntax_config()).build(pattern).map_err(|err| err.to_string())?;
        Ok(Searcher { regex })
    }

    /// The leftmost match in hay[pos..]: the bytes before `pos` are seen by `^` and `\b`.
    pub fn search(&self, hay: &[u8], pos: usize) -> Option<Found> {
        self.search_in(&Input::new(hay).span(pos..hay.len()), hay)
    }

    /// Every match in hay[pos..], leftmost-first and apart, as `re.finditer` gives them (after
    /// an empty match the next is looked for a byte further on).
    pub fn find_all(&self, hay: &[u8], pos: usize) -> Vec<Found> {
        let mut all = Vec::new();
        let mut at = pos;
        while at <= hay.len() {
            let Some(found) = self.search_in(&Input::new(hay).span(at..hay.len()), hay) else {
                break;
            };
            let (start, end) = found.spans[0].expect("a match has its whole span");
            at = if end > start { end } else { end + 1 };
            all.push(found);
        }
        all
    }

    fn search_in(&self, input: &Input<'_>, hay: &[u8]) -> Option<Found> {
        if self.regex.captures_len() == 1 {
            let m = self.regex.search(input)?;
            return Some(Found {
                spans: vec![Some((m.start(), m.end()))],
                texts: vec![Some(hay[m.range()].to_vec())],
            });
        }
        let mut caps = self.regex.create_captures();
        self.regex.search_captures(input, &mut caps);
        if !caps.is_match() {
            return None;
        }
        let spans: Vec<_> = (0..caps.group_len()).map(|i| caps.get_group(i).map(|s| (s.start, s.end))).collect();
        let texts = spans.iter().map(|s| s.map(|(a, b)| hay[a..b].to_vec())).collect();
        Some(Found { spans, texts })
    }
}

/// How many times `byte` stands in `hay`. Counted in bytes over pieces of 255 (no byte
/// counter overflows), which the compiler makes SIMD: a count into a usize it does not.
pub fn count_byte(hay: &[u8], byte: u8) -> usize {
    hay.chunks(255)
        .map(|piece| usize::from(piece.iter().map(|&b| u8::from(b == byte)).sum::<u8>()))
        .sum()
}

/// A number as shapes.py's NUMBER_RUN finds one in ASCII text: `-?\d+(\.\d+)?([eE][-+]?\d+)?`,
/// leftmost and apart, not glued behind a letter, a digit, `_` or `.`. The line's shape is
/// its text with each number written as the placeholder of its form (sign, fraction,
/// exponent): `0`, `-0`, `0.0`, `0e0`, ... The spans of the numbers come with it.
pub fn numbers_and_shape(text: &[u8]) -> (Vec<(usize, usize)>, Vec<u8>) {
    let digit = |at: usize| text.get(at).is_some_and(u8::is_ascii_digit);
    let digits_from = |mut at: usize| {
        while digit(at) {
            at += 1;
        }
        at
    };
    let mut numbers = Vec::new();
    let mut shape = Vec::with_capacity(text.len());
    let (mut at, mut copied) = (0, 0);
    while at < text.len() {
        let glued = at > 0 && matches!(text[at - 1], b'A'..=b'Z' | b'a'..=b'z' | b'_' | b'0'..=b'9' | b'.');
        let sign = text[at] == b'-';
        if glued || !digit(at + usize::from(sign)) {
            at += 1;
            continue;
        }
        let mut end = digits_from(at + usize::from(sign));
        let fraction = text.get(end) == Some(&b'.') && digit(end + 1);
        if fraction {
            end = digits_from(end + 1);
        }
        let signed = matches!(text.get(end + 1), Some(b'-' | b'+'));
        let exponent = matches!(text.get(end), Some(b'e' | b'E')) && digit(end + 1 + usize::from(signed));
        if exponent {
            end = digits_from(end + 1 + usize::from(signed));
        }
        shape.extend_from_slice(&text[copied..at]);
        shape.extend_from_slice(if sign { b"-0" } else { b"0" });
        if fraction {
            shape.extend_from_slice(b".0");
        }
        if exponent {
            shape.extend_from_slice(b"e0");
        }
        numbers.push((at, end));
        at = end;
        copied = end;
    }
    shape.extend_from_slice(&text[copied..]);
    (numbers, shape)
}

/// The fuzzers' entry (core/fuzz, and the regressions `cargo test` replays): every matcher of
/// the core over the same bytes, the first byte choosing a window, with the invariants each
/// promises. A panic here is a bug the Python side would see as a failed input.
pub fn fuzz_one(data: &[u8]) {
    const PATTERNS: [&str; 5] = [
        r"Killed process \d+ \(",
        r"\S invoked oom-killer:",
        r"(?m:^):(?:actor_name|task_name):",
        r#"[^"\n]{1,50}"#,
        r"\d GB / \d+(?:\.\d+)? GB\.",
    ];
    static COMPILED: std::sync::OnceLock<(Matcher, Searcher)> = std::sync::OnceLock::new();
    let (matcher, searcher) = COMPILED.get_or_init(|| {
        let patterns: Vec<String> = PATTERNS.iter().map(|p| p.to_string()).collect();
        let matcher = Matcher::new(&patterns, true).expect("the fuzzers' patterns compile");
        (matcher, Searcher::new(r"(?:^|\D)(20\d\d)-\d\d-\d\d[ T_]\d\d[:-]\d\d").expect("compiles"))
    });
    let mut caches = matcher.caches();
    let cut = data.first().map_or(0, |&b| usize::from(b) % (data.len() + 1));
    let hay = &data[cut..];
    let runs = matcher.spans(&mut caches, hay).expect("a lazy DFA of no Unicode boundary does not quit");
    for run in &runs {
        assert!(run.lo < run.hi && run.hi <= hay.len() && run.lo < run.last && run.last <= run.hi);
    }
    if let Some((start, stop)) = matcher.last_match(&mut caches, hay).expect("as above") {
        assert!(start <= stop && stop <= hay.len());
    }
    for found in searcher.find_all(data, cut) {
        let (start, end) = found.spans[0].expect("a match has its span");
        assert!(cut <= start && start <= end && end <= data.len());
    }
    let (numbers, shape) = numbers_and_shape(hay);
    assert!(numbers.windows(2).all(|w| w[0].1 <= w[1].0) && shape.len() <= hay.len() + numbers.len() * 6);
    assert_eq!(count_byte(hay, b'\n'), hay.iter().filter(|&&b| b == b'\n').count());
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PATTERNS: [&str; 6] = [
        r"Killed process \d+ \(",
        r"[Oo]ut of [Mm]emory(?: \(x\))?: Kill",
        r"\S invoked",
        r"\d GB / \d+(?:\.\d+)? GB\.",
        r"a[^b\n]{1,5}b",
        r"(?m:^):actor_name:",
    ];
    const PIECES: [&[u8]; 9] = [
        b"Killed process 12 (",
        b"Out of memory: Kill",
        b"x invoked",
        b"2 GB / 80 GB.",
        b"a12b",
        b":actor_name:",
        b"\n",
        b"\xff\xc3",
        b" ",
    ];

    fn patterns() -> Vec<String> {
        PATTERNS.iter().map(|p| p.to_string()).collect()
    }

    /// Text made of the patterns' own pieces and random bytes, as a mutated log is.
    fn texts() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(
            prop_oneof![
                prop::sample::select(PIECES.to_vec()).prop_map(|p| p.to_vec()),
                prop::collection::vec(any::<u8>(), 0..4)
            ],
            0..10,
        )
        .prop_map(|parts| parts.concat())
    }

    /// Every (end, pattern) where some span of `hay` is a whole match: the brute force. Each
    /// span is searched in place, anchored at its start and ending at its end, so that `^`
    /// sees the byte before it as the matcher does.
    fn brute(hay: &[u8]) -> Vec<(usize, usize)> {
        let whole: Vec<meta::Regex> = PATTERNS
            .iter()
            .map(|p| meta::Regex::builder().syntax(syntax_config()).build(&format!("(?:{p})$")).unwrap())
            .collect();
        let mut found = Vec::new();
        for (index, regex) in whole.iter().enumerate() {
            for end in 0..=hay.len() {
                if (0..=end).any(|start| regex.search(&Input::new(&hay[..end]).span(start..end).anchored(Anchored::Yes)).is_some()) {
                    found.push((end, index));
                }
            }
        }
        found.sort_unstable();
        found
    }

    proptest! {
        #[test]
        fn every_end_of_every_match_is_reported(hay in texts()) {
            let matcher = Matcher::new(&patterns(), true).unwrap();
            let mut caches = matcher.caches();
            let mut found = Vec::new();
            matcher.each(&mut caches, &hay, |end, pattern| { found.push((end, pattern)); true }).unwrap();
            prop_assert!(found.windows(2).all(|w| w[0].0 <= w[1].0), "in the order of their ends");
            found.sort_unstable();
            prop_assert_eq!(found, brute(&hay));
        }

        #[test]
        fn runs_cover_every_match_on_whole_lines(hay in texts()) {
            let matcher = Matcher::new(&patterns(), true).unwrap();
            let mut caches = matcher.caches();
            let runs = matcher.spans(&mut caches, &hay).unwrap();
            for run in &runs {
                prop_assert!(run.lo == 0 || hay[run.lo - 1] == b'\n');
                prop_assert!(run.hi == hay.len() || hay[run.hi - 1] == b'\n');
                prop_assert!(run.ends.iter().all(|(_, ends)| ends.iter().all(|&e| run.lo < e && e <= run.hi)));
            }
            prop_assert!(runs.windows(2).all(|w| w[0].hi < w[1].lo), "runs apart: lines that touch are one run");
            let told: usize = runs.iter().map(|r| r.ends.iter().map(|(_, e)| e.len()).sum::<usize>()).sum();
            prop_assert_eq!(told, brute(&hay).len());
        }

        #[test]
        fn the_last_match_starts_where_a_whole_match_starts(hay in texts()) {
            let matcher = Matcher::new(&patterns(), true).unwrap();
            let mut caches = matcher.caches();
            if let Some((start, stop)) = matcher.last_match(&mut caches, &hay).unwrap() {
                prop_assert_eq!(Some(stop), brute(&hay).last().map(|(e, _)| *e));
                prop_assert!(start <= stop);
            } else {
                prop_assert!(brute(&hay).is_empty());
            }
        }

        #[test]
        fn search_is_leftmost_and_never_panics(hay in prop::collection::vec(any::<u8>(), 0..64), pos in 0usize..8) {
            let searcher = Searcher::new(r"(\d+) GB|(x)").unwrap();
            let pos = pos.min(hay.len());
            if let Some(found) = searcher.search(&hay, pos) {
                let (start, end) = found.spans[0].unwrap();
                prop_assert!(pos <= start && start <= end && end <= hay.len());
                prop_assert_eq!(found.texts[0].as_deref(), Some(&hay[start..end]));
            }
        }
    }

    #[test]
    fn numbers_are_masked_by_their_form() {
        let (numbers, shape) = numbers_and_shape(b"gpu0 used -1.5e-05 GB of 80, v1.2.3 x=-7 3-5 1e 2.");
        assert_eq!(String::from_utf8(shape).unwrap(), "gpu0 used -0.0e0 GB of 0, v1.2.3 x=-0 0-0 0e 0.");
        assert_eq!(numbers, vec![(10, 18), (25, 27), (38, 40), (41, 42), (43, 44), (45, 46), (48, 49)]);
    }

    #[test]
    fn counts_every_line_break() {
        assert_eq!(count_byte(b"a\nb\n\n", b'\n'), 3);
        assert_eq!(count_byte(b"", b'\n'), 0);
        let long: Vec<u8> = (0..100_000u32).map(|i| if i % 7 == 0 { b'\n' } else { b'x' }).collect();
        assert_eq!(count_byte(&long, b'\n'), long.iter().filter(|&&b| b == b'\n').count());
    }
}
