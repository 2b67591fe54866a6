//! The readings a reduction keeps (reduce.py's Pool for a kind of readings), natively: a
//! memory line the core read whole joins it without a Python object being made, and only
//! the readings kept in the end become events.
//!
//! As in reduce.py: each series (file, node, pid, actor, rank, gpu, memory, label) is cut
//! into buckets on a grid of 2**(level - 1) seconds (lines, for a reading that prints no time
//! of its own), and a bucket keeps its first and last reading and the lowest and highest of
//! each size; all series share one level, the finest at which the buckets fit the budget;
//! two last levels merge a file's labels, then a file's series. The kept set depends on the
//! readings alone, not on their order (a coarser bucket's extremes are among the finer ones').

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use indexmap::IndexMap;
use rustc_hash::{FxBuildHasher, FxHasher};

use crate::plans::Value;

type Map<K, V> = IndexMap<K, V, FxBuildHasher>;

pub const WIDEST: u32 = 65;
pub const LABELLESS: u32 = WIDEST + 1;
pub const FILEWIDE: u32 = WIDEST + 2;
/// The sizes a bucket keeps the extremes of (reduce.SIZES; what timeline.py draws).
pub const SIZES: usize = 4;

/// A value as a key: Python's equality of the values a series is made of.
#[derive(Clone, Debug)]
pub struct KeyValue(pub Value);

impl PartialEq for KeyValue {
    fn eq(&self, other: &KeyValue) -> bool {
        match (&self.0, &other.0) {
            (Value::Int(a), Value::Float(b)) | (Value::Float(b), Value::Int(a)) => (*a as f64) == *b,
            (Value::Float(a), Value::Float(b)) => a == b,
            (Value::Bool(a), Value::Int(b)) | (Value::Int(b), Value::Bool(a)) => i64::from(*a) == *b,
            (a, b) => a == b,
        }
    }
}

impl Eq for KeyValue {}

impl Hash for KeyValue {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match &self.0 {
            Value::None => 0u8.hash(state),
            Value::Bool(b) => i64::from(*b).hash(state),
            Value::Int(i) => i.hash(state),
            Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => (*f as i64).hash(state),
            Value::Float(f) => f.to_bits().hash(state),
            Value::Str(s) => s.hash(state),
        }
    }
}

/// (path, node, pid, actor, rank, gpu, memory, label): a reading's series, with its hash
/// (a series keys every bucket of its readings: hashed once).
#[derive(Clone, Debug)]
pub struct Series {
    values: [KeyValue; 8],
    hash: u64,
}

impl Series {
    pub fn new(values: [KeyValue; 8]) -> Series {
        let mut hasher = FxHasher::default();
        values.hash(&mut hasher);
        Series { hash: hasher.finish(), values }
    }

    fn without_label(&self) -> Series {
        let mut values = self.values.clone();
        values[7] = KeyValue(Value::None);
        Series::new(values)
    }
}

impl PartialEq for Series {
    fn eq(&self, other: &Series) -> bool {
        self.hash == other.hash && self.values == other.values
    }
}

impl Eq for Series {}

impl Hash for Series {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.hash.hash(state);
    }
}

/// A bucket's key. A reading's own (level 0) is hashed by its series and line: two readings
/// of one line are told apart by their texts when compared, not hashed.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Key {
    /// level 0: the reading itself
    Own(Arc<Series>, i64, Arc<str>),
    /// a grid's cell of seconds (true) or lines
    Grid(Arc<Series>, bool, i64),
    /// a file, process and device (the series but its label)
    Labelless(Arc<Series>),
    /// a file and its memory
    Filewide(KeyValue, KeyValue),
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            Key::Own(series, line, _) => (0u8, series.hash, line).hash(state),
            Key::Grid(series, seconds, cell) => (1u8, series.hash, seconds, cell).hash(state),
            Key::Labelless(series) => (2u8, series.hash).hash(state),
            Key::Filewide(path, memory) => (3u8, path, memory).hash(state),
        }
    }
}

/// One reading as the pool reads it, with what it stands for (a Python event, a row).
pub struct Entry<P> {
    pub payload: P,
    pub series: Arc<Series>,
    /// seconds since the epoch of the time its line printed (None: it printed none)
    pub seconds: Option<i64>,
    pub line: i64,
    pub text: Arc<str>,
    pub sizes: [Option<i128>; SIZES],
}

impl<P> Entry<P> {
    fn order(&self, other: &Entry<P>) -> Ordering {
        (self.line, &*self.text).cmp(&(other.line, &*other.text))
    }

    fn key(&self, level: u32) -> Key {
        let s = &self.series.values;
        match level {
            FILEWIDE => Key::Filewide(s[0].clone(), s[6].clone()),
            LABELLESS => Key::Labelless(Arc::new(self.series.without_label())),
            0 => Key::Own(self.series.clone(), self.line, self.text.clone()),
            _ => match self.seconds {
                Some(seconds) => Key::Grid(self.series.clone(), true, seconds >> (level - 1).min(63)),
                None => Key::Grid(self.series.clone(), false, self.line >> (level - 1).min(63)),
            },
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    First,
    Last,
    Min(u8),
    Max(u8),
}

/// A bucket's roles and who holds each, in the order the roles were given (a Python dict's).
struct Bucket<P> {
    roles: Vec<(Role, Arc<Entry<P>>)>,
}

impl<P> Bucket<P> {
    fn new(entry: Arc<Entry<P>>) -> Bucket<P> {
        let mut roles = vec![(Role::First, entry.clone()), (Role::Last, entry.clone())];
        for (i, size) in entry.sizes.iter().enumerate() {
            if size.is_some() {
                roles.push((Role::Min(i as u8), entry.clone()));
                roles.push((Role::Max(i as u8), entry.clone()));
            }
        }
        Bucket { roles }
    }

    fn get(&self, role: Role) -> Option<&Arc<Entry<P>>> {
        self.roles.iter().find(|(r, _)| *r == role).map(|(_, e)| e)
    }

    fn set(&mut self, role: Role, entry: &Arc<Entry<P>>) {
        match self.roles.iter_mut().find(|(r, _)| *r == role) {
            Some(held) => held.1 = entry.clone(),
            None => self.roles.push((role, entry.clone())),
        }
    }

    /// reduce._keep: the entry takes each role it is better at (ties: the earlier one).
    fn keep(&mut self, entry: &Arc<Entry<P>>) {
        if entry.order(self.get(Role::First).expect("a bucket has a first")) == Ordering::Less {
            self.set(Role::First, entry);
        }
        if entry.order(self.get(Role::Last).expect("a bucket has a last")) == Ordering::Greater {
            self.set(Role::Last, entry);
        }
        for (i, size) in entry.sizes.iter().enumerate() {
            let Some(value) = size else { continue };
            let (min, max) = (Role::Min(i as u8), Role::Max(i as u8));
            let better = |held: Option<&Arc<Entry<P>>>, want: Ordering| {
                held.is_none_or(|h| {
                    let kept = h.sizes[i].expect("a size's holder has that size");
                    value.cmp(&kept) == want || (*value == kept && entry.order(h) == Ordering::Less)
                })
            };
            if better(self.get(min), Ordering::Less) {
                self.set(min, entry);
            }
            if better(self.get(max), Ordering::Greater) {
                self.set(max, entry);
            }
        }
    }

    /// Its entries, once each, in the order of their first role (reduce._distinct).
    fn distinct(&self) -> Vec<Arc<Entry<P>>> {
        let mut out: Vec<Arc<Entry<P>>> = Vec::new();
        for (_, entry) in &self.roles {
            if !out.iter().any(|e| Arc::ptr_eq(e, entry)) {
                out.push(entry.clone());
            }
        }
        out
    }
}

/// The buckets of one kind of readings.
pub struct Pool<P> {
    budget: usize,
    pub level: u32,
    pub seen: u64,
    buckets: Map<Key, Bucket<P>>,
}

impl<P> Pool<P> {
    pub fn new(budget: usize) -> Pool<P> {
        Pool {
            budget,
            level: 0,
            seen: 0,
            buckets: Map::default(),
        }
    }

    /// Take one reading: kept for as long as it holds a role of its bucket.
    pub fn add(&mut self, entry: Entry<P>) -> Arc<Entry<P>> {
        self.seen += 1;
        let entry = Arc::new(entry);
        let key = entry.key(self.level);
        match self.buckets.get_mut(&key) {
            Some(bucket) => bucket.keep(&entry),
            None => {
                self.buckets.insert(key, Bucket::new(entry.clone()));
                if self.buckets.len() > self.budget && self.level < FILEWIDE {
                    self.coarsen(self.level + 1);
                }
            }
        }
        entry
    }

    /// Widen every bucket to `level`, and further until all fit the budget.
    pub fn coarsen(&mut self, level: u32) {
        let mut level = level.min(FILEWIDE);
        while level > self.level {
            let mut merged: Map<Key, Bucket<P>> = Map::with_capacity_and_hasher(self.buckets.len(), FxBuildHasher);
            for (_, bucket) in self.buckets.drain(..) {
                let key = bucket.get(Role::First).expect("a bucket has a first").key(level);
                match merged.get_mut(&key) {
                    None => {
                        merged.insert(key, bucket);
                    }
                    Some(home) => {
                        for entry in bucket.distinct() {
                            home.keep(&entry);
                        }
                    }
                }
            }
            self.buckets = merged;
            self.level = level;
            if self.buckets.len() > self.budget && level < FILEWIDE {
                level += 1;
            }
        }
    }

    /// Every reading kept, once each, in no particular order.
    pub fn kept(&self) -> Vec<Arc<Entry<P>>> {
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for bucket in self.buckets.values() {
            for entry in bucket.distinct() {
                if seen.insert(Arc::as_ptr(&entry) as usize) {
                    out.push(entry);
                }
            }
        }
        out
    }

    /// How many readings are kept now.
    pub fn len(&self) -> usize {
        self.kept().len()
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn series(label: &str, pid: i64) -> Arc<Series> {
        let s = |t: &str| KeyValue(Value::Str(t.into()));
        let n = KeyValue(Value::None);
        Arc::new(Series::new([
            s("f"),
            n.clone(),
            KeyValue(Value::Int(pid)),
            n.clone(),
            n.clone(),
            n.clone(),
            s("gpu"),
            s(label),
        ]))
    }

    fn entry(id: usize, label: &str, pid: i64, line: i64, seconds: Option<i64>, used: Option<i128>) -> Entry<usize> {
        Entry {
            payload: id,
            series: series(label, pid),
            seconds,
            line,
            text: format!("line {line}").into(),
            sizes: [used, None, Some(7), None],
        }
    }

    fn kept(pool: &Pool<usize>) -> Vec<usize> {
        let mut ids: Vec<usize> = pool.kept().iter().map(|e| e.payload).collect();
        ids.sort_unstable();
        ids
    }

    #[test]
    fn a_run_that_fits_keeps_every_reading() {
        let mut pool = Pool::new(16);
        for i in 0..10 {
            pool.add(entry(i, "a", 1, i as i64, None, Some(i as i128)));
        }
        assert_eq!((pool.level, kept(&pool).len()), (0, 10));
    }

    #[test]
    fn a_bucket_keeps_its_ends_and_extremes() {
        let mut pool = Pool::new(1);
        let used = [5, 9, 1, 9, 3];
        for (i, u) in used.iter().enumerate() {
            pool.add(entry(i, "a", 1, i as i64 + 1, None, Some(*u)));
        }
        // first (0), last (4), min used (2), max used (1, the earlier of two 9s), every "7" a tie: the first
        assert_eq!(kept(&pool), vec![0, 1, 2, 4]);
    }

    proptest! {
        /// The kept set depends on the readings alone: any order, any split of them merged.
        #[test]
        fn the_kept_set_is_the_same_in_any_order(
            readings in prop::collection::vec((0usize..3, 1i64..3, 0i64..400, prop::option::of(0i64..100_000), prop::option::of(0i128..50)), 1..120),
            budget in 1usize..12,
            seed in any::<u64>(),
        ) {
            let make = |i: usize| {
                let (label, pid, line, seconds, used) = readings[i];
                entry(i, ["a", "b", "c"][label], pid, line * 1000 + i as i64, seconds, used)
            };
            let mut forward = Pool::new(budget);
            (0..readings.len()).for_each(|i| { forward.add(make(i)); });
            let mut order: Vec<usize> = (0..readings.len()).collect();
            let mut state = seed;
            for i in (1..order.len()).rev() {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                order.swap(i, (state >> 33) as usize % (i + 1));
            }
            let mut shuffled = Pool::new(budget);
            order.iter().for_each(|&i| { shuffled.add(make(i)); });
            shuffled.coarsen(forward.level);
            forward.coarsen(shuffled.level);
            prop_assert_eq!(kept(&forward), kept(&shuffled));
        }
    }
}
