//! The rows a worker's pools keep, as bytes for the process that concludes: a file's
//! readings travel as one buffer and join that process's pools with no Python object made
//! of them (reduce.py's `held`). Errors are values: a buffer that does not decode is named,
//! never a panic.

use std::collections::HashMap;

use rustc_hash::FxHashMap;
use std::sync::{Arc, OnceLock};

use crate::plans::{Layout, Value};
use crate::reader::{FileInfo, Row};
use crate::stamps::{Lent, Stamp};

const VERSION: u8 = 1;

/// Writes rows: the files, layouts and short texts they share once each (a table entry as
/// it is first met), then the rows, which name them by number.
#[derive(Default)]
pub struct Writer {
    out: Vec<u8>,
    files: HashMap<usize, u32>,
    layouts: HashMap<usize, u32>,
    texts: FxHashMap<Arc<str>, u32>,
    rows: u32,
    body: Vec<u8>,
}

impl Writer {
    pub fn row(&mut self, row: &Row) {
        let next = self.files.len() as u32;
        let file = *self.files.entry(Arc::as_ptr(&row.file) as usize).or_insert_with(|| {
            self.out.push(b'F');
            put_str(&mut self.out, &row.file.path);
            self.out.push(u8::from(row.file.nodeless));
            next
        });
        let next = self.layouts.len() as u32;
        let layout = *self.layouts.entry(Arc::as_ptr(&row.layout) as usize).or_insert_with(|| {
            self.out.push(b'L');
            put_u32(&mut self.out, row.layout.local_at as u32);
            put_u32(&mut self.out, row.layout.names.len() as u32);
            for name in &row.layout.names {
                put_str(&mut self.out, name);
            }
            next
        });
        let mut body = std::mem::take(&mut self.body);
        let b = &mut body;
        put_u32(b, file);
        put_u32(b, layout);
        put_u32(b, row.values.len() as u32);
        for value in &row.values {
            match value {
                Value::Str(text) => {
                    b.push(4);
                    let index = self.text(text);
                    put_u32(b, index);
                }
                other => put_value(b, other),
            }
        }
        b.extend_from_slice(&row.line.to_le_bytes());
        put_str(b, &row.text);
        put_opt_i64(b, row.year);
        put_opt_stamp(b, row.own.as_ref());
        b.push(u8::from(row.borrowed));
        match &row.before {
            None => b.push(0),
            Some(lent) => {
                b.push(1);
                self.lent(b, lent);
            }
        }
        match row.after.get() {
            None => b.push(0),
            Some(None) => b.push(1),
            Some(Some(lent)) => {
                b.push(2);
                self.lent(b, lent);
            }
        }
        self.body = body;
        self.rows += 1;
    }

    /// The number of a short text in the table, written there when first met.
    fn text(&mut self, text: &str) -> u32 {
        if let Some(&index) = self.texts.get(text) {
            return index;
        }
        let index = self.texts.len() as u32;
        self.out.push(b'S');
        put_str(&mut self.out, text);
        self.texts.insert(text.into(), index);
        index
    }

    fn lent(&mut self, b: &mut Vec<u8>, (stamp, node): &Lent) {
        put_opt_stamp(b, Some(stamp));
        match node {
            None => b.push(0),
            Some(node) => {
                b.push(1);
                let index = self.text(node);
                put_u32(b, index);
            }
        }
    }

    /// The tables first, then the rows.
    pub fn finish(mut self) -> Vec<u8> {
        let mut out = vec![VERSION];
        out.append(&mut self.out);
        out.push(b'R');
        put_u32(&mut out, self.rows);
        out.append(&mut self.body);
        out
    }
}

fn put_u32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    put_u32(b, s.len() as u32);
    b.extend_from_slice(s.as_bytes());
}

fn put_opt_i64(b: &mut Vec<u8>, v: Option<i64>) {
    match v {
        None => b.push(0),
        Some(v) => {
            b.push(1);
            b.extend_from_slice(&v.to_le_bytes());
        }
    }
}

fn put_value(b: &mut Vec<u8>, value: &Value) {
    match value {
        Value::None => b.push(0),
        Value::Bool(v) => b.extend_from_slice(&[1, u8::from(*v)]),
        Value::Int(v) => {
            b.push(2);
            b.extend_from_slice(&v.to_le_bytes());
        }
        Value::Float(v) => {
            b.push(3);
            b.extend_from_slice(&v.to_bits().to_le_bytes());
        }
        Value::Str(_) => unreachable!("a text is written by its number in the table"),
    }
}

fn put_opt_stamp(b: &mut Vec<u8>, stamp: Option<&Stamp>) {
    match stamp {
        None => b.push(0),
        Some(s) => {
            b.push(1);
            put_opt_i64(b, s.year);
            for v in [s.month, s.day, s.hour, s.minute, s.second] {
                b.extend_from_slice(&v.to_le_bytes());
            }
            put_opt_i64(b, s.millis);
            put_opt_i64(b, s.zone);
        }
    }
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
    texts: Vec<Arc<str>>,
}

type Read<T> = Result<T, String>;

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Read<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.data.len()).ok_or("held readings cut short")?;
        let out = &self.data[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u8(&mut self) -> Read<u8> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Read<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("four bytes")))
    }

    fn i64(&mut self) -> Read<i64> {
        Ok(i64::from_le_bytes(self.take(8)?.try_into().expect("eight bytes")))
    }

    fn str(&mut self) -> Read<Arc<str>> {
        let n = self.u32()? as usize;
        std::str::from_utf8(self.take(n)?)
            .map(Into::into)
            .map_err(|_| "held readings hold a text that is no UTF-8".into())
    }

    fn opt_i64(&mut self) -> Read<Option<i64>> {
        Ok(if self.u8()? == 0 { None } else { Some(self.i64()?) })
    }

    fn text(&mut self) -> Read<Arc<str>> {
        let index = self.u32()? as usize;
        self.texts.get(index).cloned().ok_or_else(|| "held readings name no text".into())
    }

    fn value(&mut self) -> Read<Value> {
        Ok(match self.u8()? {
            0 => Value::None,
            1 => Value::Bool(self.u8()? != 0),
            2 => Value::Int(self.i64()?),
            3 => Value::Float(f64::from_bits(self.i64()? as u64)),
            4 => Value::Str(self.text()?),
            tag => return Err(format!("held readings hold a value of no kind ({tag})")),
        })
    }

    fn opt_stamp(&mut self) -> Read<Option<Stamp>> {
        if self.u8()? == 0 {
            return Ok(None);
        }
        Ok(Some(Stamp {
            year: self.opt_i64()?,
            month: self.i64()?,
            day: self.i64()?,
            hour: self.i64()?,
            minute: self.i64()?,
            second: self.i64()?,
            millis: self.opt_i64()?,
            zone: self.opt_i64()?,
        }))
    }

    fn lent(&mut self) -> Read<Lent> {
        let stamp = self.opt_stamp()?.ok_or("held readings lend no time")?;
        let node = if self.u8()? == 0 { None } else { Some(self.text()?.to_string()) };
        Ok((stamp, node))
    }
}

/// The rows of a buffer `Writer` made; `after_all`: the time after those that still waited for
/// one where the reading that made them ended (a byte range's next).
pub fn rows(data: &[u8], after_all: Option<&Lent>) -> Result<Vec<Row>, String> {
    let mut r = Reader {
        data,
        at: 0,
        texts: Vec::new(),
    };
    if r.u8()? != VERSION {
        return Err("held readings of another version of oomlens".into());
    }
    let (mut files, mut layouts) = (Vec::new(), Vec::new());
    loop {
        match r.u8()? {
            b'F' => {
                let path = r.str()?;
                files.push(Arc::new(FileInfo { path, nodeless: r.u8()? != 0 }));
            }
            b'L' => {
                let local_at = r.u32()? as usize;
                let n = r.u32()? as usize;
                let mut names = Vec::with_capacity(n.min(data.len()));
                for _ in 0..n {
                    names.push(r.str()?);
                }
                layouts.push(Arc::new(Layout::new(names, local_at)));
            }
            b'S' => {
                let text = r.str()?;
                r.texts.push(text);
            }
            b'R' => break,
            tag => return Err(format!("held readings hold a table of no kind ({tag})")),
        }
    }
    let count = r.u32()? as usize;
    let mut out = Vec::with_capacity(count.min(data.len() / 16));
    for _ in 0..count {
        let file = files.get(r.u32()? as usize).ok_or("held readings name no file")?.clone();
        let layout = layouts.get(r.u32()? as usize).ok_or("held readings name no layout")?.clone();
        let n = r.u32()? as usize;
        let mut values = Vec::with_capacity(n.min(data.len()));
        for _ in 0..n {
            values.push(r.value()?);
        }
        let line = r.i64()?;
        let text = r.str()?;
        let year = r.opt_i64()?;
        let own = r.opt_stamp()?;
        let borrowed = r.u8()? != 0;
        let before = if r.u8()? == 0 { None } else { Some(r.lent()?) };
        let after = OnceLock::new();
        match r.u8()? {
            0 => {}
            1 => {
                let _ = after.set(None);
            }
            _ => {
                let _ = after.set(Some(r.lent()?));
            }
        }
        let row = Row {
            file,
            layout,
            values,
            line,
            text,
            year,
            own,
            borrowed,
            before,
            after,
            input: 0,
        };
        if let Some(lent) = after_all.filter(|_| row.open()) {
            let _ = row.after.set(Some(lent.clone()));
        }
        out.push(row);
    }
    if r.at != data.len() {
        return Err("held readings run on past their rows".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn stamp() -> impl Strategy<Value = Stamp> {
        (
            proptest::option::of(1970i64..2100),
            1i64..13,
            1i64..29,
            0i64..24,
            0i64..60,
            0i64..60,
            proptest::option::of(0i64..1000),
            proptest::option::of(-720i64..840),
        )
            .prop_map(|(year, month, day, hour, minute, second, millis, zone)| Stamp {
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

    fn lent() -> impl Strategy<Value = Lent> {
        (stamp(), proptest::option::of("10\\.0\\.0\\.[0-9]"))
    }

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::None),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::Int),
            any::<f64>().prop_map(Value::Float),
            "[a-zé_ ]{0,12}".prop_map(|s| Value::Str(s.into())),
        ]
    }

    prop_compose! {
        fn row(files: Vec<Arc<FileInfo>>, layouts: Vec<Arc<Layout>>)(
            file in 0..files.len(), layout in 0..layouts.len(), values in proptest::collection::vec(value(), 0..14),
            line in any::<i64>(), text in "\\PC{0,40}", year in proptest::option::of(1990i64..2100), own in proptest::option::of(stamp()),
            borrowed in any::<bool>(), before in proptest::option::of(lent()), after in proptest::option::of(proptest::option::of(lent())),
        ) -> Row {
            let cell = OnceLock::new();
            if let Some(after) = after {
                let _ = cell.set(after);
            }
            Row { file: files[file].clone(), layout: layouts[layout].clone(), values, line, text: text.into(), year, own, borrowed, before, after: cell, input: 0 }
        }
    }

    fn same(a: &Row, b: &Row) -> bool {
        a.file.path == b.file.path
            && a.file.nodeless == b.file.nodeless
            && a.layout.names == b.layout.names
            && a.layout.local_at == b.layout.local_at
            && a.values == b.values
            && (a.line, &a.text, a.year, a.own, a.borrowed, &a.before) == (b.line, &b.text, b.year, b.own, b.borrowed, &b.before)
            && a.after.get() == b.after.get()
    }

    proptest! {
        /// What a pool dumps is read back as it was, whatever its values, times and texts.
        #[test]
        fn rows_travel_unchanged(rows in proptest::collection::vec(row(
            vec![Arc::new(FileInfo { path: "a.log".into(), nodeless: true }), Arc::new(FileInfo { path: "logs/w-1.out".into(), nodeless: false })],
            vec![Arc::new(Layout::new(vec!["kind".into(), "node".into()], 0)), Arc::new(Layout::new((0..12).map(|i| format!("f{i}").into()).collect(), 3))],
        ), 0..20)) {
            let mut writer = Writer::default();
            rows.iter().for_each(|r| writer.row(r));
            let data = writer.finish();
            let back = super::rows(&data, None).unwrap();
            prop_assert_eq!(back.len(), rows.len());
            prop_assert!(rows.iter().zip(&back).all(|(a, b)| same(a, b)));
            for cut in [0, data.len() / 2, data.len().saturating_sub(1)] {
                if cut < data.len() {
                    prop_assert!(super::rows(&data[..cut], None).is_err());
                }
            }
        }
    }
}
