//! JSON as Go's encoding/json decodes it, for the peers written in Go.
//!
//! What Go's decoder does that serde does not:
//! - A JSON key names a struct field when it equals the field's name under
//!   Unicode simple case folding (`bytes.EqualFold`; decode.go `object`,
//!   exact match first, then `foldName`): `"Type"`, `"IPAM"`, `"dn\u{17f}"`
//!   count. Decoded into a map (`map[string]interface{}`), keys are exact.
//! - Every key is decoded in order, so the last one naming a field wins;
//!   `null` leaves a string, bool or struct field as it was and empties a
//!   map, slice or pointer (`literalStore`); an object decoded into a
//!   struct field already set merges into it.
//! - A value of the wrong JSON type for its field fails the whole
//!   `Unmarshal` (an `UnmarshalTypeError`, kept while decoding goes on);
//!   an unknown key is skipped.
//! - `json.Marshal` of a map writes its keys sorted (bytewise).

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A JSON document as Go's decoder walks it: an object keeps every key,
/// duplicates included, in the order written.
#[derive(Debug, Clone, PartialEq)]
pub enum GoJson {
    Null,
    Bool(bool),
    Number,
    String(String),
    Array(Vec<GoJson>),
    Object(Vec<(String, GoJson)>),
}

impl<'de> Deserialize<'de> for GoJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(GoJsonVisitor)
    }
}

struct GoJsonVisitor;

impl<'de> Visitor<'de> for GoJsonVisitor {
    type Value = GoJson;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_unit<E: de::Error>(self) -> Result<GoJson, E> {
        Ok(GoJson::Null)
    }
    fn visit_bool<E: de::Error>(self, b: bool) -> Result<GoJson, E> {
        Ok(GoJson::Bool(b))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<GoJson, E> {
        Ok(GoJson::Number)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<GoJson, E> {
        Ok(GoJson::Number)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<GoJson, E> {
        Ok(GoJson::Number)
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<GoJson, E> {
        Ok(GoJson::String(s.to_string()))
    }
    fn visit_string<E: de::Error>(self, s: String) -> Result<GoJson, E> {
        Ok(GoJson::String(s))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<GoJson, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(GoJson::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<GoJson, A::Error> {
        let mut entries = Vec::new();
        while let Some((key, value)) = map.next_entry::<String, GoJson>()? {
            entries.push((key, value));
        }
        Ok(GoJson::Object(entries))
    }
}

/// `bytes` as Go's decoder reads them. Invalid UTF-8 in a string Go takes
/// as U+FFFD (so here, first), and a lone surrogate escape too
/// ([`lone_surrogates_replaced`]); a number out of float64's range fails
/// both; what serde refuses and Go takes (nesting past 128) is refused
/// here: the file then fails, the safe side.
pub fn parse(bytes: &[u8]) -> Result<GoJson, String> {
    let text = String::from_utf8_lossy(bytes);
    serde_json::from_str(&lone_surrogates_replaced(&text)).map_err(|e| e.to_string())
}

/// `text` with each `\u` escape of a UTF-16 surrogate that is not a high
/// one followed by the escape of a low one written `\ufffd`: Go's
/// `unquote` (decode.go) reads it as U+FFFD, serde refuses it. Only
/// escapes are rewritten, so what is not JSON stays so.
fn lone_surrogates_replaced(text: &str) -> std::borrow::Cow<'_, str> {
    let bytes = text.as_bytes();
    // Four hex digits (from_str_radix alone would take a sign).
    let unit = |at: usize| {
        let hex = bytes.get(at..at + 4)?;
        hex.iter().all(u8::is_ascii_hexdigit).then_some(())?;
        u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
    };
    let escape = |at: usize| match bytes.get(at..at + 2) {
        Some(b"\\u") => unit(at + 2),
        _ => None,
    };
    let mut out = String::new();
    let (mut copied, mut at, mut in_string) = (0, 0, false);
    while at < bytes.len() {
        match bytes[at] {
            b'"' => {
                in_string = !in_string;
                at += 1;
            }
            b'\\' if in_string => match escape(at) {
                // A pair: one character.
                Some(0xD800..=0xDBFF)
                    if escape(at + 6).is_some_and(|low| (0xDC00..=0xDFFF).contains(&low)) =>
                {
                    at += 12;
                }
                Some(0xD800..=0xDFFF) => {
                    out.push_str(&text[copied..at]);
                    out.push_str("\\ufffd");
                    at += 6;
                    copied = at;
                }
                Some(_) => at += 6,
                None => at += 2,
            },
            _ => at += 1,
        }
    }
    if copied == 0 {
        return std::borrow::Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    std::borrow::Cow::Owned(out)
}

impl GoJson {
    pub fn kind(&self) -> &'static str {
        match self {
            GoJson::Null => "null",
            GoJson::Bool(_) => "bool",
            GoJson::Number => "number",
            GoJson::String(_) => "string",
            GoJson::Array(_) => "array",
            GoJson::Object(_) => "object",
        }
    }

    /// The value as `json.Marshal` writes it after decoding into
    /// `interface{}`: each object's keys once (the last), sorted bytewise.
    pub fn remarshalled(&self) -> GoJson {
        match self {
            GoJson::Array(items) => GoJson::Array(items.iter().map(GoJson::remarshalled).collect()),
            GoJson::Object(entries) => {
                let mut kept: Vec<(String, GoJson)> = Vec::new();
                for (key, value) in entries {
                    match kept.iter_mut().find(|(k, _)| k == key) {
                        Some(slot) => slot.1 = value.remarshalled(),
                        None => kept.push((key.clone(), value.remarshalled())),
                    }
                }
                kept.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                GoJson::Object(kept)
            }
            other => other.clone(),
        }
    }

    /// A map's entry (`map[string]interface{}`): the exact key, the last.
    pub fn exact(&self, key: &str) -> Option<&GoJson> {
        match self {
            GoJson::Object(entries) => entries.iter().rev().find(|(k, _)| k == key).map(|e| &e.1),
            _ => None,
        }
    }

    /// A string field as Go fills it: the last string of a key naming it
    /// (a `null` leaves it as it was).
    pub fn string_field<'a>(&'a self, field: &'a str) -> Option<&'a str> {
        self.naming(field).rev().find_map(|v| match v {
            GoJson::String(s) => Some(s.as_str()),
            _ => None,
        })
    }

    /// The values of the keys naming `field`, in order.
    fn naming<'a>(&'a self, field: &'a str) -> impl DoubleEndedIterator<Item = &'a GoJson> {
        let entries: &[(String, GoJson)] = match self {
            GoJson::Object(entries) => entries,
            _ => &[],
        };
        entries
            .iter()
            .filter(move |(k, _)| folds_to(k, field))
            .map(|e| &e.1)
    }

    /// A struct field as Go fills it from every key naming it: objects
    /// merged in order; a `null` resets it when the field is a pointer
    /// (`resets`), else leaves it. `None` when no object named it.
    pub fn struct_field(&self, field: &str, resets: bool) -> Option<GoJson> {
        let mut merged: Option<Vec<(String, GoJson)>> = None;
        for value in self.naming(field) {
            match value {
                GoJson::Object(entries) => merged
                    .get_or_insert_with(Vec::new)
                    .extend(entries.iter().cloned()),
                GoJson::Null if resets => merged = None,
                _ => {}
            }
        }
        merged.map(GoJson::Object)
    }

    /// A slice or map field as Go fills it: the last key naming it (a
    /// `null` empties it).
    pub fn last_field<'a>(&'a self, field: &'a str) -> Option<&'a GoJson> {
        self.naming(field)
            .next_back()
            .filter(|v| **v != GoJson::Null)
    }
}

/// Whether the JSON key `key` names the struct field `field` (ASCII): equal
/// under Unicode simple folding, as Go's `bytes.EqualFold` (encoding/json
/// fold.go): an ASCII letter matches either case, `s` also U+017F (ſ) and
/// `k` also U+212A (Kelvin sign); anything else only itself.
pub fn folds_to(key: &str, field: &str) -> bool {
    let mut keys = key.chars();
    for f in field.chars() {
        let Some(k) = keys.next() else { return false };
        let same = k.eq_ignore_ascii_case(&f)
            || (f.eq_ignore_ascii_case(&'s') && k == '\u{17f}')
            || (f.eq_ignore_ascii_case(&'k') && k == '\u{212a}');
        if !same {
            return false;
        }
    }
    keys.next().is_none()
}

/// A Go type a field is decoded into, for its type check.
pub enum Shape {
    Str,
    /// `map[string]bool`
    BoolMap,
    /// `map[string]interface{}`
    AnyMap,
    /// `[]string`
    StrList,
    Struct(&'static [(&'static str, Shape)]),
    List(&'static Shape),
}

/// Go's type check of decoding `value` into `shape` at `at`: the first
/// mismatch, as Go keeps it. `null` fits every shape.
pub fn check(value: &GoJson, shape: &Shape, at: &str) -> Result<(), String> {
    let wrong = || {
        Err(format!(
            "{at}: a {} where Go wants {}",
            value.kind(),
            shape.go_name()
        ))
    };
    match (shape, value) {
        (_, GoJson::Null)
        | (Shape::Str, GoJson::String(_))
        | (Shape::AnyMap, GoJson::Object(_)) => Ok(()),
        (Shape::BoolMap, GoJson::Object(entries)) => entries
            .iter()
            .try_for_each(|(k, v)| check_bool(v, &format!("{at}.{k}"))),
        (Shape::StrList, GoJson::Array(items)) => items
            .iter()
            .try_for_each(|item| check(item, &Shape::Str, &format!("{at}[]"))),
        (Shape::List(inner), GoJson::Array(items)) => items
            .iter()
            .try_for_each(|item| check(item, inner, &format!("{at}[]"))),
        (Shape::Struct(fields), GoJson::Object(entries)) => {
            entries.iter().try_for_each(|(key, v)| {
                // Exact first, else folded: no two of these fields fold alike.
                match fields.iter().find(|(name, _)| folds_to(key, name)) {
                    Some((name, inner)) => check(v, inner, &format!("{at}.{name}")),
                    None => Ok(()),
                }
            })
        }
        _ => wrong(),
    }
}

fn check_bool(value: &GoJson, at: &str) -> Result<(), String> {
    match value {
        GoJson::Null | GoJson::Bool(_) => Ok(()),
        other => Err(format!("{at}: a {} where Go wants bool", other.kind())),
    }
}

impl Shape {
    fn go_name(&self) -> &'static str {
        match self {
            Shape::Str => "string",
            Shape::BoolMap => "map[string]bool",
            Shape::AnyMap => "map[string]interface{}",
            Shape::StrList => "[]string",
            Shape::Struct(_) => "an object",
            Shape::List(_) => "a list",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_surrogate_escape_is_u_fffd_as_go_unquotes_it() {
        let string = |s: &str| GoJson::String(s.to_string());
        for (json, read) in [
            (r#""\ud800""#, "\u{fffd}"),
            (r#""\udc00x""#, "\u{fffd}x"),
            (r#""\ud800 \udc00""#, "\u{fffd} \u{fffd}"),
            (r#""\uD800\u0041""#, "\u{fffd}A"),
            (r#""\ud800\ud800\udc00""#, "\u{fffd}\u{10000}"),
            (r#""\ud83d\ude00""#, "\u{1f600}"),
            (r#""\\ud800""#, "\\ud800"),
            (r#""\"\ud800""#, "\"\u{fffd}"),
        ] {
            assert_eq!(parse(json.as_bytes()), Ok(string(read)), "{json}");
        }
        let key = parse(br#"{"a\udfff": [null]}"#).unwrap();
        let entry = ("a\u{fffd}".to_string(), GoJson::Array(vec![GoJson::Null]));
        assert_eq!(key, GoJson::Object(vec![entry]));
        // Not four hex digits: not an escape, for Go either.
        assert!(parse(br#""\ud80""#).is_err());
        assert!(parse(br#"{"a": 1} \ud800"#).is_err());
    }

    #[test]
    fn keys_name_fields_as_go_folds_them() {
        for (key, field, folds) in [
            ("type", "type", true),
            ("Type", "type", true),
            ("IPAM", "ipam", true),
            ("dataDIR", "dataDir", true),
            ("dn\u{17f}", "dns", true),
            ("\u{212a}", "k", true),
            ("typé", "type", false),
            ("types", "type", false),
            ("typ", "type", false),
            ("t-ype", "type", false),
        ] {
            assert_eq!(folds_to(key, field), folds, "{key} / {field}");
        }
    }
}
