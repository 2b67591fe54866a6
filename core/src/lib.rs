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

use engine::{Found, Matcher, Searcher};

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

#[pymodule]
fn _core(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<Prefilter>()?;
    module.add_class::<Regex>()?;
    module.add_class::<Match>()?;
    module.add_function(wrap_pyfunction!(newlines, module)?)?;
    module.add_function(wrap_pyfunction!(utf8_valid, module)?)?;
    module.add_function(wrap_pyfunction!(numbers_and_shape, module)?)?;
    Ok(())
}
