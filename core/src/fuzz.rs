//! The core's entry for libFuzzer (core/fuzz) and for the regression inputs `make test`
//! replays: every function that reads raw bytes of a log, over arbitrary bytes.

use crate::engine;
use crate::mask::{mask, maskable, Kind};
use crate::plans::{perturbed, resized, zeroed_at, Change};
use crate::stamps::{LayoutSpec, Stamps, Track};

/// Layouts of the shapes times.toml holds (a date and a clock with fraction and zone, a
/// month's name, a glog's, epoch seconds), so the merged search meets every group.
const LAYOUTS: [(&str, &str, bool); 4] = [
    (
        "iso",
        r"(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)[ T](?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:[.,](?P<frac>\d{1,9}))?(?P<zone>Z|[+-]\d\d:?\d\d)?",
        true,
    ),
    (
        "syslog",
        r"(?m:^)(?P<mon>[A-Z][a-z]{2}) +(?P<d>\d{1,2}) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)",
        false,
    ),
    (
        "glog",
        r"(?m:^)[IWEF](?P<mo>\d\d)(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)\.(?P<frac>\d{6})",
        false,
    ),
    ("epoch", r"\[(?P<epoch>1\d{9}(?:\.\d+)?)\]", true),
];

pub fn fuzz_one(data: &[u8]) {
    engine::fuzz_one(data);
    static STAMPS: std::sync::OnceLock<Stamps> = std::sync::OnceLock::new();
    let stamps = STAMPS.get_or_init(|| {
        let specs: Vec<LayoutSpec> = LAYOUTS
            .iter()
            .map(|&(name, pattern, anywhere)| LayoutSpec {
                name: name.into(),
                pattern: pattern.into(),
                anywhere,
                utc: false,
            })
            .collect();
        Stamps::new(&specs, r"\(\S+?,? pid=\d+(?:, ip=([0-9.]+))?\)").expect("the fuzzers' layouts compile")
    });
    let cut = data.first().map_or(0, |&b| usize::from(b) % (data.len() + 1));
    let hay = &data[cut..];

    let (mut shape, mut tokens) = (Vec::new(), Vec::new());
    mask(hay, 0, &mut shape, &mut tokens);
    assert!(tokens.windows(2).all(|w| w[0].end <= w[1].start));
    assert!(tokens.iter().all(|t| t.start < t.end && t.end <= hay.len()));
    assert_eq!(shape.len(), hay.len() - tokens.iter().map(|t| t.end - t.start).sum::<usize>() + tokens.len());
    if maskable(hay) {
        assert!(!shape.iter().any(|&b| b < 0x20 && b != 0x09 && b != 0x1b && !matches!(b, 1..=6)));
    }
    for change in [Change::Last, Change::First, Change::Zero] {
        let changed = perturbed(hay, &tokens, change);
        if tokens.iter().all(|t| t.kind != Kind::Hex) {
            assert_eq!(changed.len(), hay.len());
        }
    }
    for widen in [true, false] {
        resized(hay, &tokens, widen, None);
    }
    if !tokens.is_empty() {
        assert_eq!(zeroed_at(hay, &tokens, 0).len(), hay.len());
    }

    let mut found = Vec::new();
    stamps.each(hay, 0, hay.len(), |start, end| {
        assert!(start <= end && end <= hay.len());
        found.push(start);
        let _ = stamps.read(&hay[start..end]);
        true
    });
    assert!(found.windows(2).all(|w| w[0] <= w[1]));
    if let (Some((_, first)), Some((_, last))) = (stamps.first(hay, 0, hay.len()), stamps.last(hay, 0, hay.len())) {
        assert!(first <= last && last <= hay.len());
    }
    let _ = stamps.node_of_line(hay, hay.len() / 2, hay.len());
    let mut track = Track::new(false);
    track.begin(hay.len());
    let middle = hay.len() / 2;
    let _ = track.before(stamps, hay, middle);
    let _ = track.after(stamps, hay, middle);
    track.consumed(stamps, hay, middle);
    let _ = track.before(stamps, hay, hay.len());
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Log-like lines (times, values of every form, prefixes, control bytes) and any bytes.
        #[test]
        fn lines_of_any_bytes_hold(
            lines in proptest::collection::vec(
                r"(\[?20[0-9]{2}-[01][0-9]-[0-3][0-9][ T][0-2][0-9]:[0-5][0-9]:[0-6][0-9](,[0-9]{1,9})?(Z|\+0[0-9]:00)?\]? )?(\([A-Za-z]+ pid=[0-9]{1,6}(, ip=10\.0\.[0-9]\.[0-9])?\) )?([a-z_]{1,8}[:=]? ?(-?[0-9]{1,12}(\.[0-9]+)?(e-?[0-9]+)?|0x[0-9a-f]{4,12}|[0-9]{1,3}(,[0-9]{3})+|[\x00-\x1f]) ?){0,6}\r?",
                0..8,
            ),
            noise in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut data = lines.join("\n").into_bytes();
            fuzz_one(&data);
            data.extend_from_slice(&noise);
            fuzz_one(&data);
        }
    }

    /// The inputs libFuzzer once failed on (core/fuzz/regressions), replayed by `cargo test`.
    #[test]
    fn fuzz_regressions_pass() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions");
        for entry in std::fs::read_dir(dir).unwrap() {
            fuzz_one(&std::fs::read(entry.unwrap().path()).unwrap());
        }
        fuzz_one(b"2026-02-30 10:00:00 x 0x1f2e3d4c5b 1,234 -5e-3 10.0.0.1\n(Actor pid=1, ip=10.0.0.2) 12\n");
    }
}
