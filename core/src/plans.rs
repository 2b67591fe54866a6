//! Plans: what a line of one shape becomes, learned from what Python made of lines of it.
//!
//! The grammars and their Transformers stay the one definition of a format. The first line
//! of a shape is read by Python; so are two copies of it with every value changed (its last
//! digit, then its first) and one read in another file's context. Each output of the event
//! (its kind, pid, node, each field) is matched against a small set of operations on the
//! line's values (a value as an integer, a float, a size in bytes of a unit, its text, a
//! text made of several values, the file's pid or node, a constant): the operations that
//! give what Python gave on every reading stay candidates. An output no operation explains
//! (a difference of two sizes) leaves the shape to Python. The next lines of the shape
//! confirm the candidates; then the core reads the shape alone.
//!
//! Every candidate left is evaluated on every line: where two disagree, or one meets a value
//! at an edge (a size past 2**63, a time no clock shows, a value the form does not hold),
//! the line goes to Python, whose event settles the candidates. So a constant that was a
//! function of a value in disguise, or a time that takes its year from an outer stamp only
//! within a day of it, is caught on the first line that tells them apart.

use std::sync::Arc;

use crate::mask::{Kind, Token};
use crate::stamps::{Found, Stamp, Stamps};

/// A value as Python holds it: None, a bool, an integer, a float or a string.
#[derive(Clone, Debug)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Arc<str>),
}

impl PartialEq for Value {
    /// As the JSON output tells them apart: a float by its bits (-0.0 is not 0.0).
    fn eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::None, Value::None) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Float(a), Value::Float(b)) => a.to_bits() == b.to_bits(),
            (Value::Str(a), Value::Str(b)) => a == b,
            _ => false,
        }
    }
}

/// What a file and the lines before tell every line of it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ctx {
    pub pid: Option<i64>,
    pub node: Option<Arc<str>>,
    /// the actor or task a worker file announced last
    pub actor: Option<Arc<str>>,
}

/// A line's values as the operations read them.
pub struct Seen<'a> {
    pub line: &'a [u8],
    pub tokens: &'a [Token],
}

impl Seen<'_> {
    fn text(&self, token: usize) -> Option<&str> {
        let t = self.tokens.get(token)?;
        std::str::from_utf8(&self.line[t.start..t.end]).ok()
    }
}

/// Bytes a unit holds: the binary units to yotta, then the decimal ones (sizes printed /1e9).
const FACTORS: [f64; 13] = [
    1.0,
    1024.0,
    1_048_576.0,
    1_073_741_824.0,
    1_099_511_627_776.0,
    1_125_899_906_842_624.0,
    1_152_921_504_606_846_976.0,
    1_180_591_620_717_411_303_424.0,
    1_208_925_819_614_629_174_706_176.0,
    1e3,
    1e6,
    1e9,
    1e12,
];
const LARGEST: f64 = 9_223_372_036_854_775_808.0; // 2**63: past it a size is not known (events.sized)

/// One operation on a line's values.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Const(Value),
    /// int(value)
    Int(u16),
    /// float(value)
    Float(u16),
    /// events.sized(float(value) * unit)
    Size {
        token: u16,
        factor: u8,
        signed: bool,
    },
    /// the value's text
    Text(u16),
    /// literal pieces and values' texts, in order
    Template(Vec<Piece>),
    /// the file's pid, node, or the actor announced last
    Pid,
    Node,
    Actor,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Piece {
    Lit(String),
    Tok(u16),
}

/// Why a line cannot be read by the plan alone.
#[derive(Debug, PartialEq)]
pub enum Edge {
    /// a value at an edge of an operation (past 2**63, not a number of that form, no such value)
    Value,
    /// candidates that disagree
    Disagree,
}

/// A number's text, a grouped integer's without its commas (as events.to_bytes and the
/// grammars' Transformers read one).
fn number_text<'a>(seen: &'a Seen<'_>, token: u16) -> Result<std::borrow::Cow<'a, str>, Edge> {
    let t = seen.tokens.get(usize::from(token)).ok_or(Edge::Value)?;
    let text = seen.text(usize::from(token)).ok_or(Edge::Value)?;
    match t.kind {
        Kind::Number | Kind::Negative | Kind::Exponent => Ok(text.into()),
        Kind::Grouped => Ok(text.replace(',', "").into()),
        Kind::Hex | Kind::Ip => Err(Edge::Value),
    }
}

fn float_of(text: &str) -> Result<f64, Edge> {
    let value: f64 = text.parse().map_err(|_| Edge::Value)?;
    if value.is_finite() {
        Ok(value)
    } else {
        Err(Edge::Value)
    }
}

impl Op {
    pub fn eval(&self, seen: &Seen<'_>, ctx: &Ctx) -> Result<Value, Edge> {
        Ok(match self {
            Op::Const(v) => v.clone(),
            Op::Int(t) => {
                let text = number_text(seen, *t)?;
                let digits = text.strip_prefix('-').unwrap_or(&text);
                if digits.is_empty() || digits.len() > 18 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(Edge::Value);
                }
                Value::Int(text.parse().map_err(|_| Edge::Value)?)
            }
            Op::Float(t) => {
                if seen.tokens.get(usize::from(*t)).is_some_and(|k| k.kind == Kind::Grouped) {
                    return Err(Edge::Value); // float() reads no comma
                }
                Value::Float(float_of(&number_text(seen, *t)?)?)
            }
            Op::Size { token, factor, signed } => {
                let size = float_of(&number_text(seen, *token)?)? * FACTORS[usize::from(*factor)];
                let lowest = if *signed { -LARGEST } else { 0.0 };
                if !(lowest..LARGEST).contains(&size) {
                    return Err(Edge::Value);
                }
                Value::Int(size.round_ties_even() as i64)
            }
            Op::Text(t) => Value::Str(seen.text(usize::from(*t)).ok_or(Edge::Value)?.into()),
            Op::Template(pieces) => {
                let mut out = String::new();
                for piece in pieces {
                    match piece {
                        Piece::Lit(s) => out.push_str(s),
                        Piece::Tok(t) => out.push_str(seen.text(usize::from(*t)).ok_or(Edge::Value)?),
                    }
                }
                Value::Str(out.into())
            }
            Op::Pid => ctx.pid.map_or(Value::None, Value::Int),
            Op::Node => ctx.node.clone().map_or(Value::None, Value::Str),
            Op::Actor => ctx.actor.clone().map_or(Value::None, Value::Str),
        })
    }
}

/// Every operation that gives `value` on this line and context, but those that give what
/// another does whatever the value of its form (a size in bytes of a non-negative value is
/// the same signed or not; a size of one byte of an integer is the integer; a template of
/// one value is its text): the core evaluates each candidate on every line.
fn candidates(value: &Value, seen: &Seen<'_>, ctx: &Ctx) -> Vec<Op> {
    let mut found = vec![Op::Const(value.clone())];
    let mut try_op = |op: Op| {
        if op.eval(seen, ctx).as_ref() == Ok(value) {
            found.push(op);
            true
        } else {
            false
        }
    };
    for op in [Op::Pid, Op::Node, Op::Actor] {
        try_op(op);
    }
    let count = seen.tokens.len().min(usize::from(u16::MAX)) as u16;
    match value {
        Value::Int(_) => {
            for token in 0..count {
                let int = try_op(Op::Int(token));
                let unsigned = matches!(seen.tokens[usize::from(token)].kind, Kind::Number | Kind::Grouped);
                for factor in 0..FACTORS.len() as u8 {
                    if int && factor == 0 {
                        continue;
                    }
                    if !try_op(Op::Size { token, factor, signed: false }) || !unsigned {
                        try_op(Op::Size { token, factor, signed: true });
                    }
                }
            }
        }
        Value::Float(_) => (0..count).for_each(|token| {
            try_op(Op::Float(token));
        }),
        Value::Str(s) => {
            let text = (0..count).fold(false, |any, token| try_op(Op::Text(token)) | any);
            if let Some(template) = template_of(s, seen).filter(|t| !text || !matches!(t, Op::Template(p) if p.len() == 1)) {
                found.push(template);
            }
        }
        Value::None | Value::Bool(_) => {}
    }
    found
}

/// `text` as literal pieces and the line's values, each value taken at most once and in the
/// order of the line, the longest first where several begin at one place: None where no value
/// stands in it.
fn template_of(text: &str, seen: &Seen<'_>) -> Option<Op> {
    let mut pieces = Vec::new();
    let mut literal = String::new();
    let mut next_token = 0usize;
    let mut at = 0;
    let mut used = false;
    while at < text.len() {
        let best = (next_token..seen.tokens.len())
            .filter_map(|t| seen.text(t).filter(|v| v.len() > 1 || seen.tokens[t].kind != Kind::Number).map(|v| (t, v)))
            .filter(|(_, v)| text[at..].starts_with(v))
            .max_by_key(|(t, v)| (v.len(), usize::MAX - t));
        match best {
            Some((t, v)) => {
                if !literal.is_empty() {
                    pieces.push(Piece::Lit(std::mem::take(&mut literal)));
                }
                pieces.push(Piece::Tok(t as u16));
                at += v.len();
                next_token = t + 1;
                used = true;
            }
            None => {
                let ch = text[at..].chars().next().expect("at is a character boundary below len");
                literal.push(ch);
                at += ch.len_utf8();
            }
        }
    }
    if !literal.is_empty() {
        pieces.push(Piece::Lit(literal));
    }
    used.then_some(Op::Template(pieces))
}

/// Where a line's own time stands: the `index`th time of a layout in the line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StampRef {
    pub layout: u8,
    pub index: u8,
}

/// How a line's time is had.
#[derive(Clone, Debug, PartialEq)]
pub enum TimeRule {
    /// the line prints none: the last time before it, and the first after
    Borrowed,
    /// one time of the line
    Own(StampRef),
    /// an inner time taken into an outer one (envelopes._take_stamp): a time without a year
    /// takes the year that puts it nearest the outer, within TAKE_REACH_S of it; where it
    /// lies further the outer stands
    Take(StampRef, StampRef),
}

/// How far an inner time printed without a year may lie from the outer one it takes its
/// year from (envelopes.TAKE_REACH_S): the same moment on the host's clock lies within
/// 14 hours of UTC, and a collector stamps a line a little after it was written.
const TAKE_REACH_S: i64 = 26 * 3600;

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's
/// days_from_civil).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A stamp's wall-clock seconds in `year`; None where that year has no such day (29 February).
fn wall_seconds(year: i64, s: &Stamp) -> Option<i64> {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    (s.month != 2 || s.day != 29 || leap).then(|| days_from_civil(year, s.month, s.day) * 86_400 + s.hour * 3600 + s.minute * 60 + s.second)
}

/// envelopes._take_stamp of two times, the outer first.
pub fn take(outer: Stamp, inner: Stamp) -> Stamp {
    let Some(year) = outer.year.filter(|_| inner.year.is_none()) else {
        return if inner.year.is_some() || outer.year.is_none() { inner } else { outer };
    };
    let Some(at) = wall_seconds(year, &outer) else { return outer };
    (year - 1..=year + 1)
        .filter_map(|y| wall_seconds(y, &inner).map(|t| ((t - at).abs(), y)))
        .min()
        .filter(|&(apart, _)| apart <= TAKE_REACH_S)
        .map_or(outer, |(_, y)| Stamp { year: Some(y), ..inner })
}

/// The times of each layout in a line, found once a line.
pub struct LineTimes<'a> {
    stamps: &'a Stamps,
    line: &'a [u8],
    found: Vec<Option<Vec<Found>>>,
}

impl<'a> LineTimes<'a> {
    pub fn new(stamps: &'a Stamps, line: &'a [u8]) -> LineTimes<'a> {
        LineTimes {
            stamps,
            line,
            found: vec![None; stamps.layouts()],
        }
    }

    fn of(&mut self, layout: usize) -> &[Found] {
        if self.found[layout].is_none() {
            self.found[layout] = Some(self.stamps.of_layout(layout, self.line));
        }
        self.found[layout].as_deref().unwrap_or_default()
    }

    fn get(&mut self, r: StampRef) -> Result<(usize, Stamp), Edge> {
        let found = self.of(usize::from(r.layout));
        match found.get(usize::from(r.index)) {
            Some(&(start, _, Some(stamp))) => Ok((start, stamp)),
            _ => Err(Edge::Value),
        }
    }

    /// The line's own time by a rule (None for Borrowed).
    pub fn eval(&mut self, rule: &TimeRule) -> Result<Option<Stamp>, Edge> {
        match rule {
            TimeRule::Borrowed => Ok(None),
            TimeRule::Own(r) => Ok(Some(self.get(*r)?.1)),
            TimeRule::Take(a, b) => {
                let ((_, outer), (_, inner)) = (self.get(*a)?, self.get(*b)?);
                if outer.zone.is_some() && inner.zone.is_none() {
                    return Err(Edge::Value); // a collector's zoned time before the program's: the clock's clue is Python's to tell
                }
                Ok(Some(take(outer, inner)))
            }
        }
    }

    /// Every rule that gives `own` as this line's time.
    fn rules(&mut self, own: Option<Stamp>) -> Vec<TimeRule> {
        let Some(own) = own else { return vec![TimeRule::Borrowed] };
        let mut all: Vec<(usize, StampRef, Stamp)> = Vec::new();
        for layout in 0..self.stamps.layouts() {
            for (index, &(start, _, stamp)) in self.of(layout).iter().enumerate().take(usize::from(u8::MAX)) {
                if let Some(stamp) = stamp {
                    all.push((
                        start,
                        StampRef {
                            layout: layout as u8,
                            index: index as u8,
                        },
                        stamp,
                    ));
                }
            }
        }
        let mut rules: Vec<TimeRule> = all.iter().filter(|(_, _, s)| *s == own).map(|(_, r, _)| TimeRule::Own(*r)).collect();
        for (a_start, a, outer) in &all {
            for (b_start, b, inner) in &all {
                if a_start < b_start && take(*outer, *inner) == own && outer.zone.is_none() {
                    rules.push(TimeRule::Take(*a, *b));
                }
            }
        }
        rules
    }
}

/// What Python made of one line: each output named and valued in order (the event's kind,
/// node, pid, actor, method, rank, gpu, memory and device, then its fields but the local
/// times, which follow from the time), the line's own time (None: it prints none), and
/// where among the fields a local time would stand. None: Python made no event of the line.
#[derive(Clone, Debug, PartialEq)]
pub struct Made {
    pub outputs: Vec<(Arc<str>, Value)>,
    pub own: Option<Stamp>,
    pub local_at: usize,
}

/// The outputs of every line of a plan: names in order, where the local time goes, and the
/// places of the fields a pool of readings reads (the label, the sizes of pool.rs).
#[derive(Debug)]
pub struct Layout {
    pub names: Vec<Arc<str>>,
    pub local_at: usize,
    pub label: Option<usize>,
    pub sizes: [Option<usize>; 4],
}

/// The first of the outputs that are fields (the event's own come first: kind, node, pid,
/// actor, method, rank, gpu, memory, device).
pub const ATTRIBUTES: usize = 9;
/// The sizes a pool of readings keeps the extremes of (reduce.SIZES).
pub const SIZE_NAMES: [&str; 4] = ["used_bytes", "allocated_bytes", "reserved_bytes", "cpu_used_bytes"];

impl Layout {
    pub fn new(names: Vec<Arc<str>>, local_at: usize) -> Layout {
        let field = |name: &str| names.iter().position(|n| &**n == name).filter(|&i| i >= ATTRIBUTES);
        Layout {
            label: field("label"),
            sizes: SIZE_NAMES.map(field),
            local_at,
            names,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// met once: Python reads it as any line. Learning a shape costs Python several reads of
    /// its line (the probes), more than a shape that never comes back is worth: a shape is
    /// learned where it is met again
    Once,
    /// confirmations still wanted from lines Python reads
    Probation(u8),
    Trusted,
    /// Python reads every line of the shape
    Python,
}

/// Lines Python confirms a shape on before the core reads it alone.
pub const CONFIRMATIONS: u8 = 2;

/// What a shape's lines become: nothing at all, or one event whose outputs each have
/// candidates left.
#[derive(Debug)]
pub struct Plan {
    pub state: State,
    pub layout: Option<Arc<Layout>>,
    pub slots: Vec<Vec<Op>>,
    pub time: Vec<TimeRule>,
    /// lines read by the plan alone since the last check, and in all
    pub read: u32,
    pub taken: u64,
    /// the values whose zero Python reads otherwise than the candidates do (a count that
    /// `if count:` leaves out): a line where one of them is zero is Python's to read
    pub zero_sensitive: Vec<u16>,
    /// the values whose width Python reads otherwise than the candidates do (a grammar that
    /// takes two digits and no more), with the width they had: a line where one of them has
    /// another is Python's to read
    pub width_pinned: Vec<(u16, usize)>,
}

/// Whether a plan's reading of a line is what Python made of it (the core would not have
/// read it alone where the plan could not).
pub fn reads_as(reading: &Result<Option<Reading>, Edge>, made: &Option<Made>) -> bool {
    match (reading, made) {
        (Err(_), _) | (Ok(None), None) => true,
        (Ok(Some(r)), Some(m)) => r.own == m.own && r.values.len() == m.outputs.len() && r.values.iter().zip(&m.outputs).all(|(v, (_, w))| v == w),
        _ => false,
    }
}

/// One line read by a plan: its outputs and its own time (None: it prints none).
#[derive(Debug, PartialEq)]
pub struct Reading {
    pub values: Vec<Value>,
    pub own: Option<Stamp>,
    pub borrowed: bool,
}

fn agree<T: PartialEq>(mut each: impl Iterator<Item = Result<T, Edge>>) -> Result<T, Edge> {
    let first = each.next().ok_or(Edge::Disagree)??;
    for other in each {
        if other? != first {
            return Err(Edge::Disagree);
        }
    }
    Ok(first)
}

impl Plan {
    /// A shape Python reads every line of.
    pub fn python() -> Plan {
        Plan::of(State::Python)
    }

    /// A shape met once.
    pub fn once() -> Plan {
        Plan::of(State::Once)
    }

    fn of(state: State) -> Plan {
        Plan {
            state,
            layout: None,
            slots: Vec::new(),
            time: Vec::new(),
            read: 0,
            taken: 0,
            zero_sensitive: Vec::new(),
            width_pinned: Vec::new(),
        }
    }

    /// The plan of a line Python read, every candidate of each output kept (probation).
    pub fn start(stamps: &Stamps, seen: &Seen<'_>, ctx: &Ctx, made: &Option<Made>) -> Plan {
        let python = Plan::python();
        let Some(made) = made else {
            return Plan {
                state: State::Probation(CONFIRMATIONS),
                ..python
            };
        };
        Plan {
            state: State::Probation(CONFIRMATIONS),
            layout: Some(Arc::new(Layout::new(made.outputs.iter().map(|(n, _)| n.clone()).collect(), made.local_at))),
            slots: made.outputs.iter().map(|(_, v)| candidates(v, seen, ctx)).collect(),
            time: LineTimes::new(stamps, seen.line).rules(made.own),
            ..python
        }
    }

    /// Whether every output of the plan, read from a line, is what Python made of it (its
    /// time aside: a value zeroed there makes a time no clock shows, which tells nothing of
    /// the rest).
    pub fn reads_values(&self, seen: &Seen<'_>, ctx: &Ctx, made: &Option<Made>) -> bool {
        let (Some(layout), Some(made)) = (&self.layout, made) else {
            return self.layout.is_none() && made.is_none();
        };
        made.outputs.len() == layout.names.len()
            && made.outputs.iter().zip(&layout.names).all(|((n, _), m)| n == m)
            && self
                .slots
                .iter()
                .zip(&made.outputs)
                .all(|(slot, (_, value))| agree(slot.iter().map(|op| op.eval(seen, ctx))).is_ok_and(|v| v == *value))
    }

    /// Drop the candidates that do not give what Python made of this line; false where the line's structure differs from the plan's, or an
    /// output is left with no candidate: then Python must read the shape.
    pub fn settle(&mut self, stamps: &Stamps, seen: &Seen<'_>, ctx: &Ctx, made: &Option<Made>) -> bool {
        let (Some(layout), Some(made)) = (&self.layout, made) else {
            return self.layout.is_none() && made.is_none();
        };
        if made.local_at != layout.local_at || made.outputs.len() != layout.names.len() || made.outputs.iter().zip(&layout.names).any(|((n, _), m)| n != m) {
            return false;
        }
        // an operation at an edge of a value stays where Python made nothing of it either (a
        // size past 2**63, a time no clock shows): there the core would leave the line to Python
        for (slot, (_, value)) in self.slots.iter_mut().zip(&made.outputs) {
            slot.retain(|op| op.eval(seen, ctx).map_or(*value == Value::None, |v| v == *value));
            if slot.is_empty() {
                return false;
            }
        }
        let mut times = LineTimes::new(stamps, seen.line);
        self.time.retain(|rule| times.eval(rule).map_or(made.own.is_none(), |own| own == made.own));
        !self.time.is_empty()
    }

    /// The plan's reading of a line, where every candidate left agrees.
    pub fn eval(&self, stamps: &Stamps, seen: &Seen<'_>, ctx: &Ctx) -> Result<Option<Reading>, Edge> {
        if self.layout.is_none() {
            return Ok(None);
        }
        if self.zero_sensitive.iter().any(|&t| zeroed(seen.line, seen.tokens, usize::from(t)))
            || self
                .width_pinned
                .iter()
                .any(|&(t, width)| seen.tokens.get(usize::from(t)).is_none_or(|k| k.end - k.start != width))
        {
            return Err(Edge::Value);
        }
        let mut values = Vec::with_capacity(self.slots.len());
        for slot in &self.slots {
            values.push(agree(slot.iter().map(|op| op.eval(seen, ctx)))?);
        }
        let mut times = LineTimes::new(stamps, seen.line);
        let own = agree(self.time.iter().map(|rule| times.eval(rule)))?;
        let borrowed = self.time.iter().all(|r| *r == TimeRule::Borrowed);
        Ok(Some(Reading { values, own, borrowed }))
    }

    /// A line Python read of a shape on probation, or one the plan could not read alone:
    /// the candidates settle on it; a confirmation counts where the plan read it whole.
    pub fn confirm(&mut self, stamps: &Stamps, seen: &Seen<'_>, ctx: &Ctx, made: &Option<Made>) {
        if self.state == State::Python {
            return;
        }
        if !self.settle(stamps, seen, ctx, made) {
            self.state = State::Python;
            return;
        }
        if let State::Probation(left) = self.state {
            if self.eval(stamps, seen, ctx).is_ok() {
                self.state = if left <= 1 { State::Trusted } else { State::Probation(left - 1) };
            }
        }
    }
}

/// How a probe changes a line's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// each value's last digit down by one (a 0 up)
    Last,
    /// each value's first digit down by one (a 0 up, a leading 1 of several digits to 0)
    First,
    /// every digit a 0: the value no count holds (`if count:` leaves a field out)
    Zero,
    /// each value a digit wider, then a digit narrower (where it has one to spare): what a
    /// grammar that takes so many digits and no more reads otherwise
    Widen,
    Narrow,
}

/// The line with every value changed (`change`); a change that would leave a value all
/// zeros is made the other way (Zero aside), so that what a zero means is its own probe;
/// most times stay times a clock shows. A hex id's letters move by one too.
pub fn perturbed(line: &[u8], tokens: &[Token], change: Change) -> Vec<u8> {
    let mut out = line.to_vec();
    for t in tokens {
        let body = &line[t.start..t.end];
        let skip = if t.kind == Kind::Hex && body.len() > 2 && matches!(body[1], b'x' | b'X') {
            2
        } else {
            0
        };
        let digits: Vec<usize> = (t.start + skip..t.end)
            .filter(|&i| line[i].is_ascii_digit() || (t.kind == Kind::Hex && line[i].is_ascii_hexdigit()))
            .collect();
        if change == Change::Zero {
            digits.iter().filter(|&&i| line[i].is_ascii_digit()).for_each(|&i| out[i] = b'0');
            continue;
        }
        if matches!(change, Change::Widen | Change::Narrow) {
            continue; // widths change the line's length: resized, below
        }
        let Some(&at) = (if change == Change::Last { digits.last() } else { digits.first() }) else {
            continue;
        };
        let zero_else = digits.iter().all(|&i| i == at || line[i] == b'0');
        let several = digits.len() > 1 && line.get(at + 1).is_some_and(u8::is_ascii_digit);
        out[at] = match line[at] {
            b'0' => b'1',
            b'1' if zero_else => b'2',
            b'1' if change == Change::First && !several => b'2',
            b'1'..=b'9' => line[at] - 1,
            b'a'..=b'e' | b'A'..=b'E' => line[at] + 1,
            b'f' | b'F' => line[at] - 1,
            other => other,
        };
    }
    out
}

/// The line with each value's width changed (`Change::Widen`, `Change::Narrow`), or only
/// value `only`'s.
pub fn resized(line: &[u8], tokens: &[Token], widen: bool, only: Option<usize>) -> Vec<u8> {
    let mut out = Vec::with_capacity(line.len() + tokens.len());
    let mut copied = 0;
    for (index, t) in tokens.iter().enumerate() {
        if only.is_some_and(|o| o != index) || t.kind == Kind::Ip {
            continue;
        }
        let body = &line[t.start..t.end];
        let first = body.iter().position(u8::is_ascii_digit).unwrap_or(0);
        let int_end = body[first..].iter().position(|b| !b.is_ascii_digit()).map_or(body.len(), |n| first + n);
        out.extend_from_slice(&line[copied..t.start]);
        let changed: Vec<u8> = match (t.kind, widen) {
            (Kind::Hex, true) => [body, b"1"].concat(),
            (Kind::Hex, false) if body.len() > crate::mask::HEX_MIN => body[..body.len() - 1].to_vec(),
            (_, true) => [&body[..first], b"1", &body[first..]].concat(),
            (_, false) if int_end - first >= 2 => [&body[..first], &body[first + 1..]].concat(),
            (Kind::Number | Kind::Negative, false) if body.len() - int_end >= 3 && body[int_end] == b'.' => body[..body.len() - 1].to_vec(),
            _ => body.to_vec(),
        };
        out.extend_from_slice(&changed);
        copied = t.end;
    }
    out.extend_from_slice(&line[copied..]);
    out
}

/// Whether value `token` of the line is all zeros.
pub fn zeroed(line: &[u8], tokens: &[Token], token: usize) -> bool {
    tokens.get(token).is_some_and(|t| {
        let body = &line[t.start..t.end];
        body.iter().any(u8::is_ascii_digit) && body.iter().filter(|b| b.is_ascii_digit()).all(|&b| b == b'0')
    })
}

/// The line with one value's digits zeroed.
pub fn zeroed_at(line: &[u8], tokens: &[Token], token: usize) -> Vec<u8> {
    let mut out = line.to_vec();
    if let Some(t) = tokens.get(token) {
        out[t.start..t.end].iter_mut().filter(|b| b.is_ascii_digit()).for_each(|b| *b = b'0');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mask::mask;

    fn seen_of(line: &[u8]) -> (Vec<u8>, Vec<Token>) {
        let (mut shape, mut tokens) = (Vec::new(), Vec::new());
        mask(line, 0, &mut shape, &mut tokens);
        (shape, tokens)
    }

    #[test]
    fn sizes_are_found_with_their_unit() {
        let line = b"(WorkerDict pid=4012) before x memory allocated (GB): 14.953125, memory reserved (MB): 16.5";
        let (_, tokens) = seen_of(line);
        let seen = Seen { line, tokens: &tokens };
        let ctx = Ctx::default();
        let found = candidates(&Value::Int(16055795712), &seen, &ctx);
        assert!(found.contains(&Op::Size {
            token: 1,
            factor: 3,
            signed: false
        }));
        assert!(
            !found.contains(&Op::Size {
                token: 1,
                factor: 3,
                signed: true
            }),
            "a number's sign is its shape's"
        );
        assert_eq!(
            Op::Size {
                token: 2,
                factor: 2,
                signed: false
            }
            .eval(&seen, &ctx),
            Ok(Value::Int(17_301_504))
        );
        assert_eq!(candidates(&Value::Int(4012), &seen, &ctx)[1..], [Op::Int(0)]);
    }

    #[test]
    fn a_label_with_an_id_is_a_template() {
        let line = b"After init [run-0a1b2c3d4e #12] memory allocated (GB): 1.5";
        let (_, tokens) = seen_of(line);
        let seen = Seen { line, tokens: &tokens };
        let t = template_of("After init [run-0a1b2c3d4e #12]", &seen).unwrap();
        assert_eq!(
            t,
            Op::Template(vec![
                Piece::Lit("After init [run-".into()),
                Piece::Tok(0),
                Piece::Lit(" #".into()),
                Piece::Tok(1),
                Piece::Lit("]".into())
            ])
        );
        let other = b"After init [run-ffff2c3d4e #7] memory allocated (GB): 2.5";
        let (_, tokens) = seen_of(other);
        assert_eq!(
            t.eval(&Seen { line: other, tokens: &tokens }, &Ctx::default()),
            Ok(Value::Str("After init [run-ffff2c3d4e #7]".into()))
        );
    }

    #[test]
    fn sizes_at_an_edge_are_python_s() {
        let line = b"x -1.5 1e400 99999999999999999999";
        let (_, tokens) = seen_of(line);
        let seen = Seen { line, tokens: &tokens };
        let ctx = Ctx::default();
        assert_eq!(
            Op::Size {
                token: 0,
                factor: 3,
                signed: false
            }
            .eval(&seen, &ctx),
            Err(Edge::Value)
        );
        assert_eq!(
            Op::Size {
                token: 0,
                factor: 0,
                signed: true
            }
            .eval(&seen, &ctx),
            Ok(Value::Int(-2))
        );
        assert_eq!(Op::Float(1).eval(&seen, &ctx), Err(Edge::Value));
        assert_eq!(Op::Int(2).eval(&seen, &ctx), Err(Edge::Value));
    }

    #[test]
    fn perturbing_keeps_forms_and_months() {
        let line = b"2026-12-01 10:59:09 x=0.5 0x7f3a ab12cd";
        let (_, tokens) = seen_of(line);
        let text = |change| String::from_utf8(perturbed(line, &tokens, change)).unwrap();
        assert_eq!(text(Change::Last), "2025-11-02 11:58:08 x=0.4 0x7f3b ab12ce");
        assert_eq!(text(Change::First), "1026-02-11 20:49:19 x=1.5 0x6f3a bb12cd");
        assert_eq!(text(Change::Zero), "0000-00-00 00:00:00 x=0.0 0x0f0a ab00cd");
        assert!(zeroed(b"repeated 00x", &seen_of(b"repeated 00x").1, 0) && !zeroed(b"x 10", &seen_of(b"x 10").1, 0));
        assert_eq!(zeroed_at(b"a 12 b 3.5", &seen_of(b"a 12 b 3.5").1, 1), b"a 12 b 0.0");
        let sizes = b"a 12 b 3.55 c 7 d 1,234 e ab12cdef";
        let (_, tokens) = seen_of(sizes);
        assert_eq!(
            String::from_utf8(resized(sizes, &tokens, true, None)).unwrap(),
            "a 112 b 13.55 c 17 d 11,234 e ab12cdef1"
        );
        assert_eq!(
            String::from_utf8(resized(sizes, &tokens, false, None)).unwrap(),
            "a 2 b 3.5 c 7 d 1,234 e ab12cde"
        );
        assert_eq!(
            String::from_utf8(resized(sizes, &tokens, true, Some(2))).unwrap(),
            "a 12 b 3.55 c 17 d 1,234 e ab12cdef"
        );
    }

    #[test]
    fn take_is_envelopes_take_stamp() {
        let outer = Stamp {
            year: Some(2026),
            month: 3,
            day: 12,
            hour: 11,
            minute: 0,
            second: 1,
            millis: None,
            zone: None,
        };
        let inner = Stamp {
            year: None,
            month: 3,
            day: 12,
            hour: 10,
            minute: 59,
            second: 59,
            millis: Some(5),
            zone: None,
        };
        assert_eq!(take(outer, inner), Stamp { year: Some(2026), ..inner });
        assert_eq!(
            take(outer, Stamp { day: 11, ..inner }),
            Stamp {
                year: Some(2026),
                day: 11,
                ..inner
            }
        ); // a day before: within reach
        assert_eq!(take(outer, Stamp { day: 10, ..inner }), outer); // two days: another moment
        assert_eq!(take(Stamp { year: None, ..outer }, inner), inner);
        let new_year = Stamp {
            year: Some(2026),
            month: 12,
            day: 31,
            hour: 20,
            ..outer
        };
        let asia = Stamp {
            month: 1,
            day: 1,
            hour: 4,
            ..inner
        };
        assert_eq!(take(new_year, asia), Stamp { year: Some(2027), ..asia }); // UTC+8 is in the next year
        let leap = Stamp { month: 2, day: 29, ..inner };
        assert_eq!(
            take(
                Stamp {
                    year: Some(2025),
                    month: 3,
                    day: 1,
                    ..outer
                },
                leap
            ),
            Stamp {
                year: Some(2025),
                month: 3,
                day: 1,
                ..outer
            }
        );
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    }
}
