//! oomlens's native core: the work done on every byte read, over raw bytes.
//!
//! The patterns come from Python, read from the grammars' `//! trigger:` directives and the
//! time layouts of `data/times.toml`: no format is written here. A pattern reads bytes as
//! Latin-1 (one character a byte, as Python's `re` reads bytes), so a byte that is not UTF-8
//! still matches `.` or a negated class.
//!
//! Errors cross into Python as values: a bad pattern is a `ValueError`, and a panic inside the
//! core is caught and raised as a `ValueError` naming it, so the caller's `except Exception`
//! costs one input, never the run.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

pub mod engine;
pub mod fuzz;
pub mod mask;
pub mod plans;
pub mod pool;
pub mod reader;
pub mod stamps;
pub mod wire;

use std::sync::Arc;

use engine::{Found, Matcher, Searcher};
use plans::{Ctx, Made, Value};
use reader::{Payload, Row, ATTRIBUTES};
use stamps::{LayoutSpec, Lent, Stamp};

/// The bytes of a Python buffer (bytes, bytearray, memoryview), borrowed while the GIL is held.
fn bytes_of(buffer: &PyBuffer<u8>) -> PyResult<&[u8]> {
    if !buffer.is_c_contiguous() {
        return Err(PyValueError::new_err("oomlens core: a buffer that is not contiguous"));
    }
    // SAFETY: the buffer stays exported (its owner cannot resize it) while `buffer` lives, the
    // GIL is held for as long as the slice is used, and u8 has no alignment or validity needs.
    Ok(unsafe { std::slice::from_raw_parts(buffer.buf_ptr() as *const u8, buffer.len_bytes()) })
}

/// Python's slice bounds: `end` past the data is its end, `pos` past `end` an empty span.
fn bounds(len: usize, pos: usize, end: Option<usize>) -> (usize, usize) {
    let end = end.unwrap_or(len).min(len);
    (pos.min(end), end)
}

/// Run `work`, turning a panic into a `ValueError` the caller handles as any failure.
fn guarded<T>(what: &str, work: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(work)) {
        Ok(result) => result,
        Err(panic) => {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_string());
            Err(PyValueError::new_err(format!("oomlens core: {what}: {why}")))
        }
    }
}

fn value_error(err: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("oomlens core: {err}"))
}

/// Where any of many patterns matches in big buffers: every (end, pattern) of every match, as a
/// SIMD matcher reports them, and the runs of lines that hold one.
#[pyclass(frozen, module = "oomlens._core")]
struct Prefilter {
    matcher: Matcher,
    caches: Mutex<engine::Caches>,
}

#[pymethods]
impl Prefilter {
    /// `starts`: also find where the match that ends last starts (`last_match`).
    #[new]
    #[pyo3(signature = (patterns, starts = false))]
    fn new(patterns: Vec<String>, starts: bool) -> PyResult<Self> {
        guarded("compiling patterns", || {
            let matcher = Matcher::new(&patterns, starts).map_err(value_error)?;
            let caches = Mutex::new(matcher.caches());
            Ok(Prefilter { matcher, caches })
        })
    }

    /// Always: the core compiles every pattern it is given, or refuses it when made.
    #[getter]
    fn usable(&self) -> bool {
        true
    }

    /// (where it ends, pattern index) of every match in data[pos:end], in order.
    #[pyo3(signature = (data, pos = 0, end = None))]
    fn matches(&self, data: &Bound<'_, PyAny>, pos: usize, end: Option<usize>) -> PyResult<Vec<(usize, usize)>> {
        let buffer = PyBuffer::<u8>::get(data)?;
        let bytes = bytes_of(&buffer)?;
        let (pos, end) = bounds(bytes.len(), pos, end);
        guarded("matching", || {
            let mut caches = self.caches.lock().map_err(value_error)?;
            let mut found = Vec::new();
            self.matcher
                .each(&mut caches, &bytes[pos..end], |stop, pattern| {
                    found.push((pos + stop, pattern));
                    true
                })
                .map_err(value_error)?;
            Ok(found)
        })
    }

    /// (start, stop, last, ends) of each run of lines of data[pos:end] holding a match, in
    /// order: where the run's last match ends, and by pattern index where its matches end.
    #[pyo3(signature = (data, pos = 0, end = None))]
    fn spans<'py>(&self, py: Python<'py>, data: &Bound<'py, PyAny>, pos: usize, end: Option<usize>) -> PyResult<Bound<'py, PyList>> {
        let buffer = PyBuffer::<u8>::get(data)?;
        let bytes = bytes_of(&buffer)?;
        let (pos, end) = bounds(bytes.len(), pos, end);
        let runs = guarded("finding lines", || {
            let mut caches = self.caches.lock().map_err(value_error)?;
            self.matcher.spans(&mut caches, &bytes[pos..end]).map_err(value_error)
        })?;
        let out = PyList::empty(py);
        for run in runs {
            let ends = PyDict::new(py);
            for (pattern, stops) in run.ends {
                ends.set_item(pattern, stops.into_iter().map(|s| s + pos).collect::<Vec<_>>())?;
            }
            out.append(PyTuple::new(py, [run.lo + pos, run.hi + pos, run.last + pos])?.add(PyTuple::new(py, [ends])?)?)?;
        }
        Ok(out)
    }

    /// Whether any pattern matches in data[pos:end] (stops at the first match).
    #[pyo3(signature = (data, pos = 0, end = None))]
    fn any(&self, data: &Bound<'_, PyAny>, pos: usize, end: Option<usize>) -> PyResult<bool> {
        Ok(self.first_end(data, pos, end)?.is_some())
    }

    /// Where the match that ends first in data[pos:end] ends, if one does.
    #[pyo3(signature = (data, pos = 0, end = None))]
    fn first_end(&self, data: &Bound<'_, PyAny>, pos: usize, end: Option<usize>) -> PyResult<Option<usize>> {
        let buffer = PyBuffer::<u8>::get(data)?;
        let bytes = bytes_of(&buffer)?;
        let (pos, end) = bounds(bytes.len(), pos, end);
        guarded("matching", || {
            let mut caches = self.caches.lock().map_err(value_error)?;
            let mut first = None;
            self.matcher
                .each(&mut caches, &bytes[pos..end], |stop, _| {
                    first = Some(pos + stop);
                    false
                })
                .map_err(value_error)?;
            Ok(first)
        })
    }

    /// (start, end) of the match in data[pos:end] that ends last, if any: its leftmost start
    /// for a Prefilter made with `starts`, else `pos`.
    #[pyo3(signature = (data, pos = 0, end = None))]
    fn last_match(&self, data: &Bound<'_, PyAny>, pos: usize, end: Option<usize>) -> PyResult<Option<(usize, usize)>> {
        let buffer = PyBuffer::<u8>::get(data)?;
        let bytes = bytes_of(&buffer)?;
        let (pos, end) = bounds(bytes.len(), pos, end);
        guarded("matching", || {
            let mut caches = self.caches.lock().map_err(value_error)?;
            let found = self.matcher.last_match(&mut caches, &bytes[pos..end]).map_err(value_error)?;
            Ok(found.map(|(start, stop)| (start + pos, stop + pos)))
        })
    }
}

/// One regex over bytes, leftmost-first as Python's `re` (a DFA: no backtracking).
#[pyclass(frozen, module = "oomlens._core")]
struct Regex {
    searcher: Searcher,
    #[pyo3(get)]
    pattern: String,
}

/// A match of a `Regex`: its span and its groups' text, as `re.Match` tells them.
#[pyclass(frozen, module = "oomlens._core")]
struct Match {
    found: Found,
}

#[pymethods]
impl Match {
    fn start(&self) -> usize {
        self.found.spans[0].map_or(0, |(s, _)| s)
    }

    fn end(&self) -> usize {
        self.found.spans[0].map_or(0, |(_, e)| e)
    }

    /// The text of group `index` (0: the whole match), None where it took no part.
    #[pyo3(signature = (index = 0))]
    fn group<'py>(&self, py: Python<'py>, index: usize) -> PyResult<Option<Bound<'py, pyo3::types::PyBytes>>> {
        match self.found.texts.get(index) {
            None => Err(pyo3::exceptions::PyIndexError::new_err("no such group")),
            Some(text) => Ok(text.as_ref().map(|t| pyo3::types::PyBytes::new(py, t))),
        }
    }
}

#[pymethods]
impl Regex {
    #[new]
    fn new(pattern: String) -> PyResult<Self> {
        guarded("compiling a pattern", || {
            let searcher = Searcher::new(&pattern).map_err(value_error)?;
            Ok(Regex { searcher, pattern })
        })
    }

    /// The leftmost match in data[pos:end], as `re.Pattern.search(data, pos, end)` finds it:
    /// the bytes before `pos` are seen by `^` and `\b`, the span ends at `end` as a slice does.
    #[pyo3(signature = (data, pos = 0, end = None))]
    fn search(&self, data: &Bound<'_, PyAny>, pos: usize, end: Option<usize>) -> PyResult<Option<Match>> {
        let buffer = PyBuffer::<u8>::get(data)?;
        let bytes = bytes_of(&buffer)?;
        let (pos, end) = bounds(bytes.len(), pos, end);
        guarded("searching", || Ok(self.searcher.search(&bytes[..end], pos).map(|found| Match { found })))
    }

    /// Every match in data[pos:end], apart, as `re.Pattern.finditer(data, pos, end)` gives them.
    #[pyo3(signature = (data, pos = 0, end = None))]
    fn finditer(&self, data: &Bound<'_, PyAny>, pos: usize, end: Option<usize>) -> PyResult<Vec<Match>> {
        let buffer = PyBuffer::<u8>::get(data)?;
        let bytes = bytes_of(&buffer)?;
        let (pos, end) = bounds(bytes.len(), pos, end);
        guarded("searching", || {
            Ok(self.searcher.find_all(&bytes[..end], pos).into_iter().map(|found| Match { found }).collect())
        })
    }
}

/// The line breaks in data[start:end]: every byte read is counted once, for line numbers.
#[pyfunction]
#[pyo3(signature = (data, start = 0, end = None))]
fn newlines(data: &Bound<'_, PyAny>, start: usize, end: Option<usize>) -> PyResult<usize> {
    let buffer = PyBuffer::<u8>::get(data)?;
    let bytes = bytes_of(&buffer)?;
    let (start, end) = bounds(bytes.len(), start, end);
    Ok(engine::count_byte(&bytes[start..end], b'\n'))
}

/// The numbers of an ASCII line, in order, and its shape (engine::numbers_and_shape): what
/// shapes.py's regex split gives, in one pass and no Python object a part.
#[pyfunction]
fn numbers_and_shape(text: &str) -> PyResult<(Vec<&str>, String)> {
    if !text.is_ascii() {
        return Err(PyValueError::new_err(
            "oomlens core: numbers_and_shape reads ASCII text (shapes.py reads the rest)",
        ));
    }
    guarded("masking numbers", || {
        let (spans, shape) = engine::numbers_and_shape(text.as_bytes());
        let numbers = spans.into_iter().map(|(start, end)| &text[start..end]).collect();
        Ok((numbers, String::from_utf8(shape).map_err(value_error)?))
    })
}

/// Whether data[:end] is whole UTF-8 (a sequence cut at `end` is not), as the codec says.
#[pyfunction]
#[pyo3(signature = (data, end = None))]
fn utf8_valid(data: &Bound<'_, PyAny>, end: Option<usize>) -> PyResult<bool> {
    let buffer = PyBuffer::<u8>::get(data)?;
    let bytes = bytes_of(&buffer)?;
    let (_, end) = bounds(bytes.len(), 0, end);
    Ok(std::str::from_utf8(&bytes[..end]).is_ok())
}

// -- times -------------------------------------------------------------------------------------

type StampTuple = (Option<i64>, i64, i64, i64, i64, i64, Option<i64>, Option<i64>);

fn stamp_tuple(s: &Stamp) -> StampTuple {
    (s.year, s.month, s.day, s.hour, s.minute, s.second, s.millis, s.zone)
}

fn stamp_of_tuple(t: StampTuple) -> Stamp {
    Stamp {
        year: t.0,
        month: t.1,
        day: t.2,
        hour: t.3,
        minute: t.4,
        second: t.5,
        millis: t.6,
        zone: t.7,
    }
}

/// The time layouts of data/times.toml, found and read in raw bytes (stamps.rs).
#[pyclass(frozen, module = "oomlens._core")]
struct Stamps {
    stamps: Arc<stamps::Stamps>,
}

#[pymethods]
impl Stamps {
    /// `layouts`: (name, pattern, anywhere, utc) of each, in the file's order; `prefix_ip`: the
    /// pattern whose first group is the node Ray's prefix names.
    #[new]
    fn new(layouts: Vec<(String, String, bool, bool)>, prefix_ip: &str) -> PyResult<Self> {
        guarded("compiling time layouts", || {
            let specs: Vec<LayoutSpec> = layouts
                .into_iter()
                .map(|(name, pattern, anywhere, utc)| LayoutSpec { name, pattern, anywhere, utc })
                .collect();
            Ok(Stamps {
                stamps: Arc::new(stamps::Stamps::new(&specs, prefix_ip).map_err(value_error)?),
            })
        })
    }

    /// The first time a clock shows in data[pos:end], and where its line begins.
    #[pyo3(signature = (data, pos = 0, end = None))]
    fn first(&self, data: &Bound<'_, PyAny>, pos: usize, end: Option<usize>) -> PyResult<Option<(StampTuple, usize)>> {
        let buffer = PyBuffer::<u8>::get(data)?;
        let bytes = bytes_of(&buffer)?;
        let (pos, end) = bounds(bytes.len(), pos, end);
        guarded("finding a time", || Ok(self.stamps.first(bytes, pos, end).map(|(s, at)| (stamp_tuple(&s), at))))
    }

    /// Every time standing in data (leftmost-first, apart), at most `limit`, each None
    /// where it is no time a clock shows.
    #[pyo3(signature = (data, limit = None))]
    fn every(&self, data: &Bound<'_, PyAny>, limit: Option<usize>) -> PyResult<Vec<Option<StampTuple>>> {
        let buffer = PyBuffer::<u8>::get(data)?;
        let bytes = bytes_of(&buffer)?;
        guarded("finding times", || {
            let mut found = Vec::new();
            self.stamps.each(bytes, 0, bytes.len(), |start, end| {
                found.push(self.stamps.read(&bytes[start..end]).map(|s| stamp_tuple(&s)));
                limit.is_none_or(|n| found.len() < n)
            });
            Ok(found)
        })
    }

    /// The node the Ray prefix of the line holding `pos` names (of data[:end]), if it names one.
    fn node_of_line(&self, data: &Bound<'_, PyAny>, pos: usize, end: usize) -> PyResult<Option<String>> {
        let buffer = PyBuffer::<u8>::get(data)?;
        let bytes = bytes_of(&buffer)?;
        let end = end.min(bytes.len());
        guarded("reading a prefix", || Ok(self.stamps.node_of_line(bytes, pos.min(end), end)))
    }

    /// The last time a clock shows in data[pos:end], and where it starts.
    #[pyo3(signature = (data, pos = 0, end = None))]
    fn last(&self, data: &Bound<'_, PyAny>, pos: usize, end: Option<usize>) -> PyResult<Option<(StampTuple, usize)>> {
        let buffer = PyBuffer::<u8>::get(data)?;
        let bytes = bytes_of(&buffer)?;
        let (pos, end) = bounds(bytes.len(), pos, end);
        guarded("finding a time", || Ok(self.stamps.last(bytes, pos, end).map(|(s, at)| (stamp_tuple(&s), at))))
    }
}

/// The Stamp a layout's named groups spell (None: no time a clock shows): times.py's
/// stamp_of_groups, for the times an envelope's pattern reads.
#[pyfunction]
#[pyo3(signature = (y, mo, mon, d, h, mi, s, frac, zone, epoch, utc = false))]
#[allow(clippy::too_many_arguments)]
fn stamp_of_groups(
    y: Option<&str>,
    mo: Option<&str>,
    mon: Option<&str>,
    d: Option<&str>,
    h: Option<&str>,
    mi: Option<&str>,
    s: Option<&str>,
    frac: Option<&str>,
    zone: Option<&str>,
    epoch: Option<&str>,
    utc: bool,
) -> Option<StampTuple> {
    fn b(t: Option<&str>) -> Option<&[u8]> {
        t.map(str::as_bytes)
    }
    let parts = stamps::Parts {
        y: b(y),
        mo: b(mo),
        mon: b(mon),
        d: b(d),
        h: b(h),
        mi: b(mi),
        s: b(s),
        frac: b(frac),
        zone: b(zone),
        epoch: b(epoch),
    };
    stamps::stamp_of_parts(&parts, utc).map(|st| stamp_tuple(&st))
}

// -- lines the core reads whole ---------------------------------------------------------------

fn value_of(obj: &Bound<'_, PyAny>) -> Option<Value> {
    if obj.is_none() {
        Some(Value::None)
    } else if let Ok(b) = obj.downcast::<pyo3::types::PyBool>() {
        Some(Value::Bool(b.is_true()))
    } else if obj.is_instance_of::<pyo3::types::PyInt>() {
        obj.extract::<i64>().ok().map(Value::Int)
    } else if obj.is_instance_of::<pyo3::types::PyFloat>() {
        obj.extract::<f64>().ok().map(Value::Float)
    } else if let Ok(text) = obj.downcast::<pyo3::types::PyString>() {
        text.to_str().ok().map(|t| Value::Str(t.into()))
    } else {
        None
    }
}

fn object_of<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::None => py.None().into_bound(py),
        Value::Bool(b) => pyo3::types::PyBool::new(py, *b).to_owned().into_any(),
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::Float(f) => f.into_pyobject(py)?.into_any(),
        Value::Str(s) => pyo3::types::PyString::new(py, s).into_any(),
    })
}

/// What Python made of a line: None, or (outputs, own time, where a local time goes). Err
/// where a value is none the core holds (a list, an integer past 2**63): no plan reads it.
fn made_of(obj: &Bound<'_, PyAny>) -> Result<Option<Made>, ()> {
    if obj.is_none() {
        return Ok(None);
    }
    type Told<'a> = (Vec<(String, Bound<'a, PyAny>)>, Option<StampTuple>, usize);
    let (outputs, own, local_at): Told<'_> = obj.extract().map_err(|_| ())?;
    let mut values = Vec::with_capacity(outputs.len());
    for (name, value) in outputs {
        values.push((Arc::<str>::from(name), value_of(&value).ok_or(())?));
    }
    Ok(Some(Made {
        outputs: values,
        own: own.map(stamp_of_tuple),
        local_at,
    }))
}

fn ctx_of(pid: Option<i64>, node: Option<&str>, actor: Option<&str>) -> Ctx {
    Ctx {
        pid,
        node: node.map(Into::into),
        actor: actor.map(Into::into),
    }
}

/// A plan told: its shape, its state, each output's operations, its time's rules.
type Described = (String, String, Vec<(String, Vec<String>)>, Vec<String>);

/// What every reader of a process shares: the families as the core finds and shapes them,
/// the times, the plans learned (reader.rs).
#[pyclass(frozen, module = "oomlens._core")]
struct Lines {
    setup: reader::Setup,
}

#[pymethods]
impl Lines {
    /// `families`: (name, whether its lines make readings, reduce, keep) of each; `pattern_family`: per trigger pattern of the
    /// Prefilter the readers are given, its family's index (None: a worker's announcement);
    /// `suffix`: what in a reduced line's left-out part still matters; `shadow`: Python reads
    /// every line and the core compares.
    #[new]
    fn new(
        stamps: &Stamps,
        families: Vec<(String, bool, Option<String>, Option<String>)>,
        pattern_family: Vec<Option<usize>>,
        suffix: &str,
        shadow: bool,
    ) -> PyResult<Self> {
        guarded("setting up the reader", || {
            let specs: Vec<reader::FamilySpec> = families
                .into_iter()
                .map(|(name, plannable, reduce, keep)| reader::FamilySpec { name, plannable, reduce, keep })
                .collect();
            let setup = reader::Setup::new(stamps.stamps.clone(), &specs, pattern_family, suffix, shadow).map_err(value_error)?;
            Ok(Lines { setup })
        })
    }

    /// What Python made of a line of `family` (made: None, or (outputs, own time, where a
    /// local time goes), or anything else where it made what no plan holds), in the context
    /// it read it: the plan of its shape settles on it, or is learned from it, with `probe`
    /// (line, pid, node, actor) -> made: Python reading the line as the core changes it
    /// (its values changed or zeroed, or in another file's context: reader.rs).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (family, line, pid, node, actor, made, probe = None))]
    fn learn(
        &self,
        family: usize,
        line: &[u8],
        pid: Option<i64>,
        node: Option<&str>,
        actor: Option<&str>,
        made: &Bound<'_, PyAny>,
        probe: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let ctx = ctx_of(pid, node, actor);
        let Ok(made) = made_of(made) else {
            self.setup.forget(family, line);
            return Ok(());
        };
        let mut asked = |line: &[u8], ctx: &Ctx| -> PyResult<Option<Option<Made>>> {
            let probe = probe.expect("asked only with a probe");
            let made = probe.call1((pyo3::types::PyBytes::new(probe.py(), line), ctx.pid, ctx.node.as_deref(), ctx.actor.as_deref()))?;
            Ok(made_of(&made).ok())
        };
        let probing: Option<&mut reader::Probe<'_, PyErr>> = if probe.is_some() { Some(&mut asked) } else { None };
        match catch_unwind(AssertUnwindSafe(|| self.setup.learn(family, line, &ctx, &made, probing))) {
            Ok(result) => result.map(|_| ()),
            Err(_) => Err(PyValueError::new_err("oomlens core: learning a line: a panic")),
        }
    }

    /// The line with its values changed at their last digit, at their first, and zeroed
    /// (plans.rs).
    fn perturbed<'py>(&self, py: Python<'py>, family: usize, line: &[u8]) -> PyResult<Vec<Bound<'py, pyo3::types::PyBytes>>> {
        guarded("changing a line's values", || {
            let (mut key, mut tokens) = (Vec::new(), Vec::new());
            self.setup.shape(family, line, &mut key, &mut tokens);
            let changes = [plans::Change::Last, plans::Change::First, plans::Change::Zero];
            Ok(changes
                .iter()
                .map(|&change| pyo3::types::PyBytes::new(py, &plans::perturbed(line, &tokens, change)))
                .collect())
        })
    }

    /// Each plan: its shape (the line masked), its state, and its outputs with the
    /// operations left for each (what `make bench` and the tests look at).
    fn describe(&self) -> PyResult<Vec<Described>> {
        let plans = self.setup.plans.lock().map_err(value_error)?;
        let mut out = Vec::new();
        for (key, plan) in plans.iter() {
            let shape = String::from_utf8_lossy(&key[2..]).into_owned();
            let names: Vec<String> = plan.layout.as_ref().map_or_else(Vec::new, |l| l.names.iter().map(|n| n.to_string()).collect());
            let slots = names
                .into_iter()
                .zip(&plan.slots)
                .map(|(n, ops)| (n, ops.iter().map(|o| format!("{o:?}")).collect()))
                .collect();
            out.push((
                shape,
                format!("{:?} zero-sensitive {:?}", plan.state, plan.zero_sensitive),
                slots,
                plan.time.iter().map(|t| format!("{t:?}")).collect(),
            ));
        }
        Ok(out)
    }

    /// What the plan of a line's shape reads of it in a context: (state, its outputs and own
    /// time, or why it cannot: "disagree", "edge"); None where its shape has no plan.
    #[pyo3(signature = (family, line, pid = None, node = None, actor = None))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        family: usize,
        line: &[u8],
        pid: Option<i64>,
        node: Option<&str>,
        actor: Option<&str>,
    ) -> PyResult<Option<(String, Bound<'py, PyAny>)>> {
        let (mut key, mut tokens) = (Vec::new(), Vec::new());
        if !self.setup.shape(family, line, &mut key, &mut tokens) {
            return Ok(None);
        }
        let plans = self.setup.plans.lock().map_err(value_error)?;
        let Some(plan) = plans.get(&key) else { return Ok(None) };
        let seen = plans::Seen { line, tokens: &tokens };
        let told = match plan.eval(&self.setup.stamps, &seen, &ctx_of(pid, node, actor)) {
            Ok(None) => py.None().into_bound(py),
            Ok(Some(reading)) => {
                let values: Vec<Bound<'py, PyAny>> = reading.values.iter().map(|v| object_of(py, v)).collect::<PyResult<_>>()?;
                (values, reading.own.map(|s| stamp_tuple(&s))).into_pyobject(py)?.into_any()
            }
            Err(plans::Edge::Disagree) => pyo3::types::PyString::new(py, "disagree").into_any(),
            Err(plans::Edge::Value) => pyo3::types::PyString::new(py, "edge").into_any(),
        };
        Ok(Some((format!("{:?}", plan.state), told)))
    }

    /// How many shapes have a plan, how many of them the core reads alone, and how many
    /// lines the core read by them.
    fn plans(&self) -> PyResult<(usize, usize, u64)> {
        let plans = self.setup.plans.lock().map_err(value_error)?;
        Ok((
            plans.values().filter(|p| p.state != plans::State::Once).count(),
            plans.values().filter(|p| p.state == plans::State::Trusted).count(),
            plans.values().map(|p| p.taken).sum(),
        ))
    }
}

/// A reading kept: Python's event and where it stood, or a row.
type Kept<'py> = (Bound<'py, PyAny>, (i64, i64));

/// The readings a reduction keeps of one kind (pool.rs): Python's events, and rows.
#[pyclass(module = "oomlens._core")]
struct ReadingPool {
    pool: reader::ReadingPool,
}

fn key_value(obj: &Bound<'_, PyAny>) -> PyResult<pool::KeyValue> {
    value_of(obj)
        .map(pool::KeyValue)
        .ok_or_else(|| PyValueError::new_err("oomlens core: a series value the pool does not hold"))
}

#[pymethods]
impl ReadingPool {
    #[new]
    fn new(budget: usize) -> Self {
        ReadingPool { pool: pool::Pool::new(budget) }
    }

    #[getter]
    fn seen(&self) -> u64 {
        self.pool.seen
    }

    #[getter]
    fn level(&self) -> u32 {
        self.pool.level
    }

    /// An event Python made, with what its bucket is told by: its series (path, node, pid,
    /// actor, rank, gpu, memory, label), the seconds of its own time, its line and text, and
    /// its sizes (reduce.SIZES; None where it has none).
    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        event: Py<PyAny>,
        slot: (i64, i64),
        series: &Bound<'_, PyTuple>,
        seconds: Option<i64>,
        line: i64,
        text: &str,
        sizes: [Option<i128>; pool::SIZES],
    ) -> PyResult<()> {
        if series.len() != 8 {
            return Err(PyValueError::new_err("oomlens core: a series is eight values"));
        }
        let mut values: Vec<pool::KeyValue> = Vec::with_capacity(8);
        for item in series.iter() {
            values.push(key_value(&item)?);
        }
        let series: [pool::KeyValue; 8] = values.try_into().map_err(|_| PyValueError::new_err("oomlens core: a series is eight values"))?;
        self.pool.add(pool::Entry {
            payload: Payload::Python(event, slot),
            series: Arc::new(pool::Series::new(series)),
            seconds,
            line,
            text: text.into(),
            sizes,
        });
        Ok(())
    }

    fn coarsen(&mut self, level: u32) {
        self.pool.coarsen(level);
    }

    /// The rows the core read whole that the pool keeps, as bytes (wire.rs): what a worker
    /// hands back of them.
    fn dump<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        let out = guarded("handing back readings", || {
            let mut writer = wire::Writer::default();
            for entry in self.pool.kept() {
                if let Payload::Row(row) = &entry.payload {
                    writer.row(row);
                }
            }
            Ok(writer.finish())
        })?;
        Ok(pyo3::types::PyBytes::new(py, &out))
    }

    /// Rows another pool dumped, of input number `input`; `after`: the time after those
    /// that waited for one at the end of what that pool read (a byte range's next).
    #[pyo3(signature = (data, input, after = None))]
    fn load(&mut self, data: &[u8], input: i64, after: Option<LentTuple>) -> PyResult<()> {
        let after = lent_of(after);
        guarded("taking readings back", || {
            for mut row in wire::rows(data, after.as_ref()).map_err(value_error)? {
                row.input = input;
                self.pool.add(reader::entry_of(row));
            }
            Ok(())
        })
    }

    /// Every reading kept: (event, slot) of Python's, (row, (input, -1)) of the core's (`rows`:
    /// or none of them), a row as events.to_rows writes one.
    #[pyo3(signature = (rows = true))]
    fn kept<'py>(&self, py: Python<'py>, rows: bool) -> PyResult<Vec<Kept<'py>>> {
        let mut out = Vec::new();
        for entry in self.pool.kept() {
            match &entry.payload {
                Payload::Python(event, slot) => out.push((event.bind(py).clone(), *slot)),
                Payload::Row(row) if rows => out.push((row_tuple(py, row)?.into_any(), (row.input, -1))),
                Payload::Row(_) => {}
            }
        }
        Ok(out)
    }

    fn __len__(&self) -> usize {
        self.pool.len()
    }
}

/// The rows a pool dumped (ReadingPool.dump), as events.to_rows writes them; `after`: the
/// time after those that waited for one.
#[pyfunction]
#[pyo3(signature = (data, after = None))]
fn held_rows<'py>(py: Python<'py>, data: &[u8], after: Option<LentTuple>) -> PyResult<Vec<Bound<'py, PyTuple>>> {
    let after = lent_of(after);
    let rows = guarded("taking readings back", || wire::rows(data, after.as_ref()).map_err(value_error))?;
    rows.iter().map(|row| row_tuple(py, row)).collect()
}

/// A row as events.to_rows writes an event: its time told as scan.py tells one.
fn row_tuple<'py>(py: Python<'py>, row: &Row) -> PyResult<Bound<'py, PyTuple>> {
    let v = |i: usize| object_of(py, row.values.get(i).unwrap_or(&Value::None));
    let fields = PyDict::new(py);
    let (mut time, mut inferred, mut local) = (None, false, None);
    let lent_before = if row.borrowed { row.before.as_ref() } else { None };
    if let Some(stamp) = row.own.as_ref().or(lent_before.map(|l| &l.0)) {
        time = reader::iso(stamp, row.year);
        if time.is_none() {
            local = Some(reader::local(stamp));
        }
        inferred = row.borrowed && time.is_some();
    }
    for (index, (name, value)) in row.layout.names.iter().zip(&row.values).enumerate().skip(ATTRIBUTES) {
        if index - ATTRIBUTES == row.layout.local_at {
            if let Some(local) = &local {
                fields.set_item("local_time", local)?;
            }
        }
        fields.set_item(&**name, object_of(py, value)?)?;
    }
    if row.layout.names.len() - ATTRIBUTES <= row.layout.local_at {
        if let Some(local) = &local {
            fields.set_item("local_time", local)?;
        }
    }
    let mut latest = None;
    let mut stamp_nodes: Option<(Option<String>, Option<String>)> = None;
    if row.borrowed {
        if row.file.nodeless {
            stamp_nodes = Some((row.before.as_ref().and_then(|l| l.1.clone()), None));
        }
        if let Some(Some((stamp, node))) = row.after.get() {
            match reader::iso(stamp, row.year) {
                Some(text) => latest = Some(text),
                None => fields.set_item("local_time_latest", reader::local(stamp))?,
            }
            if row.file.nodeless {
                stamp_nodes = Some((stamp_nodes.and_then(|n| n.0), node.clone()));
            }
        }
    }
    let items: Vec<Bound<'py, PyAny>> = vec![
        v(0)?,
        pyo3::types::PyString::new(py, &row.file.path).into_any(),
        row.line.into_pyobject(py)?.into_any(),
        row.line.into_pyobject(py)?.into_any(),
        py.None().into_bound(py),
        pyo3::types::PyString::new(py, &row.text).into_any(),
        time.into_pyobject(py)?.into_any(),
        pyo3::types::PyBool::new(py, inferred).to_owned().into_any(),
        v(1)?,
        v(2)?,
        v(3)?,
        v(4)?,
        v(5)?,
        v(6)?,
        py.None().into_bound(py),
        v(7)?,
        fields.into_any(),
        py.None().into_bound(py),
        py.None().into_bound(py),
        latest.into_pyobject(py)?.into_any(),
        py.None().into_bound(py),
        PyList::empty(py).into_any(),
        stamp_nodes.into_pyobject(py)?.into_any(),
        v(8)?,
    ];
    PyTuple::new(py, items)
}

type LentTuple = (StampTuple, Option<String>);

fn lent_of(lent: Option<LentTuple>) -> Option<Lent> {
    lent.map(|(stamp, node)| (stamp_of_tuple(stamp), node))
}

fn lent_tuple(lent: Option<Lent>) -> Option<LentTuple> {
    lent.map(|(s, node)| (stamp_tuple(&s), node))
}

type RunTuple = (usize, usize, usize, std::collections::HashMap<usize, Vec<usize>>);

/// One scan's reader (reader.rs): the lines plans read whole, and the stream's times.
#[pyclass(module = "oomlens._core")]
struct Reader {
    lines: Py<Lines>,
    reader: reader::Reader,
}

#[pymethods]
impl Reader {
    /// `worker`: the file is a worker's, whose announced actor names its lines.
    #[new]
    #[pyo3(signature = (lines, path, pid, node, worker))]
    fn new(lines: Py<Lines>, path: &str, pid: Option<i64>, node: Option<&str>, worker: bool) -> Self {
        Reader {
            lines,
            reader: reader::Reader::new(path, pid, node, worker),
        }
    }

    fn set_year(&mut self, year: Option<i64>) {
        self.reader.year = year;
    }

    fn set_actor(&mut self, actor: Option<&str>) {
        self.reader.set_actor(actor);
    }

    /// What the bytes before the stream told: the last time, and the node that printed it.
    fn carry(&mut self, stamp: Option<StampTuple>, node: Option<String>) {
        self.reader.track.carry(stamp.map(|s| (stamp_of_tuple(s), node)));
    }

    /// A new buffer whose stream bytes end at `end`: the rows waiting for a time after them
    /// get its first.
    fn begin(&mut self, data: &Bound<'_, PyAny>, end: usize) -> PyResult<()> {
        let buffer = PyBuffer::<u8>::get(data)?;
        let bytes = bytes_of(&buffer)?;
        let end = end.min(bytes.len());
        let lines = self.lines.get();
        guarded("reading times", || {
            self.reader.track.begin(end);
            self.reader.close_open(&lines.setup, &bytes[..end]);
            Ok(())
        })
    }

    /// The last time before `pos` (ending at or before it), and the node whose line printed it.
    fn before(&mut self, data: &Bound<'_, PyAny>, pos: usize) -> PyResult<Option<LentTuple>> {
        let buffer = PyBuffer::<u8>::get(data)?;
        let bytes = bytes_of(&buffer)?;
        let lines = self.lines.get();
        guarded("reading times", || Ok(lent_tuple(self.reader.track.before(&lines.setup.stamps, bytes, pos))))
    }

    /// The first time at or after `pos` in the buffer, and the node whose line printed it.
    fn after(&mut self, data: &Bound<'_, PyAny>, pos: usize) -> PyResult<Option<LentTuple>> {
        let buffer = PyBuffer::<u8>::get(data)?;
        let bytes = bytes_of(&buffer)?;
        let lines = self.lines.get();
        guarded("reading times", || Ok(lent_tuple(self.reader.track.after(&lines.setup.stamps, bytes, pos))))
    }

    /// The buffer's bytes before `keep` are done with.
    fn consumed(&mut self, data: &Bound<'_, PyAny>, keep: usize) -> PyResult<()> {
        let buffer = PyBuffer::<u8>::get(data)?;
        let bytes = bytes_of(&buffer)?;
        let lines = self.lines.get();
        guarded("reading times", || {
            self.reader.track.consumed(&lines.setup.stamps, bytes, keep);
            Ok(())
        })
    }

    /// The runs of lines holding a trigger in data[begin:end] (the Prefilter's spans) less
    /// the lines plans read whole before `cut`, and the lines Python is to tell the core about
    /// (Reader.study). `enabled`: the core may read lines whole. A line of a shape the core is
    /// learning is first handed to `learn(start, family, actor, new)`, which tells the plans
    /// (Lines.learn) what Python makes of it.
    #[allow(clippy::too_many_arguments)]
    fn claim(
        &mut self,
        prefilter: &Prefilter,
        data: &Bound<'_, PyAny>,
        begin: usize,
        end: usize,
        cut: usize,
        line_base: i64,
        enabled: bool,
        learn: &Bound<'_, PyAny>,
    ) -> PyResult<(Vec<RunTuple>, Vec<usize>)> {
        let buffer = PyBuffer::<u8>::get(data)?;
        let bytes = bytes_of(&buffer)?;
        let (begin, end) = bounds(bytes.len(), begin, Some(end));
        let lines = self.lines.get();
        let runs = guarded("finding lines", || {
            let mut caches = prefilter.caches.lock().map_err(value_error)?;
            prefilter.matcher.spans(&mut caches, &bytes[begin..end]).map_err(value_error)
        })?;
        let runs: Vec<engine::Run> = runs
            .into_iter()
            .map(|r| engine::Run {
                lo: r.lo + begin,
                hi: r.hi + begin,
                last: r.last + begin,
                ends: r.ends.into_iter().map(|(p, e)| (p, e.into_iter().map(|x| x + begin).collect())).collect(),
            })
            .collect();
        let mut ask = |_: &reader::Setup, start: usize, family: usize, actor: Option<&Arc<str>>, new: bool| -> PyResult<()> {
            learn.call1((start, family, actor.map(|a| a.to_string()), new)).map(|_| ())
        };
        let (left, study) = match catch_unwind(AssertUnwindSafe(|| {
            self.reader.claim(&lines.setup, runs, &bytes[..end], cut, line_base, enabled, &mut ask)
        })) {
            Ok(result) => result?,
            Err(_) => return Err(PyValueError::new_err("oomlens core: reading lines: a panic")),
        };
        Ok((left.into_iter().map(|r| (r.lo, r.hi, r.last, r.ends.into_iter().collect())).collect(), study))
    }

    /// Put the lines taken into the pool of their kind (`pools`: by kind): those before
    /// `limit`, outside Python's blocks of their family (`skips`: start, end, family) and
    /// inside the stream offsets `owned` (a byte range's own part; the buffer starts at
    /// stream offset `base`).
    #[pyo3(signature = (pools, limit, skips, owned, base))]
    fn commit(
        &mut self,
        pools: &Bound<'_, PyDict>,
        limit: usize,
        skips: Vec<(usize, usize, usize)>,
        owned: Option<(usize, usize)>,
        base: usize,
    ) -> PyResult<()> {
        let rows = guarded("keeping readings", || Ok(self.reader.accept(limit, &skips, owned, base)))?;
        for row in rows {
            let kind = match row.values.first() {
                Some(Value::Str(kind)) => kind.clone(),
                _ => return Err(PyValueError::new_err("oomlens core: a reading with no kind")),
            };
            let pool = pools
                .get_item(&*kind)?
                .ok_or_else(|| PyValueError::new_err(format!("oomlens core: no pool for the readings of {kind}")))?;
            let mut pool = pool.downcast::<ReadingPool>()?.borrow_mut();
            guarded("keeping readings", || {
                self.reader.hold(&mut pool.pool, row);
                Ok(())
            })?;
        }
        Ok(())
    }

    /// What Python made of a line of `family` the core handed it (made: None, or (outputs,
    /// own time, where a local time goes)), in the context it read it (Setup::learn: settled
    /// on, a mismatch counted where a trusted plan had read it otherwise).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (family, line, pid, node, actor, made, line_no))]
    fn study(
        &mut self,
        family: usize,
        line: &[u8],
        pid: Option<i64>,
        node: Option<&str>,
        actor: Option<&str>,
        made: &Bound<'_, PyAny>,
        line_no: i64,
    ) -> PyResult<()> {
        let lines = self.lines.get();
        let ctx = ctx_of(pid, node, actor);
        let made = made_of(made);
        guarded("learning a line", || {
            match made {
                Ok(made) => self.reader.study(&lines.setup, family, line, &ctx, &made, line_no),
                Err(()) => lines.setup.forget(family, line),
            }
            Ok(())
        })
    }

    /// Bytes of the stream searched for times so far (tests count the work it does).
    #[getter]
    fn searched(&self) -> u64 {
        self.reader.track.searched
    }

    /// Lines the core had read otherwise than Python when Python read them again, and the
    /// first of them.
    #[getter]
    fn mismatches(&self) -> (u64, Option<i64>) {
        (self.reader.mismatches, self.reader.first_mismatch)
    }
}

#[pymodule]
fn _core(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<Stamps>()?;
    module.add_class::<Lines>()?;
    module.add_class::<Reader>()?;
    module.add_class::<ReadingPool>()?;
    module.add_function(wrap_pyfunction!(held_rows, module)?)?;
    module.add_function(wrap_pyfunction!(stamp_of_groups, module)?)?;
    module.add_class::<Prefilter>()?;
    module.add_class::<Regex>()?;
    module.add_class::<Match>()?;
    module.add_function(wrap_pyfunction!(newlines, module)?)?;
    module.add_function(wrap_pyfunction!(utf8_valid, module)?)?;
    module.add_function(wrap_pyfunction!(numbers_and_shape, module)?)?;
    Ok(())
}
