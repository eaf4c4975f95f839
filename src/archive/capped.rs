//! `snapshots.json` read bounded, without parsing: its bytes and values
//! counted, its strings cut as they pass.

use std::io::{self, Read};

use super::{SNAPSHOTS_LIMIT, VALUES_LIMIT};

/// A string of `snapshots.json` is cut past this many bytes of JSON as it
/// is read: every string nodectl writes there is a node's (a path, an id, a
/// name, a reason), and each output cuts them at 4,096 bytes anyway. Cut
/// only when printed, a 9 KB archive whose network name was 2 MB, in 200
/// reservations, took 1.98 GB of memory to check.
pub(super) const ARCHIVE_STRING_CAP: usize = 16 * 1024;

/// A reader that stops (with an error) past [`SNAPSHOTS_LIMIT`] bytes or
/// [`VALUES_LIMIT`] JSON values, and cuts every string past
/// [`ARCHIVE_STRING_CAP`] bytes; it counts values by the separators and
/// openers outside strings, and follows strings by their quotes and
/// escapes, without parsing. A cut falls between two characters, never
/// inside an escape (nor between a surrogate pair's halves) or a UTF-8
/// sequence, so what is left is still valid JSON.
pub(super) struct CappedReader<R> {
    inner: R,
    bytes: u64,
    values: u64,
    in_string: bool,
    escaped: bool,
    pub(super) exceeded: bool,
    /// JSON bytes kept of the string being read.
    string_bytes: usize,
    /// Past the cap: the rest of the string is dropped, up to its quote.
    cutting: bool,
    /// Hex digits of a `\u` escape still to come.
    hex_left: u8,
    /// The escape's value so far (to tell a surrogate's first half).
    hex_value: u16,
    /// The last escape was a surrogate's first half: the second follows.
    surrogate_open: bool,
}

impl<R> CappedReader<R> {
    pub(super) fn new(inner: R) -> Self {
        CappedReader {
            inner,
            bytes: 0,
            values: 0,
            in_string: false,
            escaped: false,
            exceeded: false,
            string_bytes: 0,
            cutting: false,
            hex_left: 0,
            hex_value: 0,
            surrogate_open: false,
        }
    }

    /// Whether byte `b` (inside a string) is kept.
    fn keep_in_string(&mut self, b: u8) -> bool {
        if self.escaped {
            self.escaped = false;
            if b == b'u' {
                (self.hex_left, self.hex_value) = (4, 0);
            } else {
                self.surrogate_open = false;
            }
        } else if self.hex_left > 0 {
            self.hex_left -= 1;
            let digit = (b as char).to_digit(16).unwrap_or(0) as u16;
            self.hex_value = self.hex_value.wrapping_mul(16).wrapping_add(digit);
            if self.hex_left == 0 {
                self.surrogate_open = (0xD800..0xDC00).contains(&self.hex_value);
            }
        } else if b == b'"' {
            self.in_string = false;
            (self.cutting, self.string_bytes, self.surrogate_open) = (false, 0, false);
            return true;
        } else {
            // A character starts here (or an escape, or a UTF-8
            // sequence's continuation): a cut may start only at a start.
            let starts = b & 0xC0 != 0x80;
            if starts && !self.surrogate_open && self.string_bytes >= ARCHIVE_STRING_CAP {
                self.cutting = true;
            }
            if b == b'\\' {
                self.escaped = true;
            } else if starts {
                self.surrogate_open = false;
            }
        }
        if self.cutting {
            return false;
        }
        self.string_bytes += 1;
        true
    }
}

impl<R: Read> Read for CappedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let n = self.inner.read(buf)?;
            self.bytes += n as u64;
            let mut kept = 0;
            for i in 0..n {
                let b = buf[i];
                let keep = if self.in_string {
                    self.keep_in_string(b)
                } else {
                    match b {
                        b'"' => {
                            self.in_string = true;
                            self.values += 1;
                        }
                        b',' | b'[' | b'{' => self.values += 1,
                        _ => {}
                    }
                    true
                };
                if keep {
                    buf[kept] = b;
                    kept += 1;
                }
            }
            if self.bytes > SNAPSHOTS_LIMIT || self.values > VALUES_LIMIT {
                self.exceeded = true;
                return Err(io::Error::other("too large"));
            }
            // Everything read was dropped: read on (0 would say the end).
            if kept > 0 || n == 0 {
                return Ok(kept);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `CappedReader` lets through of `json`, read in pieces of
    /// `piece` bytes.
    fn through_cap(json: &str, piece: usize) -> String {
        struct Pieces<'a>(&'a [u8], usize);
        impl Read for Pieces<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = self.0.len().min(self.1).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut out = String::new();
        CappedReader::new(Pieces(json.as_bytes(), piece))
            .read_to_string(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn an_archive_s_strings_are_cut_as_read_and_stay_valid_json() {
        let long = |unit: &str| unit.repeat(ARCHIVE_STRING_CAP);
        for (unit, decoded_unit) in [
            ("n", "n"),
            ("é", "é"),
            ("\\\"", "\""),
            ("\\u00e9", "é"),
            ("\\ud83d\\ude00", "😀"),
            ("a\\nb😀", "a\nb😀"),
        ] {
            let json = format!(
                r#"{{"{}":["{}",1,{{"k":"short"}}],"x":"{}"}}"#,
                long(unit),
                long(unit),
                long(unit)
            );
            for piece in [1, 7, 4096, usize::MAX] {
                let cut = through_cap(&json, piece);
                let value: serde_json::Value =
                    serde_json::from_str(&cut).unwrap_or_else(|e| panic!("{unit} by {piece}: {e}"));
                let x = value["x"].as_str().unwrap();
                assert!(x.len() <= ARCHIVE_STRING_CAP, "{unit}: {}", x.len());
                assert!(x.len() > ARCHIVE_STRING_CAP / 8, "{unit}: {}", x.len());
                assert!(x.starts_with(decoded_unit), "{unit}");
                let (key, array) = value
                    .as_object()
                    .unwrap()
                    .iter()
                    .find(|(k, _)| *k != "x")
                    .unwrap();
                assert!(key.len() <= ARCHIVE_STRING_CAP, "{unit}");
                assert_eq!(array[2]["k"], "short");
                assert_eq!(array[1], 1);
            }
        }
        // What is under the cap is untouched.
        let json = r#"{"a":"b\"c\\","d":["\u00e9"]}"#;
        assert_eq!(through_cap(json, 3), json);
    }
}
