//! The reader: the lines of a buffer that hold a trigger, those a plan reads whole taken
//! here, the rest handed to Python, and the times of the stream (stamps.rs's Track) for both.
//!
//! A line is the core's when one family's triggers alone hit it, it is whole (its line break
//! read, no carriage return inside, UTF-8, not too long), and the plan of its shape (the
//! family and the line masked) is trusted and reads it with every candidate agreeing. Such a
//! line is a reading (or nothing at all) without a Python object made: it joins the pool of
//! its kind, and becomes an event only if the pool keeps it. Every other line goes to Python
//! as ever; those of a shape the core is learning are marked, so that Python tells the core
//! what it made of them.

use std::collections::HashMap;

use rustc_hash::FxBuildHasher;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use regex_automata::{meta, Input};

use crate::engine::{count_byte, syntax_config, Run};
use crate::mask::{mask, maskable, Token};
pub use crate::plans::ATTRIBUTES;
use crate::plans::{perturbed, reads_as, resized, zeroed, zeroed_at, Change, Ctx, Edge, Layout, Made, Plan, Seen, State, Value};
use crate::pool::{Entry, KeyValue, Pool, Series, SIZES};
use crate::stamps::{Lent, Stamp, Stamps, Track};

/// The longest line the core reads whole; a longer one is Python's.
pub const MAX_CLAIM: usize = 64 << 10;
/// A trusted plan's every this many lines, Python reads one again and the core compares.
pub const CHECK_EVERY: u32 = 4096;
/// Shapes kept before the table starts over.
pub const MAX_PLANS: usize = 1 << 16;

/// How the core finds a family's lines and shapes them.
pub struct FamilySpec {
    pub name: String,
    /// its lines may be read whole: they make readings (a failure is always Python's to read)
    pub plannable: bool,
    /// a one-line block whose start this matches is read as that start and the `keep`
    /// matches alone (grammars' `//! reduce:` and `//! keep:`): its shape is theirs
    pub reduce: Option<String>,
    pub keep: Option<String>,
}

struct Family {
    plannable: bool,
    reduce: Option<(meta::Regex, meta::Regex)>,
}

/// Each shape's plan, by its key (the family's number and the masked line).
pub type Plans = HashMap<Vec<u8>, Plan, FxBuildHasher>;

/// What every reader of a process shares: the families, the times, and the plans learned.
pub struct Setup {
    pub stamps: Arc<Stamps>,
    families: Vec<Family>,
    /// per trigger pattern: its family, None for the line where a worker announces its actor
    pattern_family: Vec<Option<usize>>,
    /// a suffix whose presence in a reduced line's left-out part matters (Ray's repeat count)
    suffix: meta::Regex,
    pub plans: Mutex<Plans>,
    /// shadow: the core reads no line alone, Python reads them all and the core compares
    pub shadow: bool,
}

fn build(pattern: &str) -> Result<meta::Regex, String> {
    meta::Regex::builder().syntax(syntax_config()).build(pattern).map_err(|e| e.to_string())
}

impl Setup {
    pub fn new(stamps: Arc<Stamps>, families: &[FamilySpec], pattern_family: Vec<Option<usize>>, suffix: &str, shadow: bool) -> Result<Setup, String> {
        let mut built = Vec::new();
        for f in families {
            let reduce = match (&f.reduce, &f.keep) {
                (Some(r), Some(k)) => Some((
                    build(&format!("(?:{r})")).map_err(|e| format!("{}: {e}", f.name))?,
                    build(k).map_err(|e| format!("{}: {e}", f.name))?,
                )),
                _ => None,
            };
            built.push(Family {
                plannable: f.plannable,
                reduce,
            });
        }
        Ok(Setup {
            stamps,
            families: built,
            pattern_family,
            suffix: build(suffix)?,
            plans: Mutex::new(HashMap::default()),
            shadow,
        })
    }

    /// The shape of a line of `family` (its key among the plans) and its values.
    pub fn shape(&self, family: usize, line: &[u8], key: &mut Vec<u8>, tokens: &mut Vec<Token>) -> bool {
        key.clear();
        tokens.clear();
        key.extend_from_slice(&(family as u16).to_le_bytes());
        let Some((reduce, keep)) = self.families.get(family).and_then(|f| f.reduce.as_ref()) else {
            mask(line, 0, key, tokens);
            return true;
        };
        let Some(head) = reduce.find(line) else {
            mask(line, 0, key, tokens);
            return true;
        };
        mask(&line[..head.end()], 0, key, tokens);
        let mut at = head.end();
        for m in keep.find_iter(Input::new(line).span(head.end()..line.len())) {
            if self.suffix.is_match(Input::new(&line[..m.start()]).span(at..m.start())) {
                return false;
            }
            key.push(KEPT);
            mask(&line[m.range()], m.start(), key, tokens);
            at = m.end();
        }
        !self.suffix.is_match(Input::new(line).span(at..line.len()))
    }
}

/// What joins the parts of a reduced line's shape (no placeholder of mask.rs).
const KEPT: u8 = 0x0e;

/// A file's facts every row of it shares.
#[derive(Debug)]
pub struct FileInfo {
    pub path: Arc<str>,
    /// the file holds many nodes' lines: a borrowed time tells the node whose line lent it
    pub nodeless: bool,
}

/// A reading the core took whole: what its event is made of.
#[derive(Debug)]
pub struct Row {
    pub file: Arc<FileInfo>,
    pub layout: Arc<Layout>,
    pub values: Vec<Value>,
    pub line: i64,
    pub text: Arc<str>,
    pub year: Option<i64>,
    pub own: Option<Stamp>,
    /// the line prints no time: the last before it, and (once known) the first after it
    pub borrowed: bool,
    pub before: Option<Lent>,
    pub after: OnceLock<Option<Lent>>,
    /// the input it was read from, among those the concluding process joins (reduce.py's slot)
    pub input: i64,
}

impl Row {
    /// It prints no time and waits for the first after it.
    pub fn open(&self) -> bool {
        self.borrowed && self.after.get().is_none()
    }
}

/// What a pool holds of a reading: the event Python made (and where it stood), or a row.
pub enum Payload {
    Python(pyo3::Py<pyo3::PyAny>, (i64, i64)),
    Row(Box<Row>),
}

pub type ReadingPool = Pool<Payload>;

/// A changed line, its shape's tokens, and what Python made of it.
type Probed = (Vec<u8>, Vec<Token>, Option<Made>);

/// Python's `str.isspace` of a character: Unicode's white space and the separators \x1c-\x1f.
fn python_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// The name a worker file announces at `line` (scan.announced).
fn announced(line: &[u8]) -> Option<Arc<str>> {
    let mut parts = line.splitn(3, |&b| b == b':');
    let last = parts.by_ref().last().unwrap_or_default();
    let text = String::from_utf8_lossy(last);
    let name = text.trim_matches(python_space);
    (!name.is_empty()).then(|| name.into())
}

/// The outputs' places the pool reads: node, pid, actor, rank, gpu, memory, label, sizes.
const NODE: usize = 1;
const PID: usize = 2;
const ACTOR: usize = 3;
const RANK: usize = 5;
const GPU: usize = 6;
const MEMORY: usize = 7;

struct Pending {
    offset: usize,
    family: usize,
    row: Row,
}

/// One scan's reader.
pub struct Reader {
    pub file: Arc<FileInfo>,
    pub ctx: Ctx,
    pub year: Option<i64>,
    worker: bool,
    pub track: Track,
    /// the actor announced before the buffer's first hit, and those announced in it
    actor_before: Option<Arc<str>>,
    announces: Vec<(usize, Option<Arc<str>>)>,
    pending: Vec<Pending>,
    open: Vec<Weak<Entry<Payload>>>,
    open_kept: usize,
    /// trusted lines Python read again and the core had read otherwise, the first of them
    pub mismatches: u64,
    pub first_mismatch: Option<i64>,
    key: Vec<u8>,
    tokens: Vec<Token>,
}

/// A line handed to Python whose reading the core is to be told: where it starts.
pub type Study = usize;

impl Reader {
    pub fn new(path: &str, pid: Option<i64>, node: Option<&str>, worker: bool) -> Reader {
        Reader {
            file: Arc::new(FileInfo {
                path: path.into(),
                nodeless: node.is_none(),
            }),
            ctx: Ctx {
                pid,
                node: node.map(Into::into),
                actor: None,
            },
            year: None,
            worker,
            track: Track::new(node.is_none()),
            actor_before: None,
            announces: Vec::new(),
            pending: Vec::new(),
            open: Vec::new(),
            open_kept: 0,
            mismatches: 0,
            first_mismatch: None,
            key: Vec::new(),
            tokens: Vec::new(),
        }
    }

    pub fn set_actor(&mut self, actor: Option<&str>) {
        self.ctx.actor = actor.map(Into::into);
    }

    /// Take the lines of `runs` (hay[..end], runs found from `begin`) that plans read whole,
    /// before `cut`: the runs of the lines left for Python, and the lines Python is to tell
    /// the core about. `line_base`: the number of the buffer's first line.
    #[allow(clippy::too_many_arguments)]
    pub fn claim<E>(
        &mut self,
        setup: &Setup,
        runs: Vec<Run>,
        hay: &[u8],
        cut: usize,
        line_base: i64,
        enabled: bool,
        learn: &mut Learn<'_, E>,
    ) -> Result<(Vec<Run>, Vec<Study>), E> {
        self.pending.clear();
        self.announces.clear();
        self.actor_before = self.ctx.actor.clone();
        let mut left = Vec::with_capacity(runs.len());
        let mut study = Vec::new();
        let (mut counted_at, mut counted) = (0usize, 0i64);
        for run in runs {
            let mut hits: Vec<(usize, usize)> = run.ends.iter().flat_map(|(p, ends)| ends.iter().map(move |&e| (e, *p))).collect();
            hits.sort_unstable();
            let mut piece: Option<Run> = None;
            let mut i = 0;
            let mut start = run.lo;
            while start < run.hi {
                let stop = memchr::memchr(b'\n', &hay[start..run.hi]).map_or(run.hi, |n| start + n + 1);
                let first = i;
                while i < hits.len() && hits[i].0 <= stop {
                    i += 1;
                }
                let line_hits = &hits[first..i];
                let mut families = line_hits.iter().map(|&(_, p)| setup.pattern_family.get(p).copied().flatten());
                let announce = line_hits.iter().any(|&(_, p)| setup.pattern_family.get(p).is_some_and(Option::is_none));
                if announce && self.worker {
                    let name = announced(&hay[start..stop - usize::from(hay[stop - 1] == b'\n')]);
                    self.ctx.actor = name.clone();
                    self.announces.push((start, name));
                }
                let single = match families.next() {
                    Some(Some(f)) if families.all(|g| g == Some(f)) && setup.families.get(f).is_some_and(|f| f.plannable) => Some(f),
                    _ => None,
                };
                let taken = match single {
                    Some(family) if !announce && !line_hits.is_empty() && enabled && stop <= cut && hay[stop - 1] == b'\n' => {
                        if counted_at < start {
                            counted += count_byte(&hay[counted_at..start], b'\n') as i64;
                            counted_at = start;
                        }
                        self.take(setup, family, hay, start, stop, line_base + counted, &mut study, learn)?
                    }
                    _ => false,
                };
                if !taken && !line_hits.is_empty() {
                    let p = piece.get_or_insert_with(|| Run {
                        lo: start,
                        hi: stop,
                        last: 0,
                        ends: Vec::new(),
                    });
                    p.hi = stop;
                    for &(end, pattern) in line_hits {
                        p.last = p.last.max(end);
                        match p.ends.iter_mut().find(|(q, _)| *q == pattern) {
                            Some((_, ends)) => ends.push(end),
                            None => p.ends.push((pattern, vec![end])),
                        }
                    }
                } else if taken {
                    left.extend(piece.take());
                }
                start = stop;
            }
            left.extend(piece.take());
        }
        Ok((left, study))
    }

    /// Read one line as its plan says, if it does: true when the core took it. A line of a
    /// shape with no plan yet, or one on probation, is first read by Python for the plan
    /// (`learn`: the line's start, family, the actor announced before it, whether its shape
    /// is new).
    #[allow(clippy::too_many_arguments)]
    fn take<E>(
        &mut self,
        setup: &Setup,
        family: usize,
        hay: &[u8],
        start: usize,
        stop: usize,
        line: i64,
        study: &mut Vec<Study>,
        learn: &mut Learn<'_, E>,
    ) -> Result<bool, E> {
        let mut raw = &hay[start..stop - 1];
        while raw.last() == Some(&b'\r') {
            raw = &raw[..raw.len() - 1];
        }
        if raw.len() > MAX_CLAIM || !maskable(raw) || raw.starts_with(b"{\"") {
            return Ok(false);
        }
        let Ok(text) = std::str::from_utf8(raw) else { return Ok(false) };
        let (mut key, mut tokens) = (std::mem::take(&mut self.key), std::mem::take(&mut self.tokens));
        let taken = if setup.shape(family, raw, &mut key, &mut tokens) {
            self.take_shaped(setup, family, &key, &tokens, hay, text, start, stop, line, study, learn)
        } else {
            Ok(false)
        };
        (self.key, self.tokens) = (key, tokens);
        taken
    }

    #[allow(clippy::too_many_arguments)]
    fn take_shaped<E>(
        &mut self,
        setup: &Setup,
        family: usize,
        key: &[u8],
        tokens: &[Token],
        hay: &[u8],
        text: &str,
        start: usize,
        stop: usize,
        line: i64,
        study: &mut Vec<Study>,
        learn: &mut Learn<'_, E>,
    ) -> Result<bool, E> {
        let raw = text.as_bytes();
        let mut plans = setup.plans.lock().expect("no reader panics while holding the plans");
        let asked = match plans.get(key).map(|p| p.state) {
            None => {
                Setup::keep(&mut plans, key.to_vec(), Plan::once());
                return Ok(false);
            }
            Some(State::Once) => Some(true),
            Some(State::Probation(_)) => Some(false),
            Some(State::Python) => return Ok(false),
            Some(State::Trusted) => None,
        };
        if let Some(new) = asked {
            drop(plans);
            learn(setup, start, family, self.ctx.actor.as_ref(), new)?;
            plans = setup.plans.lock().expect("no reader panics while holding the plans");
        }
        let Some(plan) = plans.get_mut(key).filter(|p| p.state == State::Trusted) else {
            return Ok(false);
        };
        let seen = Seen { line: raw, tokens };
        let reading = match plan.eval(&setup.stamps, &seen, &self.ctx) {
            Ok(reading) => reading,
            Err(Edge::Disagree) => {
                study.push(start);
                return Ok(false);
            }
            Err(Edge::Value) => return Ok(false),
        };
        plan.read += 1;
        plan.taken += 1;
        if setup.shadow || plan.read >= CHECK_EVERY {
            plan.read = 0;
            study.push(start);
            return Ok(false);
        }
        let Some(reading) = reading else { return Ok(true) };
        let layout = plan.layout.clone().expect("a plan that reads an event has its outputs");
        drop(plans);
        let before = if reading.borrowed {
            self.track.before(&setup.stamps, hay, start)
        } else {
            None
        };
        let after = OnceLock::new();
        if reading.borrowed {
            if let Some(lent) = self.track.after(&setup.stamps, hay, stop) {
                let _ = after.set(Some(lent));
            }
        }
        self.pending.push(Pending {
            offset: start,
            family,
            row: Row {
                file: self.file.clone(),
                layout,
                values: reading.values,
                line,
                text: text.into(),
                year: self.year,
                own: reading.own,
                borrowed: reading.borrowed,
                before,
                after,
                input: 0,
            },
        });
        Ok(true)
    }

    /// The lines taken before `limit` (those at or after it are read again with the next
    /// buffer), but those inside a block Python read of the same family (`skips`: start,
    /// end, family) and, for a byte range of a big file, those outside its own part (`owned`,
    /// offsets of the stream; `base` is the buffer's). The actor announced is then the one
    /// announced last before `limit`.
    pub fn accept(&mut self, limit: usize, skips: &[(usize, usize, usize)], owned: Option<(usize, usize)>, base: usize) -> Vec<Row> {
        let rows = self
            .pending
            .drain(..)
            .filter(|p| {
                p.offset < limit
                    && !skips.iter().any(|&(lo, hi, family)| family == p.family && lo <= p.offset && p.offset < hi)
                    && owned.is_none_or(|(lo, hi)| lo <= base + p.offset && base + p.offset < hi)
            })
            .map(|p| p.row)
            .collect();
        self.ctx.actor = self
            .announces
            .iter()
            .rev()
            .find(|(at, _)| *at < limit)
            .map_or_else(|| self.actor_before.clone(), |(_, name)| name.clone());
        rows
    }

    /// A row taken into its kind's pool; one that waits for a time after it is told it when
    /// a later buffer prints one (close_open).
    pub fn hold(&mut self, pool: &mut ReadingPool, row: Row) {
        let open = row.open();
        let held = pool.add(entry_of(row));
        if open {
            self.open.push(Arc::downgrade(&held));
            if self.open.len() > 2 * OPEN_MIN.max(self.open_kept) {
                self.open.retain(|w| w.strong_count() > 0);
                self.open_kept = self.open.len();
            }
        }
    }

    /// The rows that waited for a time after them get this buffer's first, if it has one.
    pub fn close_open(&mut self, setup: &Setup, hay: &[u8]) {
        if self.open.is_empty() {
            return;
        }
        if let Some(lent) = self.track.after(&setup.stamps, hay, 0) {
            for weak in self.open.drain(..) {
                if let Some(entry) = weak.upgrade() {
                    if let Payload::Row(row) = &entry.payload {
                        let _ = row.after.set(Some(lent.clone()));
                    }
                }
            }
        }
    }

    /// What Python made of a line the core could not read alone (its candidates disagreed) or
    /// checks now and then: the plan settles on it; a trusted plan that read it otherwise is
    /// told as a mismatch, and Python reads its shape from then on.
    pub fn study(&mut self, setup: &Setup, family: usize, line: &[u8], ctx: &Ctx, made: &Option<Made>, line_no: i64) {
        if setup.learn::<()>(family, line, ctx, made, None) == Ok(Learned::Mismatch) {
            self.mismatches += 1;
            self.first_mismatch.get_or_insert(line_no);
        }
    }
}

/// Python's reading of a line in a context: what it made of it (Err: what no plan holds).
/// Python asked what it makes of a line of a shape being learned: (setup, line start, family,
/// the actor announced, whether the shape is new).
pub type Learn<'a, E> = dyn FnMut(&Setup, usize, usize, Option<&Arc<str>>, bool) -> Result<(), E> + 'a;

pub type Probe<'a, E> = dyn FnMut(&[u8], &Ctx) -> Result<Option<Option<Made>>, E> + 'a;

/// A probe's other context: what of an event comes from the file (its pid, node, the actor
/// it announced) then changes.
const PROBE_PID: i64 = 7919;
const PROBE_NODE: &str = "198.51.100.7";
const PROBE_ACTOR: &str = "OomlensProbe";

/// What telling a plan about a line came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Learned {
    Told,
    /// a trusted plan had read the line otherwise
    Mismatch,
}

impl Setup {
    /// What Python made of a line, told to the plan of its shape: learned from it (a new shape,
    /// with its probes: the same line with its values changed, or read in another context), or
    /// settled on it.
    pub fn learn<E>(&self, family: usize, line: &[u8], ctx: &Ctx, made: &Option<Made>, probe: Option<&mut Probe<'_, E>>) -> Result<Learned, E> {
        let mut raw = line;
        while raw.last() == Some(&b'\r') {
            raw = &raw[..raw.len() - 1];
        }
        let (mut key, mut tokens) = (Vec::new(), Vec::new());
        if !self.shape(family, raw, &mut key, &mut tokens) {
            return Ok(Learned::Told);
        }
        let seen = Seen { line: raw, tokens: &tokens };
        {
            let mut plans = self.plans.lock().expect("no reader panics while holding the plans");
            if let Some(plan) = plans.get_mut(&key).filter(|p| p.state != State::Once) {
                let trusted = plan.state == State::Trusted;
                let reading = if trusted { plan.eval(&self.stamps, &seen, ctx) } else { Err(Edge::Disagree) };
                plan.confirm(&self.stamps, &seen, ctx, made);
                if trusted && !reads_as(&reading, made) {
                    plan.state = State::Python;
                    return Ok(Learned::Mismatch);
                }
                return Ok(Learned::Told);
            }
        }
        let plan = match probe {
            Some(probe) => self.plan(family, &key, &seen, ctx, made, probe)?,
            None => Plan::python(),
        };
        let mut plans = self.plans.lock().expect("no reader panics while holding the plans");
        Setup::keep(&mut plans, key, plan);
        Ok(Learned::Told)
    }

    /// Keep a shape's plan among at most MAX_PLANS: where they are that many, the shapes met
    /// once go first, and all of them where those were fewer than half (a stream of shapes
    /// that never come back must not hold memory, nor wipe the plans that are read).
    fn keep(plans: &mut Plans, key: Vec<u8>, plan: Plan) {
        if plans.len() >= MAX_PLANS {
            plans.retain(|_, p| p.state != State::Once);
            if plans.len() >= MAX_PLANS / 2 {
                plans.clear();
            }
        }
        plans.insert(key, plan);
    }

    /// The plan of a new shape, from its first line and probes of it Python reads (`probe`):
    /// the line with every value changed at its last digit, then at its first, and read in
    /// another file's context, which each candidate must read as Python does (a probe of
    /// another structure leaves the shape to Python); then the line with its values zeroed,
    /// and where Python reads that otherwise, with each value zeroed alone: the values whose
    /// zero is Python's to read.
    fn plan<E>(&self, family: usize, key: &[u8], seen: &Seen<'_>, ctx: &Ctx, made: &Option<Made>, probe: &mut Probe<'_, E>) -> Result<Plan, E> {
        let mut plan = Plan::start(&self.stamps, seen, ctx, made);
        let other = Ctx {
            pid: Some(ctx.pid.unwrap_or(0) + PROBE_PID),
            node: Some(PROBE_NODE.into()),
            actor: Some(PROBE_ACTOR.into()),
        };
        let mut probed = |line: Vec<u8>, ctx: &Ctx| -> Result<Option<Probed>, E> {
            let (mut k, mut t) = (Vec::new(), Vec::new());
            if !self.shape(family, &line, &mut k, &mut t) || k != key {
                return Ok(None); // what changed was more than values
            }
            Ok(probe(&line, ctx)?.map(|made| (line, t, made)))
        };
        let changed = [Change::Last, Change::First].map(|c| (perturbed(seen.line, seen.tokens, c), ctx));
        for (line, ctx) in changed.into_iter().chain([(seen.line.to_vec(), &other)]) {
            match probed(line, ctx)? {
                Some((line, tokens, made)) if plan.settle(&self.stamps, &Seen { line: &line, tokens: &tokens }, ctx, &made) => {}
                _ => return Ok(Plan::python()),
            }
        }
        let reads = |plan: &Plan, found: Option<(Vec<u8>, Vec<Token>, Option<Made>)>| {
            found.is_some_and(|(line, tokens, made)| plan.reads_values(&Seen { line: &line, tokens: &tokens }, ctx, &made))
        };
        if !reads(&plan, probed(perturbed(seen.line, seen.tokens, Change::Zero), ctx)?) {
            for token in 0..seen.tokens.len() {
                if !zeroed(seen.line, seen.tokens, token) && !reads(&plan, probed(zeroed_at(seen.line, seen.tokens, token), ctx)?) {
                    plan.zero_sensitive.push(token as u16);
                }
            }
        }
        for widen in [true, false] {
            if !reads(&plan, probed(resized(seen.line, seen.tokens, widen, None), ctx)?) {
                for (token, t) in seen.tokens.iter().enumerate() {
                    let pinned = plan.width_pinned.iter().any(|&(p, _)| usize::from(p) == token);
                    if !pinned && !reads(&plan, probed(resized(seen.line, seen.tokens, widen, Some(token)), ctx)?) {
                        plan.width_pinned.push((token as u16, t.end - t.start));
                    }
                }
            }
        }
        Ok(plan)
    }

    /// A line whose event holds what no plan holds (a list, an integer past 2**63): Python
    /// reads its shape.
    pub fn forget(&self, family: usize, line: &[u8]) {
        let (mut key, mut tokens) = (Vec::new(), Vec::new());
        if self.shape(family, line, &mut key, &mut tokens) {
            let mut plans = self.plans.lock().expect("no reader panics while holding the plans");
            plans.insert(key, Plan::python());
        }
    }
}

const OPEN_MIN: usize = 1024;

fn key_value(values: &[Value], at: Option<usize>) -> KeyValue {
    KeyValue(at.and_then(|i| values.get(i)).cloned().unwrap_or(Value::None))
}

/// A row as the pool reads it.
pub fn entry_of(row: Row) -> Entry<Payload> {
    let layout = row.layout.clone();
    let series = Series::new([
        KeyValue(Value::Str(row.file.path.clone())),
        key_value(&row.values, Some(NODE)),
        key_value(&row.values, Some(PID)),
        key_value(&row.values, Some(ACTOR)),
        key_value(&row.values, Some(RANK)),
        key_value(&row.values, Some(GPU)),
        key_value(&row.values, Some(MEMORY)),
        key_value(&row.values, layout.label),
    ]);
    let mut sizes = [None; SIZES];
    for (slot, at) in sizes.iter_mut().zip(layout.sizes) {
        if let Some(Value::Int(v)) = at.and_then(|i| row.values.get(i)) {
            *slot = Some(i128::from(*v));
        }
    }
    let seconds = row.own.and_then(|s| epoch_seconds(&s, row.year));
    Entry {
        series: Arc::new(series),
        seconds,
        line: row.line,
        text: row.text.clone(),
        sizes,
        payload: Payload::Row(Box::new(row)),
    }
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Whole seconds since the epoch of a time as its ISO text tells it (no zone: as UTC), as
/// reduce.epoch_seconds reads it; None where it has no year.
pub fn epoch_seconds(stamp: &Stamp, year: Option<i64>) -> Option<i64> {
    let y = stamp.year.or(year)?;
    let days = days_from_civil(y, stamp.month, stamp.day);
    Some(days * 86_400 + stamp.hour * 3600 + stamp.minute * 60 + stamp.second - stamp.zone.unwrap_or(0) * 60)
}

/// times.Stamp.iso: ISO text, the year borrowed where the log printed none.
pub fn iso(stamp: &Stamp, year: Option<i64>) -> Option<String> {
    let y = stamp.year.or(year)?;
    let mut text = format!(
        "{y:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        stamp.month, stamp.day, stamp.hour, stamp.minute, stamp.second
    );
    if let Some(ms) = stamp.millis {
        text.push_str(&format!(".{ms:03}"));
    }
    if let Some(zone) = stamp.zone {
        text.push_str(&format!("{}{:02}:{:02}", if zone >= 0 { '+' } else { '-' }, zone.abs() / 60, zone.abs() % 60));
    }
    Some(text)
}

/// scan._local: a time printed without a year, as "MM-DDTHH:MM:SS[.mmm]".
pub fn local(stamp: &Stamp) -> String {
    let text = format!("{:02}-{:02}T{:02}:{:02}:{:02}", stamp.month, stamp.day, stamp.hour, stamp.minute, stamp.second);
    match stamp.millis {
        Some(ms) => format!("{text}.{ms:03}"),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_and_iso_are_python_s() {
        let s = Stamp {
            year: Some(2026),
            month: 11,
            day: 21,
            hour: 10,
            minute: 0,
            second: 1,
            millis: Some(5),
            zone: Some(480),
        };
        assert_eq!(iso(&s, None).as_deref(), Some("2026-11-21T10:00:01.005+08:00"));
        assert_eq!(epoch_seconds(&s, None), Some(1_795_226_401)); // 02:00:01 UTC
        let v = Stamp {
            year: None,
            zone: None,
            millis: None,
            ..s
        };
        assert_eq!(iso(&v, None), None);
        assert_eq!(iso(&v, Some(2025)).as_deref(), Some("2025-11-21T10:00:01"));
        assert_eq!(local(&v), "11-21T10:00:01");
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
    }

    #[test]
    fn an_announced_name_is_stripped_as_python_strips() {
        assert_eq!(announced(b":actor_name:WorkerDict").as_deref(), Some("WorkerDict"));
        assert_eq!(announced(b":task_name: \x1cf \t").as_deref(), Some("f"));
        assert_eq!(announced(b":actor_name:  "), None);
    }
}
