//! kubelet's command line and `--config-dir`, read as kubelet reads them.
//!
//! - Flags: kubelet parses its command line with pflag under
//!   `cliflag.WordSepNormalizeFunc` (k8s.io/component-base/cli/flag,
//!   set in cmd/kubelet/app/server.go `NewKubeletCommand`), which turns
//!   every `_` of a flag's name into `-`: `--cgroup_root=/x` is
//!   `--cgroup-root`. pflag's `parseLongArg` takes `--name=value` whole,
//!   an empty value included (`--cgroup-root=` sets it to ""), and for a
//!   flag that is not boolean `--name value` takes the next argument,
//!   whatever it is; `--` ends the flags; the last occurrence wins.
//! - Drop-ins: `mergeKubeletConfigurations` walks `--config-dir` with
//!   `filepath.WalkDir` and takes a file when `filepath.Ext(name) ==
//!   ".conf"`: Go's `Ext` is everything from the last `.` of the name, so
//!   a file named just `.conf` is a drop-in (Rust's `Path::extension`
//!   says it has none).

use std::cell::Cell;
use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// A flag's name as kubelet's `WordSepNormalizeFunc` makes it.
pub fn normalised(name: &str) -> String {
    name.replace('_', "-")
}

/// The value kubelet takes for the non-boolean long flag `name` (spelled
/// `--like-this`) from its command line `args` (the program's own name,
/// when first, is no flag): the
/// last one given, an empty value kept; `None` when it is not given.
pub fn flag_value(args: &[String], name: &str) -> Option<String> {
    let mut found = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--" {
            break;
        }
        let Some(long) = arg.strip_prefix("--") else {
            continue;
        };
        let (given, value) = match long.split_once('=') {
            Some((given, value)) => (given, Some(value)),
            None => (long, None),
        };
        if format!("--{}", normalised(given)) != name {
            continue;
        }
        found = match value {
            Some(value) => Some(value.to_string()),
            None => rest.next().cloned(),
        };
    }
    found
}

/// Whether a boolean flag `name` is given, and as what text: bare it is
/// `"true"` (pflag's `NoOptDefVal`), else its `=value`; the last wins.
pub fn bool_flag_text(args: &[String], name: &str) -> Option<String> {
    let mut found = None;
    for arg in args {
        if arg == "--" {
            break;
        }
        let Some(long) = arg.strip_prefix("--") else {
            continue;
        };
        let (given, value) = match long.split_once('=') {
            Some((given, value)) => (given, value),
            None => (long, "true"),
        };
        if format!("--{}", normalised(given)) == name {
            found = Some(value.to_string());
        }
    }
    found
}

/// Whether kubelet merges the file named `name` from its `--config-dir`.
pub fn is_drop_in(name: &OsStr) -> bool {
    name.as_bytes().ends_with(b".conf")
}

/// What one config file may take once decoded, aliases expanded: kubelet's
/// configuration is a few KB, and a YAML anchor aliased 100,000 times in a
/// 900 KB file once took 1.41 GB to decode.
pub const DECODED_LIMIT: usize = 64 * 1024 * 1024;

/// A YAML (or JSON) document, decoded as sigs.k8s.io/yaml decodes kubelet's
/// files (YAML to JSON, aliases expanded), but never past `limit` bytes of
/// decoded values (each node counted at its size in memory, with its
/// text): past it the document is refused, and nothing more is allocated.
pub fn decode_bounded(text: &str, limit: usize) -> Result<Value, String> {
    let budget = Budget {
        left: Cell::new(limit),
    };
    let deserializer = yaml_serde::Deserializer::from_str(text);
    (&budget).deserialize(deserializer).map_err(|err| {
        if budget.left.get() == 0 {
            format!("decodes to more than {} MiB: refused", limit >> 20)
        } else {
            format!("not YAML or JSON: {err}")
        }
    })
}

struct Budget {
    left: Cell<usize>,
}

impl Budget {
    fn charge<E: de::Error>(&self, bytes: usize) -> Result<(), E> {
        let cost = bytes + std::mem::size_of::<Value>();
        match self.left.get().checked_sub(cost) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => {
                self.left.set(0);
                Err(E::custom("over the decoding budget"))
            }
        }
    }
}

impl<'de> DeserializeSeed<'de> for &Budget {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for &Budget {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.charge(0)?;
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.charge(0)?;
        Ok(v.into())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.charge(0)?;
        Ok(v.into())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.charge(0)?;
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.charge(v.len())?;
        Ok(Value::String(v.to_string()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.charge(0)?;
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.charge(0)?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.charge(0)?;
        let mut fields = Map::new();
        while let Some(key) = map.next_key_seed(self)? {
            // sigs.k8s.io/yaml turns a non-string key into its text.
            let key = match key {
                Value::String(key) => key,
                other => other.to_string(),
            };
            let value = map.next_value_seed(self)?;
            fields.insert(key, value);
        }
        Ok(Value::Object(fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        std::iter::once("kubelet")
            .chain(list.iter().copied())
            .map(String::from)
            .collect()
    }

    #[test]
    fn a_document_is_decoded_with_its_aliases_expanded() {
        let text = "base: &b {cgroupRoot: /k, list: [1, 2.5, true, null]}\nother: *b\n";
        let value = decode_bounded(text, DECODED_LIMIT).unwrap();
        assert_eq!(value["other"]["cgroupRoot"], "/k");
        assert_eq!(
            value["base"]["list"],
            serde_json::json!([1, 2.5, true, null])
        );
    }

    /// The input: one anchor of about 9 KB aliased 100,000 times
    /// (900 KB of text, about 900 MB expanded) is refused within the budget.
    #[test]
    fn an_anchor_aliased_past_the_budget_is_refused_not_decoded() {
        let mut text = format!("anchor: &a \"{}\"\nlist:\n", "x".repeat(9_000));
        for _ in 0..100_000 {
            text.push_str("- *a\n");
        }
        let err = decode_bounded(&text, DECODED_LIMIT).unwrap_err();
        assert!(err.contains("more than 64 MiB"), "{err}");
        // Under a budget it fits in, the same text decodes.
        let small = text.lines().take(12).collect::<Vec<_>>().join("\n");
        assert!(decode_bounded(&small, DECODED_LIMIT).is_ok());
    }

    #[test]
    fn a_flag_spelt_with_underscores_is_the_flag() {
        let given = args(&["--cgroup_root=/x", "--config_dir", "d"]);
        assert_eq!(flag_value(&given, "--cgroup-root").as_deref(), Some("/x"));
        assert_eq!(flag_value(&given, "--config-dir").as_deref(), Some("d"));
    }

    #[test]
    fn an_empty_value_is_a_value_and_the_last_given_wins() {
        let given = args(&["--cgroup-root=/k", "--cgroup-root="]);
        assert_eq!(flag_value(&given, "--cgroup-root").as_deref(), Some(""));
        let given = args(&["--cgroup-root=", "--cgroup-root", "/k"]);
        assert_eq!(flag_value(&given, "--cgroup-root").as_deref(), Some("/k"));
        assert_eq!(flag_value(&given, "--root-dir"), None);
    }

    #[test]
    fn nothing_after_the_end_of_flags_is_a_flag() {
        let given = args(&["--root-dir=/a", "--", "--root-dir=/b"]);
        assert_eq!(flag_value(&given, "--root-dir").as_deref(), Some("/a"));
    }

    #[test]
    fn a_bare_boolean_flag_is_true() {
        let given = args(&["--cgroups_per_qos"]);
        assert_eq!(
            bool_flag_text(&given, "--cgroups-per-qos").as_deref(),
            Some("true")
        );
        let given = args(&["--cgroups-per-qos", "--cgroups-per-qos=f"]);
        assert_eq!(
            bool_flag_text(&given, "--cgroups-per-qos").as_deref(),
            Some("f")
        );
    }

    #[test]
    fn a_drop_in_is_named_as_go_s_ext_reads_it() {
        for name in ["10-a.conf", ".conf", "x.y.conf"] {
            assert!(is_drop_in(OsStr::new(name)), "{name}");
        }
        for name in ["a.conf.bak", "a.CONF", "conf", "a.yaml", "a.conf~"] {
            assert!(!is_drop_in(OsStr::new(name)), "{name}");
        }
    }
}
