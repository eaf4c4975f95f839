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
use std::sync::atomic::{AtomicBool, Ordering};

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

/// What one reading of kubelet's configuration (its `--config` and every
/// drop-in together, or k3s's config and its drop-ins) may take in memory
/// while it is decoded, aliases expanded. kubelet merges all its files into
/// one configuration before it starts (`mergeKubeletConfigurations`), so the
/// whole reading is one input: a YAML anchor aliased 100,000 times in a 900 KB
/// file once took 1.41 GB, and 65 files of 64 MiB each would take 4 GB. A
/// real configuration is a few KB; past this, a gap, never a guess.
pub const DECODED_LIMIT: usize = 64 * 1024 * 1024;

/// Why a document was not decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// It would take the reading past its budget: the reading stops.
    OverBudget { limit: usize },
    /// Whoever waited for the reading gave up on it: it stops.
    GivenUp,
    /// Not YAML or JSON (this document only).
    NotYaml(String),
}

impl Refused {
    /// Whether the reading stops here (over budget or given up), rather
    /// than going on without this one document.
    pub fn stops_the_reading(&self) -> bool {
        !matches!(self, Refused::NotYaml(_))
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Refused::OverBudget { limit } => write!(
                f,
                "takes more than {} MiB with what was read before it \
                 (YAML aliases expanded): refused",
                limit >> 20
            ),
            Refused::GivenUp => f.write_str("the look's deadline passed: not read"),
            Refused::NotYaml(why) => write!(f, "not YAML or JSON: {why}"),
        }
    }
}

/// What glibc's malloc takes for a request of `bytes` (its chunk: a size
/// word, rounded up to 16, at least 32); nothing for none.
pub const fn heap(bytes: usize) -> usize {
    match bytes {
        0 => 0,
        _ => {
            let chunk = (bytes + 8 + 15) & !15;
            if chunk < 32 {
                32
            } else {
                chunk
            }
        }
    }
}

/// A node of serde_json's map (a `BTreeMap<String, Value>`, B = 6): 11
/// keys and values, 12 edges, its parent and lengths. Nodes are at least
/// half full when only inserted into, so one per 5 entries (and one for the
/// first) bounds them.
const MAP_NODE: usize = heap(
    16 + 11 * (std::mem::size_of::<String>() + std::mem::size_of::<Value>())
        + 12 * std::mem::size_of::<usize>(),
);
const ENTRIES_PER_NODE: usize = 5;

/// yaml_serde loads a document's every event (each a `(Event, Mark)` pair in
/// a `Vec` that doubles, and libyaml's stacks, one level per nesting) before
/// anything is decoded, aliases unexpanded: measured, at most about 900
/// bytes per indicator or word of the text (`? ` nested 100,000 deep), about
/// twice its length for the scalars' own copies, and about 70 KB to start.
/// What [`Budget::decode`] holds for that, with room to spare, while it
/// decodes `text`, before giving the text to the parser.
pub fn parse_cost(text: &str) -> usize {
    const START: usize = 256 * 1024;
    const PER_UNIT: usize = 1536;
    const PER_BYTE: usize = 4;
    // Units: an indicator (each may open a collection, with its end and an
    // empty scalar) or a run of other characters (at most one scalar).
    let mut units = 0usize;
    let mut in_word = false;
    for byte in text.bytes() {
        match byte {
            b' ' | b'\t' | b'\n' | b'\r' => in_word = false,
            b'-' | b'?' | b':' | b',' | b'[' | b']' | b'{' | b'}' | b'#' | b'&' | b'*' | b'!'
            | b'|' | b'>' | b'\'' | b'"' | b'%' | b'@' | b'`' => {
                units += 1;
                in_word = false;
            }
            _ if in_word => {}
            _ => {
                units += 1;
                in_word = true;
            }
        }
    }
    START
        .saturating_add(units.saturating_mul(PER_UNIT))
        .saturating_add(text.len().saturating_mul(PER_BYTE))
}

/// What one reading of kubelet's configuration may take (see
/// [`DECODED_LIMIT`]): every decoded value is charged to it as it is made
/// (its heap at malloc's size, the containers' buffers and nodes as they
/// grow) and stays charged; what a file takes only while it is read and
/// parsed is held and given back after ([`Budget::hold`]). Past the limit
/// nothing more is allocated. `stop`, once set, stops the reading too: its
/// waiter gave up on it (a look's deadline), and an abandoned reader must
/// not go on allocating.
pub struct Budget<'s> {
    limit: usize,
    spent: Cell<usize>,
    held: Cell<usize>,
    most: Cell<usize>,
    stop: Option<&'s AtomicBool>,
    refused: Cell<Option<Refused>>,
}

/// Bytes held from a [`Budget`] until dropped.
pub struct Held<'b, 's> {
    budget: &'b Budget<'s>,
    bytes: usize,
}

impl Drop for Held<'_, '_> {
    fn drop(&mut self) {
        let held = &self.budget.held;
        held.set(held.get() - self.bytes);
    }
}

impl<'s> Budget<'s> {
    pub fn new(limit: usize, stop: Option<&'s AtomicBool>) -> Budget<'s> {
        Budget {
            limit,
            spent: Cell::new(0),
            held: Cell::new(0),
            most: Cell::new(0),
            stop,
            refused: Cell::new(None),
        }
    }

    /// The most the reading has had charged and held at once.
    pub fn most(&self) -> usize {
        self.most.get()
    }

    /// Whether the reading's waiter gave up on it.
    pub fn given_up(&self) -> bool {
        self.stop.is_some_and(|stop| stop.load(Ordering::Relaxed))
    }

    /// Takes `bytes` (on top of what is charged and held), if the limit
    /// allows and the reading is not given up.
    fn take(&self, bytes: usize, charged: bool) -> Result<(), Refused> {
        if self.given_up() {
            return Err(Refused::GivenUp);
        }
        let now = self.spent.get() + self.held.get();
        match now.checked_add(bytes).filter(|n| *n <= self.limit) {
            Some(total) => {
                match charged {
                    true => self.spent.set(self.spent.get() + bytes),
                    false => self.held.set(self.held.get() + bytes),
                }
                self.most.set(self.most.get().max(total));
                Ok(())
            }
            None => Err(Refused::OverBudget { limit: self.limit }),
        }
    }

    /// Holds `bytes` until the guard is dropped: what reading or parsing a
    /// file takes only while it is done.
    pub fn hold(&self, bytes: usize) -> Result<Held<'_, 's>, Refused> {
        self.take(bytes, false)?;
        Ok(Held {
            budget: self,
            bytes,
        })
    }

    /// Charges `bytes` of decoded values, for good.
    fn charge<E: de::Error>(&self, bytes: usize) -> Result<(), E> {
        self.take(bytes, true).map_err(|refused| {
            self.refused.set(Some(refused));
            E::custom("refused by the decoding budget")
        })
    }

    /// A YAML (or JSON) document, decoded as sigs.k8s.io/yaml decodes
    /// kubelet's files (YAML to JSON, aliases expanded), within the budget:
    /// the parser's work is held first ([`parse_cost`]), then each value is
    /// charged as it is made; past the limit, or once given up, the document
    /// is refused and nothing more is allocated. `text` is the caller's to
    /// account for.
    pub fn decode(&self, text: &str) -> Result<Value, Refused> {
        let _parsing = self.hold(parse_cost(text))?;
        let deserializer = yaml_serde::Deserializer::from_str(text);
        self.deserialize(deserializer).map_err(|err| {
            self.refused
                .take()
                .unwrap_or_else(|| Refused::NotYaml(err.to_string()))
        })
    }
}

impl<'de> DeserializeSeed<'de> for &Budget<'_> {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// Each value is charged what it takes beyond its own `Value` (which its
/// container's buffer or node holds, charged there): a string its heap, a
/// sequence its buffer as it grows, a mapping its nodes.
impl<'de> Visitor<'de> for &Budget<'_> {
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
        self.charge(heap(v.len()))?;
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
        let mut items: Vec<Value> = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            // The buffer grown here, by doubling, each new one charged whole
            // and the old never given back: twice the last at most, more
            // than the old and the new together while one is copied.
            if items.len() == items.capacity() {
                let grown = (items.capacity() * 2).max(4);
                self.charge(heap(grown * std::mem::size_of::<Value>()))?;
                items.reserve_exact(grown - items.len());
            }
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.charge(0)?;
        let mut fields = Map::new();
        let mut entries = 0usize;
        while let Some(key) = map.next_key_seed(self)? {
            // sigs.k8s.io/yaml turns a non-string key into its text.
            let key = match key {
                Value::String(key) => key,
                other => {
                    let text = other.to_string();
                    self.charge(heap(text.len()))?;
                    text
                }
            };
            let value = map.next_value_seed(self)?;
            if entries.is_multiple_of(ENTRIES_PER_NODE) {
                self.charge(MAP_NODE)?;
            }
            entries += 1;
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

    fn decode(text: &str) -> Result<Value, Refused> {
        Budget::new(DECODED_LIMIT, None).decode(text)
    }

    #[test]
    fn a_document_is_decoded_with_its_aliases_expanded() {
        let text = "base: &b {cgroupRoot: /k, list: [1, 2.5, true, null]}\nother: *b\n";
        let value = decode(text).unwrap();
        assert_eq!(value["other"]["cgroupRoot"], "/k");
        assert_eq!(
            value["base"]["list"],
            serde_json::json!([1, 2.5, true, null])
        );
        let err = decode("a: [unclosed\n").unwrap_err();
        assert!(matches!(err, Refused::NotYaml(_)), "{err}");
        assert!(!err.stops_the_reading());
    }

    /// The input: one anchor of about 9 KB aliased 100,000 times
    /// (900 KB of text, about 900 MB expanded) is refused within the budget:
    /// its 300,000 indicators and words alone would take the parser past it.
    #[test]
    fn an_anchor_aliased_past_the_budget_is_refused_not_decoded() {
        let mut text = format!("anchor: &a \"{}\"\nlist:\n", "x".repeat(9_000));
        for _ in 0..100_000 {
            text.push_str("- *a\n");
        }
        let budget = Budget::new(DECODED_LIMIT, None);
        let (err, peak) = counting::peak_of(|| budget.decode(&text).unwrap_err());
        assert_eq!(
            err,
            Refused::OverBudget {
                limit: DECODED_LIMIT
            }
        );
        assert!(err.to_string().contains("more than 64 MiB"), "{err}");
        assert!(err.stops_the_reading());
        assert!(budget.most() <= DECODED_LIMIT, "{}", budget.most());
        assert!(peak <= budget.most(), "{peak} > {}", budget.most());
        // Under a budget it fits in, the same text decodes.
        let small = text.lines().take(12).collect::<Vec<_>>().join("\n");
        assert!(decode(&small).is_ok());
    }

    /// Aliases few enough for the parser, expanded past the budget: refused
    /// while they are, never allocating more than was charged (measured).
    #[test]
    fn aliases_expanded_past_the_budget_stop_before_it_is_allocated() {
        let text = format!(
            "anchor: &a \"{}\"\nlist: [{}]\n",
            "x".repeat(64 * 1024),
            "*a, ".repeat(2_000)
        );
        assert!(parse_cost(&text) < DECODED_LIMIT / 4);
        let budget = Budget::new(DECODED_LIMIT, None);
        let (err, peak) = counting::peak_of(|| budget.decode(&text).unwrap_err());
        assert_eq!(
            err,
            Refused::OverBudget {
                limit: DECODED_LIMIT
            }
        );
        // It went most of the way: the values were charged, not the parse.
        assert!(budget.most() > DECODED_LIMIT / 2, "{}", budget.most());
        assert!(budget.most() <= DECODED_LIMIT);
        assert!(peak <= budget.most(), "{peak} > {}", budget.most());
    }

    /// What is charged is at least what is allocated, for the shapes that
    /// cost the parser and the values most per byte of text: each decoded
    /// (or refused by the parser) with a measured peak under the account.
    #[test]
    fn what_a_document_is_charged_covers_what_decoding_it_allocates() {
        let n = 20_000;
        let shapes = [
            format!("[{}1]", "1,".repeat(n)),
            "- 1\n".repeat(n),
            "?\n".repeat(n),
            format!("{}x", "? ".repeat(n)),
            format!("{}x", "- ".repeat(n)),
            format!("{}{}", "[".repeat(n), "]".repeat(n)),
            format!("{}{}", "{a: ".repeat(n), "}".repeat(n)),
            format!("[{}{{a: 1}}]", "{a: 1},".repeat(n)),
            format!("[{}[]]", "[],".repeat(n)),
            (0..n).map(|i| format!("k{i}: v\n")).collect(),
            (0..n).map(|i| format!("- &a{i} x\n")).collect(),
            format!("a: &a {{k: v, l: [1, 2]}}\nl:\n{}", "- *a\n".repeat(n)),
            format!(
                "a: &a {}\nl:\n{}",
                "x".repeat(9_000),
                "- *a\n".repeat(n / 50)
            ),
            format!("a: {}\n", "x".repeat(n * 20)),
            format!("[{}]", "!!str a,".repeat(n)),
            // Aliases of containers: their buffers and nodes, not the
            // parser, are what they take.
            format!("a: &a [{}1]\nl: [{}]", "1,".repeat(999), "*a,".repeat(500)),
            format!(
                "a: &a {{{}}}\nl: [{}]",
                (0..200).map(|i| format!("k{i}: 1,")).collect::<String>(),
                "*a,".repeat(500)
            ),
        ];
        for text in &shapes {
            let budget = Budget::new(usize::MAX / 2, None);
            let (decoded, peak) = counting::peak_of(|| budget.decode(text).map(drop));
            let shown = &text[..40.min(text.len())];
            assert!(
                peak <= budget.most(),
                "{shown:?}: {peak} allocated, {} charged ({decoded:?})",
                budget.most()
            );
        }
    }

    #[test]
    fn a_reading_given_up_decodes_nothing_more() {
        let stop = AtomicBool::new(false);
        let budget = Budget::new(DECODED_LIMIT, Some(&stop));
        assert!(budget.decode("a: 1\n").is_ok());
        stop.store(true, Ordering::Relaxed);
        assert!(budget.given_up());
        let (err, peak) = counting::peak_of(|| budget.decode("b: 2\n").unwrap_err());
        assert_eq!(err, Refused::GivenUp);
        assert!(err.stops_the_reading());
        assert_eq!(peak, 0, "nothing allocated once given up");
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

/// The lib's tests' allocator: the system's, counting on each thread that
/// asks ([`counting::peak_of`]) what it holds at once, each block at
/// malloc's size ([`heap`]). A test measures what its work really allocates.
#[cfg(test)]
pub(crate) mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    struct Counting;

    thread_local! {
        static ON: Cell<bool> = const { Cell::new(false) };
        static NOW: Cell<isize> = const { Cell::new(0) };
        static PEAK: Cell<isize> = const { Cell::new(0) };
    }

    fn count(bytes: usize, up: bool) {
        // `try_with`: a thread being torn down frees after its locals.
        let _ = ON.try_with(|on| {
            if on.get() {
                let bytes = super::heap(bytes) as isize;
                let now = NOW.get() + if up { bytes } else { -bytes };
                NOW.set(now);
                PEAK.set(PEAK.get().max(now));
            }
        });
    }

    // SAFETY: each call is the system allocator's, as asked; the count
    // beside it allocates nothing (constant thread-locals without drop).
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let block = System.alloc(layout);
            if !block.is_null() {
                count(layout.size(), true);
            }
            block
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            let block = System.alloc_zeroed(layout);
            if !block.is_null() {
                count(layout.size(), true);
            }
            block
        }
        unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
            System.dealloc(block, layout);
            count(layout.size(), false);
        }
        unsafe fn realloc(&self, block: *mut u8, layout: Layout, size: usize) -> *mut u8 {
            let moved = System.realloc(block, layout, size);
            if !moved.is_null() {
                // Both at once, as a copy from one to the other has them.
                count(size, true);
                count(layout.size(), false);
            }
            moved
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    /// `work`'s answer, and the most this thread held at once while it ran
    /// beyond what it held before (its answer included).
    pub(crate) fn peak_of<T>(work: impl FnOnce() -> T) -> (T, usize) {
        NOW.set(0);
        PEAK.set(0);
        ON.set(true);
        let answer = work();
        ON.set(false);
        (answer, PEAK.get().max(0) as usize)
    }
}
