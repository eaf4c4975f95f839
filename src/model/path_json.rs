//! Paths in JSON, byte for byte. A Linux path is any bytes but NUL and a
//! JSON string is Unicode: serde's own `PathBuf` support fails on a path
//! that is not UTF-8 (a tenant's directory name, a shim's cwd, `--root
//! $'/tmp/\xff'`), halfway through the report or the archive it writes.
//!
//! A path that is UTF-8 is written as the string it is, as before; any
//! other is written as `{"lossy": "/tmp/\uFFFD", "bytes_hex": "2f746d702fff"}`:
//! readable, and exact (`schema/report-v1.schema.json`, `$defs/path`). Both
//! forms read back to the same bytes (`check --from`). Use it on a field
//! with `#[serde(with = "crate::model::path_json")]`, or
//! `crate::model::path_json::option`
//! for an `Option<PathBuf>`.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A path that is not UTF-8, as JSON holds it.
#[derive(Serialize, Deserialize)]
struct NotUtf8 {
    lossy: String,
    bytes_hex: String,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Written {
    Text(PathBuf),
    Bytes(NotUtf8),
}

pub fn serialize<S: Serializer>(path: &Path, serializer: S) -> Result<S::Ok, S::Error> {
    match path.to_str() {
        Some(text) => serializer.serialize_str(text),
        None => {
            let bytes = path.as_os_str().as_bytes();
            NotUtf8 {
                lossy: String::from_utf8_lossy(bytes).into_owned(),
                bytes_hex: bytes.iter().map(|b| format!("{b:02x}")).collect(),
            }
            .serialize(serializer)
        }
    }
}

pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<PathBuf, D::Error> {
    match Written::deserialize(deserializer)? {
        Written::Text(path) => Ok(path),
        Written::Bytes(written) => from_hex(&written.bytes_hex)
            .map(|bytes| PathBuf::from(OsString::from_vec(bytes)))
            .ok_or_else(|| serde::de::Error::custom("bytes_hex is not pairs of hex digits")),
    }
}

fn from_hex(hex: &str) -> Option<Vec<u8>> {
    let hex = hex.as_bytes();
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    hex.chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}

/// The same for an `Option<PathBuf>` (`null` when `None`).
pub mod option {
    use super::*;

    #[derive(Serialize, Deserialize)]
    struct Wrapped(#[serde(with = "super")] PathBuf);

    pub fn serialize<S: Serializer>(
        path: &Option<PathBuf>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match path {
            Some(path) => super::serialize(path, serializer),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<PathBuf>, D::Error> {
        Ok(Option::<Wrapped>::deserialize(deserializer)?.map(|w| w.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Holder {
        #[serde(with = "crate::model::path_json")]
        path: PathBuf,
        #[serde(with = "crate::model::path_json::option", default)]
        maybe: Option<PathBuf>,
    }

    fn path(bytes: &[u8]) -> PathBuf {
        PathBuf::from(OsString::from_vec(bytes.to_vec()))
    }

    #[test]
    fn a_utf8_path_is_the_string_it_was() {
        let holder = Holder {
            path: "/run/containerd/x y".into(),
            maybe: None,
        };
        let json = serde_json::to_value(&holder).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"path": "/run/containerd/x y", "maybe": null})
        );
        assert_eq!(serde_json::from_value::<Holder>(json).unwrap(), holder);
    }

    #[test]
    fn any_other_path_is_lossy_text_and_its_exact_bytes_and_reads_back() {
        let holder = Holder {
            path: path(b"/tmp/\xff"),
            maybe: Some(path(b"/a\x80\\\xc3")),
        };
        let json = serde_json::to_value(&holder).unwrap();
        assert_eq!(
            json["path"],
            serde_json::json!({"lossy": "/tmp/\u{FFFD}", "bytes_hex": "2f746d702fff"})
        );
        assert_eq!(json["maybe"]["bytes_hex"], "2f61805cc3");
        assert_eq!(serde_json::from_value::<Holder>(json).unwrap(), holder);
        // A field absent from an old archive is still `None`.
        let old: Holder = serde_json::from_str(r#"{"path": "/x"}"#).unwrap();
        assert_eq!(old.maybe, None);
        let bad = r#"{"path": {"lossy": "x", "bytes_hex": "zz"}}"#;
        assert!(serde_json::from_str::<Holder>(bad).is_err());
    }
}
