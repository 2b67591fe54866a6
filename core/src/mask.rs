//! Masking: a raw line written as its shape, each value in it (a number, a hex id or a
//! hash, an IPv4 address) a placeholder of its kind, the values kept in order (Drain3's
//! masking, as one named stage). Lines of one shape differ only in their values: what is
//! learned of one holds for all (plans.rs).
//!
//! A number is what shapes.py's NUMBER_RUN takes (`-?\d+(\.\d+)?([eE][-+]?\d+)?`, not glued
//! behind a letter, a digit, `_` or `.`); its sign and exponent stay in the shape, its width
//! and fraction do not (a size printed `12` on one line and `12.5` on the next keeps its
//! shape). A hex id is a run of at least HEX_MIN hex digits of one case holding a digit and
//! a letter, or `0x` and four, between characters that are no letter or digit.

/// A value's kind, written in the shape as a byte no text line holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Number = 1,
    Negative = 2,
    Exponent = 3,
    Hex = 4,
    Ip = 5,
    /// an integer grouped by thousands (`175,856`)
    Grouped = 6,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    pub start: usize,
    pub end: usize,
    pub kind: Kind,
}

pub const HEX_MIN: usize = 6;

/// Whether a line can be masked: no byte of it stands for a placeholder (a control byte but
/// tab and escape). Branch-free over pieces of 64 bytes, which the compiler makes SIMD.
pub fn maskable(line: &[u8]) -> bool {
    !line
        .chunks(64)
        .any(|piece| piece.iter().fold(0u8, |bad, &b| bad | u8::from((b < 0x20) & (b != 0x09) & (b != 0x1b))) != 0)
}

fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

fn digits_from(text: &[u8], mut at: usize) -> usize {
    while text.get(at).is_some_and(u8::is_ascii_digit) {
        at += 1;
    }
    at
}

/// An IPv4 address at `at`: four runs of one to three digits joined by dots, no digit or
/// dot and digit after it.
fn ip_at(text: &[u8], at: usize) -> Option<usize> {
    let mut pos = at;
    for part in 0..4 {
        if part > 0 {
            if text.get(pos) != Some(&b'.') {
                return None;
            }
            pos += 1;
        }
        let end = digits_from(text, pos);
        if end == pos || end - pos > 3 {
            return None;
        }
        pos = end;
    }
    let after_digit = text.get(pos).is_some_and(u8::is_ascii_digit);
    let after_dot = text.get(pos) == Some(&b'.') && text.get(pos + 1).is_some_and(u8::is_ascii_digit);
    (!after_digit && !after_dot && !text.get(pos).is_some_and(|&b| alnum(b))).then_some(pos)
}

/// An integer grouped by thousands at `at`: one to three digits, then a comma and three
/// digits at least once, no digit after; not behind a colon (a time's seconds and their
/// milliseconds, `10:00:21,123`).
fn grouped_at(text: &[u8], at: usize) -> Option<usize> {
    let head = digits_from(text, at);
    if head == at || head - at > 3 || (at > 0 && text[at - 1] == b':') {
        return None;
    }
    let mut end = head;
    while text.get(end) == Some(&b',') && digits_from(text, end + 1) == end + 4 {
        end += 4;
    }
    (end > head && !text.get(end).is_some_and(u8::is_ascii_digit)).then_some(end)
}

/// A hex id at `at` (a letter or digit does not stand before it).
fn hex_at(text: &[u8], at: usize) -> Option<usize> {
    let zero_x = text.get(at) == Some(&b'0') && matches!(text.get(at + 1), Some(b'x' | b'X'));
    let from = if zero_x { at + 2 } else { at };
    let lower = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    let upper = |b: u8| b.is_ascii_digit() || (b'A'..=b'F').contains(&b);
    let run = |of: &dyn Fn(u8) -> bool| text[from..].iter().take_while(|&&b| of(b)).count();
    let (low, up) = (run(&lower), run(&upper));
    let len = low.max(up);
    let end = from + len;
    if text.get(end).is_some_and(|&b| alnum(b)) {
        return None;
    }
    let body = &text[from..end];
    let mixed = body.iter().any(u8::is_ascii_digit) && body.iter().any(u8::is_ascii_alphabetic);
    ((zero_x && len >= 4) || (len >= HEX_MIN && mixed)).then_some(end)
}

/// A number at `at` (NUMBER_RUN): its end and kind.
fn number_at(text: &[u8], at: usize) -> Option<(usize, Kind)> {
    let sign = text[at] == b'-';
    let first = at + usize::from(sign);
    if !text.get(first).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    let mut end = digits_from(text, first);
    if text.get(end) == Some(&b'.') && text.get(end + 1).is_some_and(u8::is_ascii_digit) {
        end = digits_from(text, end + 1);
    }
    let signed = matches!(text.get(end + 1), Some(b'-' | b'+'));
    let exponent = matches!(text.get(end), Some(b'e' | b'E')) && text.get(end + 1 + usize::from(signed)).is_some_and(u8::is_ascii_digit);
    if exponent {
        end = digits_from(text, end + 1 + usize::from(signed));
        return Some((end, Kind::Exponent));
    }
    Some((end, if sign { Kind::Negative } else { Kind::Number }))
}

/// Append `text`'s shape to `shape` and its values to `tokens` (their offsets those of
/// `text` plus `base`).
pub fn mask(text: &[u8], base: usize, shape: &mut Vec<u8>, tokens: &mut Vec<Token>) {
    let mut at = 0;
    let mut copied = 0;
    while at < text.len() {
        let b = text[at];
        let prev = if at > 0 { Some(text[at - 1]) } else { None };
        let glued = prev.is_some_and(|p| alnum(p) || p == b'_' || p == b'.');
        let found = if b.is_ascii_digit() || b == b'-' {
            let after_word = prev.is_some_and(alnum);
            if b.is_ascii_digit() && !glued {
                ip_at(text, at)
                    .map(|end| (end, Kind::Ip))
                    .or_else(|| grouped_at(text, at).map(|end| (end, Kind::Grouped)))
            } else {
                None
            }
            .or_else(|| if after_word { None } else { hex_at(text, at).map(|end| (end, Kind::Hex)) })
            .or_else(|| if glued { None } else { number_at(text, at) })
        } else if b.is_ascii_alphabetic() && !prev.is_some_and(alnum) {
            hex_at(text, at).map(|end| (end, Kind::Hex))
        } else {
            None
        };
        match found {
            Some((end, kind)) => {
                shape.extend_from_slice(&text[copied..at]);
                shape.push(kind as u8);
                tokens.push(Token {
                    start: base + at,
                    end: base + end,
                    kind,
                });
                at = end;
                copied = end;
            }
            None => {
                // past a word at once: no value starts inside it
                if alnum(b) {
                    while at < text.len() && alnum(text[at]) {
                        at += 1;
                    }
                } else {
                    at += 1;
                }
            }
        }
    }
    shape.extend_from_slice(&text[copied..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape_of(text: &str) -> (String, Vec<String>) {
        let (mut shape, mut tokens) = (Vec::new(), Vec::new());
        mask(text.as_bytes(), 0, &mut shape, &mut tokens);
        let shown = shape.iter().map(|&b| if b < 8 { format!("<{b}>") } else { (b as char).to_string() }).collect();
        (shown, tokens.iter().map(|t| text[t.start..t.end].to_string()).collect())
    }

    #[test]
    fn values_are_masked_by_kind() {
        let (shape, values) = shape_of("(WorkerDict pid=4012, ip=10.0.0.2) used -1.5e-05 GB of 80.5, gpu0 fp16 v1.2.3 x=-7 [run-0a1b2c3d4e #12]");
        assert_eq!(shape, "(WorkerDict pid=<1>, ip=<5>) used <3> GB of <1>, gpu0 fp16 v1.2.3 x=<2> [run-<4> #<1>]");
        assert_eq!(values, ["4012", "10.0.0.2", "-1.5e-05", "80.5", "-7", "0a1b2c3d4e", "12"]);
    }

    #[test]
    fn words_and_ids_stay_whole() {
        assert_eq!(
            shape_of("custom/run_0f3a9b2c11de:1.5 deadbeef 0x7f3a cafe12 12345678").0,
            "custom/run_<4>:<1> deadbeef <4> <4> <1>"
        );
        assert_eq!(
            shape_of("1.2.3.4.5 10.0.0.256x 2026-11-21 10:00:01,123").0,
            "<1>.3.4.5 <1>.0.256x <1>-<1>-<1> <1>:<1>:<1>,<1>"
        );
        assert_eq!(
            shape_of("size: 175,856 tokens, 7,4 and 1,2345 0,424 at 10:00:21,123").0,
            "size: <6> tokens, <1>,<1> and <1>,<1> <6> at <1>:<1>:<1>,<1>"
        );
    }

    #[test]
    fn control_bytes_are_not_masked() {
        assert!(maskable(b"a\tb \x1b[36m"));
        assert!(!maskable(b"a\x01b"));
        assert!(!maskable(b"a\rb"));
    }
}
