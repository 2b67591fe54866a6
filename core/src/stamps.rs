//! Times: the wall-clock layouts of `data/times.toml`, found and read in raw bytes.
//!
//! The layouts come from Python as written in the data file (a name, a pattern with named
//! groups, whether it is looked for anywhere in a line, whether it prints UTC); what a
//! layout's groups spell is read here, once for both readers of times: a line oomlens
//! parses in Python and a reading the core takes whole. A time no clock shows (a 13th
//! month, February 30th) is no time: the search goes on past it.

use regex_automata::{meta, util::captures::Captures, Anchored, Input};

use crate::engine::syntax_config;

/// A wall-clock time as printed: `year` None where the line prints none (vLLM, c10),
/// `zone` (minutes east of UTC) None unless the line says it, as times.py's Stamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stamp {
    pub year: Option<i64>,
    pub month: i64,
    pub day: i64,
    pub hour: i64,
    pub minute: i64,
    pub second: i64,
    pub millis: Option<i64>,
    pub zone: Option<i64>,
}

const MONTHS: [&[u8]; 12] = [b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec"];
const DAYS: [i64; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/// What a layout's named groups hold (None where a group took no part or is empty).
#[derive(Default, Clone, Copy)]
pub struct Parts<'a> {
    pub y: Option<&'a [u8]>,
    pub mo: Option<&'a [u8]>,
    pub mon: Option<&'a [u8]>,
    pub d: Option<&'a [u8]>,
    pub h: Option<&'a [u8]>,
    pub mi: Option<&'a [u8]>,
    pub s: Option<&'a [u8]>,
    pub frac: Option<&'a [u8]>,
    pub zone: Option<&'a [u8]>,
    pub epoch: Option<&'a [u8]>,
}

/// The integer ASCII digits spell (None for anything else, or past i64).
pub fn digits(text: &[u8]) -> Option<i64> {
    if text.is_empty() || text.len() > 18 || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(text.iter().fold(0i64, |n, &b| n * 10 + i64::from(b - b'0')))
}

/// Is this a time a clock shows, in years 1 to 9999 (Python's datetime)?
pub fn on_calendar(year: Option<i64>, month: i64, day: i64, hour: i64, minute: i64, second: i64) -> bool {
    if !(1..=12).contains(&month)
        || day < 1
        || day > DAYS[(month - 1) as usize]
        || !(0..24).contains(&hour)
        || !(0..60).contains(&minute)
        || !(0..60).contains(&second)
    {
        return false;
    }
    match year {
        None => true,
        Some(y) => (1..=9999).contains(&y) && (month != 2 || day < 29 || (y % 4 == 0 && (y % 100 != 0 || y % 400 == 0))),
    }
}

/// Minutes east of UTC of a printed offset: Z, +08:00, +0800, -05.
fn zone_of(text: &[u8]) -> Option<i64> {
    if text == b"Z" {
        return Some(0);
    }
    let digits_only: Vec<u8> = text.get(1..)?.iter().copied().filter(|&b| b != b':').collect();
    let hours = digits(digits_only.get(..2.min(digits_only.len()))?)?;
    let minutes = match digits_only.get(2..4.min(digits_only.len())) {
        Some(m) if !m.is_empty() => digits(m)?,
        _ => 0,
    };
    let total = hours * 60 + minutes;
    Some(if text[0] == b'-' { -total } else { total })
}

/// Days since 1970-01-01 as a (year, month, day) of the proleptic Gregorian calendar.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// The Stamp a layout's groups spell (times.py's stamp_of_groups), or None when they hold
/// no time a clock shows. `utc`: the layout prints UTC without saying so.
pub fn stamp_of_parts(p: &Parts<'_>, utc: bool) -> Option<Stamp> {
    if let Some(epoch) = p.epoch.filter(|e| !e.is_empty()) {
        let mut seconds = digits(epoch)?;
        let mut millis = None;
        if epoch.len() > 10 {
            millis = Some(seconds.rem_euclid(1000));
            seconds = seconds.div_euclid(1000);
        }
        let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
        if !(1..=9999).contains(&year) {
            return None;
        }
        let rest = seconds.rem_euclid(86_400);
        return Some(Stamp {
            year: Some(year),
            month,
            day,
            hour: rest / 3600,
            minute: rest % 3600 / 60,
            second: rest % 60,
            millis,
            zone: Some(0),
        });
    }
    let hour = digits(p.h?)?;
    let month = match p.mon.and_then(|m| MONTHS.iter().position(|name| *name == m)) {
        Some(index) => index as i64 + 1,
        None => digits(p.mo?)?,
    };
    let year = match p.y.filter(|y| !y.is_empty()) {
        Some(y) => Some(digits(y)?),
        None => None,
    };
    let zone = match p.zone.filter(|z| !z.is_empty()) {
        Some(z) => Some(zone_of(z)?),
        None if utc => Some(0),
        None => None,
    };
    let (day, minute) = (digits(p.d?)?, digits(p.mi?)?);
    let mut second = digits(p.s?)?;
    if second == 60 {
        second = 59; // a leap second: Python's clock has none, the second before stands for it
    }
    if !on_calendar(year, month, day, hour, minute, second) {
        return None;
    }
    let millis = match p.frac.filter(|f| !f.is_empty()) {
        Some(frac) => {
            let mut three = frac[..frac.len().min(3)].to_vec();
            three.resize(3, b'0');
            Some(digits(&three)?)
        }
        None => None,
    };
    Some(Stamp {
        year,
        month,
        day,
        hour,
        minute,
        second,
        millis,
        zone,
    })
}

/// One layout of times.toml, as handed over.
pub struct LayoutSpec {
    pub name: String,
    pub pattern: String,
    pub anywhere: bool,
    pub utc: bool,
}

/// The named groups of a layout's pattern, by their index.
#[derive(Default)]
struct Groups {
    y: Option<usize>,
    mo: Option<usize>,
    mon: Option<usize>,
    d: Option<usize>,
    h: Option<usize>,
    mi: Option<usize>,
    s: Option<usize>,
    frac: Option<usize>,
    zone: Option<usize>,
    epoch: Option<usize>,
}

struct Layout {
    /// the layout anywhere in a line, with its groups
    search: meta::Regex,
    /// the layout as a whole text, with its groups (re.fullmatch)
    whole: meta::Regex,
    groups: Groups,
    anywhere: bool,
    utc: bool,
}

impl Layout {
    fn parts<'h>(&self, caps: &Captures, hay: &'h [u8]) -> Parts<'h> {
        let get = |index: Option<usize>| index.and_then(|i| caps.get_group(i)).map(|span| &hay[span.range()]);
        let g = &self.groups;
        Parts {
            y: get(g.y),
            mo: get(g.mo),
            mon: get(g.mon),
            d: get(g.d),
            h: get(g.h),
            mi: get(g.mi),
            s: get(g.s),
            frac: get(g.frac),
            zone: get(g.zone),
            epoch: get(g.epoch),
        }
    }
}

fn build(pattern: &str) -> Result<meta::Regex, String> {
    meta::Regex::builder().syntax(syntax_config()).build(pattern).map_err(|err| err.to_string())
}

/// The layouts, and where Ray's prefix names a line's node.
pub struct Stamps {
    layouts: Vec<Layout>,
    prefix_ip: meta::Regex,
}

/// A time found: where its match stands, and what it reads (None: no time a clock shows).
pub type Found = (usize, usize, Option<Stamp>);

impl Stamps {
    /// `prefix_ip`: where Ray's driver-side prefix names its node (a group), within a line's
    /// first PREFIX_REACH bytes (scan.py's PREFIX_IP).
    pub fn new(specs: &[LayoutSpec], prefix_ip: &str) -> Result<Stamps, String> {
        let mut layouts = Vec::new();
        for spec in specs {
            let search = build(&spec.pattern).map_err(|e| format!("time layout {}: {e}", spec.name))?;
            let whole = build(&format!("^(?:{})$", spec.pattern)).map_err(|e| format!("time layout {}: {e}", spec.name))?;
            let mut groups = Groups::default();
            for (index, name) in search.group_info().pattern_names(regex_automata::PatternID::ZERO).enumerate() {
                let slot = match name {
                    Some("y") => &mut groups.y,
                    Some("mo") => &mut groups.mo,
                    Some("mon") => &mut groups.mon,
                    Some("d") => &mut groups.d,
                    Some("h") => &mut groups.h,
                    Some("mi") => &mut groups.mi,
                    Some("s") => &mut groups.s,
                    Some("frac") => &mut groups.frac,
                    Some("zone") => &mut groups.zone,
                    Some("epoch") => &mut groups.epoch,
                    _ => continue,
                };
                *slot = Some(index);
            }
            layouts.push(Layout {
                search,
                whole,
                groups,
                anywhere: spec.anywhere,
                utc: spec.utc,
            });
        }
        if !specs.iter().any(|s| s.anywhere) {
            return Err("no time layout is looked for anywhere".into());
        }
        Ok(Stamps {
            layouts,
            prefix_ip: build(prefix_ip)?,
        })
    }

    /// What an anywhere time's text reads: the first such layout that reads it whole (times.py's
    /// _stamp_of), None for no time a clock shows.
    pub fn read(&self, text: &[u8]) -> Option<Stamp> {
        for layout in self.layouts.iter().filter(|l| l.anywhere) {
            let mut caps = layout.whole.create_captures();
            layout.whole.search_captures(&Input::new(text).anchored(Anchored::Yes), &mut caps);
            if caps.is_match() {
                return stamp_of_parts(&layout.parts(&caps, text), layout.utc);
            }
        }
        None
    }

    /// Every anywhere time in hay[lo..hi] (leftmost-first, apart, as one alternation of the
    /// layouts in their order finds them; `^` sees the bytes before `lo`), calling
    /// `each(start, end)` until it returns false. Each layout is searched on its own, which
    /// its literals make several times faster than the alternation (an ISO date has none
    /// ahead of it, a vLLM header a word), and their matches are merged: the leftmost first,
    /// the earlier layout's where two start at one place.
    pub fn each(&self, hay: &[u8], lo: usize, hi: usize, mut each: impl FnMut(usize, usize) -> bool) {
        let hay = &hay[..hi];
        let find = |layout: &Layout, at: usize| {
            if at > hi {
                None
            } else {
                layout.search.find(Input::new(hay).span(at..hi)).map(|m| (m.start(), m.end()))
            }
        };
        let anywhere: Vec<&Layout> = self.layouts.iter().filter(|l| l.anywhere).collect();
        let mut next: Vec<Option<(usize, usize)>> = anywhere.iter().map(|l| find(l, lo)).collect();
        loop {
            let Some((_, (start, end))) = next
                .iter()
                .enumerate()
                .filter_map(|(i, m)| m.map(|m| (i, m)))
                .min_by_key(|&(i, (start, _))| (start, i))
            else {
                return;
            };
            if !each(start, end) {
                return;
            }
            let at = if end > start { end } else { end + 1 };
            for (layout, found) in anywhere.iter().zip(next.iter_mut()) {
                if found.is_some_and(|(s, _)| s < at) {
                    *found = find(layout, at);
                }
            }
        }
    }

    /// The first time a clock shows in hay[lo..hi], and where its line begins (not before lo).
    pub fn first(&self, hay: &[u8], lo: usize, hi: usize) -> Option<(Stamp, usize)> {
        let mut found = None;
        self.each(hay, lo, hi, |start, end| match self.read(&hay[start..end]) {
            Some(stamp) => {
                found = Some((stamp, line_start(hay, start).max(lo)));
                false
            }
            None => true,
        });
        found
    }

    /// The last time a clock shows in hay[lo..hi], and where its match starts.
    pub fn last(&self, hay: &[u8], lo: usize, hi: usize) -> Option<(Stamp, usize)> {
        let mut spans = Vec::new();
        self.each(hay, lo, hi, |start, end| {
            spans.push((start, end));
            true
        });
        spans
            .iter()
            .rev()
            .find_map(|&(start, end)| self.read(&hay[start..end]).map(|stamp| (stamp, start)))
    }

    /// Every time of layout `layout` in `line` (leftmost-first, apart), read: the times a
    /// line's envelopes may have taken its own from.
    pub fn of_layout(&self, layout: usize, line: &[u8]) -> Vec<Found> {
        let Some(l) = self.layouts.get(layout) else { return Vec::new() };
        let mut caps = l.search.create_captures();
        let mut found = Vec::new();
        let mut at = 0;
        while at <= line.len() {
            l.search.search_captures(&Input::new(line).span(at..line.len()), &mut caps);
            let Some(m) = caps.get_match() else { break };
            found.push((m.start(), m.end(), stamp_of_parts(&l.parts(&caps, line), l.utc)));
            at = if m.end() > m.start() { m.end() } else { m.end() + 1 };
        }
        found
    }

    pub fn layouts(&self) -> usize {
        self.layouts.len()
    }

    /// The node Ray's prefix names on the line holding `pos` (within its first bytes).
    pub fn node_of_line(&self, hay: &[u8], pos: usize, end: usize) -> Option<String> {
        const PREFIX_REACH: usize = 256;
        let start = line_start(hay, pos);
        let stop = end.min(start + PREFIX_REACH).min(hay.len());
        if start >= stop {
            return None;
        }
        let mut caps = self.prefix_ip.create_captures();
        self.prefix_ip.search_captures(&Input::new(&hay[..stop]).span(start..stop), &mut caps);
        let m = caps.get_match()?;
        if hay[start..m.start()].contains(&b'\n') {
            return None;
        }
        let group = caps.get_group(1)?;
        Some(String::from_utf8_lossy(&hay[group.range()]).into_owned())
    }
}

pub fn line_start(hay: &[u8], pos: usize) -> usize {
    hay[..pos.min(hay.len())].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)
}

fn line_end(hay: &[u8], pos: usize, end: usize) -> usize {
    hay[pos.min(end)..end].iter().position(|&b| b == b'\n').map_or(end, |i| pos + i + 1)
}

/// A time lent by a line: the time, and the node whose prefix that line bears (in a file of
/// many nodes' lines).
pub type Lent = (Stamp, Option<String>);

/// The times of one scan: the last time before the buffer being scanned, and the times in
/// it, found once each as far as they were asked for. Every question is answered as a
/// search of the whole stream would answer it, in any order within a buffer.
pub struct Track {
    /// the last time a clock shows before the buffer's first byte (of the bytes consumed)
    carried: Option<Lent>,
    /// where each time in the buffer stands, up to `scanned` (a line start or `end`)
    spans: Vec<(usize, usize)>,
    read: Vec<Option<Option<Lent>>>,
    scanned: usize,
    end: usize,
    /// whether the file holds many nodes' lines: a time then tells the node that printed it
    nodeless: bool,
    /// bytes searched for times over the stream (each once, but a carried line's)
    pub searched: u64,
}

impl Track {
    pub fn new(nodeless: bool) -> Track {
        Track {
            carried: None,
            spans: Vec::new(),
            read: Vec::new(),
            scanned: 0,
            end: 0,
            nodeless,
            searched: 0,
        }
    }

    /// What the bytes before the stream told (a scan resumed in a file's middle).
    pub fn carry(&mut self, lent: Option<Lent>) {
        self.carried = lent;
    }

    /// A new buffer, whose stream bytes end at `end`: nothing of it is searched yet.
    pub fn begin(&mut self, end: usize) {
        self.spans.clear();
        self.read.clear();
        self.scanned = 0;
        self.end = end;
    }

    /// The bytes before `keep` are done with: the last time among them is carried.
    pub fn consumed(&mut self, stamps: &Stamps, hay: &[u8], keep: usize) {
        if let Some(lent) = self.before(stamps, hay, keep) {
            self.carried = Some(lent);
        }
        self.begin(0);
    }

    fn scan_to(&mut self, stamps: &Stamps, hay: &[u8], to: usize) {
        let to = to.min(self.end);
        if to <= self.scanned {
            return;
        }
        let stop = line_end(hay, to.saturating_sub(1).max(self.scanned), self.end);
        let spans = &mut self.spans;
        stamps.each(hay, self.scanned, stop, |start, end| {
            spans.push((start, end));
            true
        });
        self.read.resize(self.spans.len(), None);
        self.searched += (stop - self.scanned) as u64;
        self.scanned = stop;
    }

    fn lent(&mut self, stamps: &Stamps, hay: &[u8], index: usize) -> Option<Lent> {
        if let Some(known) = &self.read[index] {
            return known.clone();
        }
        let (start, end) = self.spans[index];
        let found = stamps
            .read(&hay[start..end])
            .map(|stamp| (stamp, if self.nodeless { stamps.node_of_line(hay, start, self.end) } else { None }));
        self.read[index] = Some(found.clone());
        found
    }

    /// The last time a clock shows that ends at or before `pos`: in the buffer, else carried.
    pub fn before(&mut self, stamps: &Stamps, hay: &[u8], pos: usize) -> Option<Lent> {
        self.scan_to(stamps, hay, pos);
        let mut index = self.spans.partition_point(|&(_, end)| end <= pos);
        while index > 0 {
            index -= 1;
            if let Some(lent) = self.lent(stamps, hay, index) {
                return Some(lent);
            }
        }
        self.carried.clone()
    }

    /// The first time a clock shows that starts at or after `pos` in the buffer, if any.
    pub fn after(&mut self, stamps: &Stamps, hay: &[u8], pos: usize) -> Option<Lent> {
        loop {
            let mut index = self.spans.partition_point(|&(start, _)| start < pos);
            while index < self.spans.len() {
                if let Some(lent) = self.lent(stamps, hay, index) {
                    return Some(lent);
                }
                index += 1;
            }
            if self.scanned >= self.end {
                return None;
            }
            self.scan_to(stamps, hay, (self.scanned.max(pos) + AHEAD).min(self.end));
        }
    }
}

/// Bytes searched ahead at a time for the next time after a line.
const AHEAD: usize = 64 << 10;

#[cfg(test)]
mod tests {
    use super::*;

    fn stamps() -> Stamps {
        let specs = vec![
            LayoutSpec {
                name: "iso".into(),
                pattern: r"(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)[ T](?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:[,.](?P<frac>\d{1,9}))?(?P<zone>Z|[+-]\d\d:?\d\d)?"
                    .into(),
                anywhere: true,
                utc: false,
            },
            LayoutSpec {
                name: "vllm".into(),
                pattern: r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<mo>\d\d)-(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)".into(),
                anywhere: true,
                utc: false,
            },
            LayoutSpec {
                name: "absl".into(),
                pattern: r"time=(?P<epoch>\d{10}(?:\d{3})?)".into(),
                anywhere: true,
                utc: true,
            },
        ];
        Stamps::new(&specs, r"(?:pid=\w+|raylet|gcs_server), ip=([\d.:a-fA-F]+)\)").unwrap()
    }

    #[test]
    fn reads_what_times_py_reads() {
        let s = stamps();
        let t = s.read(b"2026-11-24T06:38:26.123456789Z").unwrap();
        assert_eq!((t.year, t.month, t.day, t.hour, t.millis, t.zone), (Some(2026), 11, 24, 6, Some(123), Some(0)));
        assert_eq!(s.read(b"2026-03-12T11:17:34.5-05:00").unwrap().zone, Some(-300));
        assert_eq!(s.read(b"2026-03-12T11:17:34.5-05:00").unwrap().millis, Some(500));
        assert_eq!(s.read(b"2026-13-12 11:17:34"), None, "no 13th month");
        assert_eq!(s.read(b"2023-02-29 11:17:34"), None, "2023 is no leap year");
        assert!(s.read(b"2024-02-29 11:17:34").is_some());
        let v = s.read(b"INFO 10-23 19:55:60").unwrap();
        assert_eq!((v.year, v.second), (None, 59));
        let e = s.read(b"time=1750241414123").unwrap();
        assert_eq!(
            (e.year, e.month, e.day, e.hour, e.minute, e.second, e.millis),
            (Some(2025), 6, 18, 10, 10, 14, Some(123))
        );
    }

    #[test]
    fn the_track_answers_as_a_search_of_the_whole_stream() {
        let s = stamps();
        let hay = b"a\n(raylet, ip=10.0.0.2) 2026-01-01 00:00:01 x\nb\n2026-13-01 00:00:02 bad\nc\nINFO 02-03 04:05:06 y\nd\n";
        let mut track = Track::new(true);
        track.begin(hay.len());
        let c = hay.iter().position(|&b| b == b'c').unwrap();
        let (before, node) = track.before(&s, hay, c).unwrap();
        assert_eq!((before.second, node.as_deref()), (1, Some("10.0.0.2")), "the invalid time is passed over");
        let (after, _) = track.after(&s, hay, c).unwrap();
        assert_eq!((after.month, after.second), (2, 6));
        assert_eq!(track.before(&s, hay, 2).map(|l| l.0), None);
        assert!(track.after(&s, hay, hay.len() - 2).is_none());
        track.consumed(&s, hay, hay.len());
        assert_eq!(track.before(&s, b"", 0).map(|l| l.0.hour), Some(4));
    }
}
