//! Values as a person reads them: durations as ages (`3m12s`), sizes in
//! MiB, a finding's evidence as `key: value` lines. Apart from the tables
//! because the findings and the shims both read their numbers this way.

use serde_json::Value;

use crate::inert::shown;

/// `key: value` per line, for people: unknown (null or empty) values left out,
/// `_seconds` as an age (`3m12s`), `_ms` as a latency, `_bytes` in MiB, a list of records
/// (blocked threads) one per line. Each line is made inert on its own.
pub(super) fn evidence_lines(evidence: &Value) -> Vec<String> {
    let Some(map) = evidence.as_object() else {
        return vec![shown(&evidence.to_string())];
    };
    let mut lines = Vec::new();
    let unknown = |v: &Value| v.is_null() || v.as_str() == Some("");
    for (key, value) in map.iter().filter(|(_, v)| !unknown(v)) {
        let (label, value) = readable(key, value);
        match value {
            Readable::One(text) => lines.push(shown(&format!("{label}: {text}"))),
            Readable::Many(items) if items.is_empty() => {
                lines.push(shown(&format!("{label}: none")))
            }
            Readable::Many(items) => {
                lines.push(shown(&format!("{label}:")));
                lines.extend(items.iter().map(|i| format!("  {}", shown(i))));
            }
        }
    }
    lines
}

enum Readable {
    One(String),
    Many(Vec<String>),
}

/// A key and its value as a person reads them.
fn readable(key: &str, value: &Value) -> (String, Readable) {
    // Seconds per unit of a duration, or `None` for a size in bytes.
    let (label, unit) = if let Some(stem) = key.strip_suffix("_seconds") {
        (stem, Some(Some(1.0)))
    } else if let Some(stem) = key.strip_suffix("_ms") {
        (stem, Some(Some(1e-3)))
    } else if let Some(stem) = key.strip_suffix("_bytes") {
        (stem, Some(None))
    } else {
        (key, None)
    };
    let label = label.replace('_', " ");
    let value = match (value, unit) {
        (Value::Number(n), Some(None)) => Readable::One(mebibytes(n.as_f64().unwrap_or_default())),
        (Value::Number(n), Some(Some(unit))) => {
            Readable::One(duration(n.as_f64().unwrap_or_default() * unit))
        }
        (Value::String(s), _) => Readable::One(s.clone()),
        (Value::Array(items), _) if items.iter().any(Value::is_object) => {
            Readable::Many(items.iter().map(inline).collect())
        }
        (Value::Array(items), _) => Readable::One(if items.is_empty() {
            "none".to_string()
        } else {
            items.iter().map(inline).collect::<Vec<_>>().join(", ")
        }),
        (other, _) => Readable::One(inline(other)),
    };
    (label, value)
}

/// A value on one line: a record as `key=value` pairs.
fn inline(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Object(map) => map
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(key, value)| {
                let (label, value) = readable(key, value);
                let value = match value {
                    Readable::One(text) => text,
                    Readable::Many(items) => items.join(", "),
                };
                format!("{}={value}", label.replace(' ', "_"))
            })
            .collect::<Vec<_>>()
            .join(" "),
        other => other.to_string(),
    }
}

pub(super) fn mebibytes(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / 1048576.0)
}

/// A duration as people read one: `850ms`, `4.2s`, `3m12s`, `5h07m`,
/// `2d0h`; two units at most, as kubectl's ages.
pub fn duration(seconds: f64) -> String {
    if !seconds.is_finite() || seconds < 0.0 {
        return format!("{seconds}s");
    }
    if seconds < 1.0 {
        return format!("{:.0}ms", seconds * 1e3);
    }
    if seconds < 10.0 {
        return format!("{seconds:.1}s");
    }
    let s = seconds.round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{}h", s / 86400, s % 86400 / 3600),
    }
}

/// A summary with its `<number> s` durations (`up 172955 s`) as ages.
pub(super) fn readable_seconds(summary: &str) -> String {
    let words: Vec<&str> = summary.split(' ').collect();
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    let mut n = 0;
    while n < words.len() {
        let unit = words
            .get(n + 1)
            .map(|w| w.trim_end_matches([',', ';', ')', ':']));
        match (words[n].parse::<f64>(), unit) {
            (Ok(seconds), Some("s"))
                if words[n].chars().all(|c| c.is_ascii_digit() || c == '.') =>
            {
                let tail = &words[n + 1][1..];
                out.push(format!("{}{tail}", duration(seconds)));
                n += 2;
            }
            _ => {
                out.push(words[n].to_string());
                n += 1;
            }
        }
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_as_people_read_them() {
        assert_eq!(duration(0.25), "250ms");
        assert_eq!(duration(4.25), "4.2s");
        assert_eq!(duration(42.0), "42s");
        assert_eq!(duration(192.0), "3m12s");
        assert_eq!(duration(5.0 * 3600.0 + 7.0 * 60.0), "5h07m");
        assert_eq!(duration(172_955.4), "2d0h");
        assert_eq!(
            readable_seconds("shim pid 7 (k8s.io, up 172955 s) serves nothing"),
            "shim pid 7 (k8s.io, up 2d0h) serves nothing"
        );
        assert_eq!(
            readable_seconds("recorded 95 s after it happened; blocked for at least 1.5 s"),
            "recorded 1m35s after it happened; blocked for at least 1.5s"
        );
        let threads = serde_json::json!({"blocked_for_at_least_seconds": 3.5, "rss_bytes": 14168064,
            "threads": [{"tid": 9, "state": "D", "syscall": "umount2", "wchan": null}],
            "list_containers": {"latency_ms": 1200.0, "timed_out": false}});
        assert_eq!(
            evidence_lines(&threads),
            [
                "blocked for at least: 3.5s",
                "list containers: latency=1.2s timed_out=false",
                "rss: 13.5 MiB",
                "threads:",
                "  state=D syscall=umount2 tid=9",
            ]
        );
    }
}
