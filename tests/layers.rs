//! The crate's layers, as `src/lib.rs` lists them, hold: every module
//! imports only from layers below its own (so there is no import cycle),
//! and the model and the floor (`src/read/`) import nothing outside
//! themselves.
//!
//! A text scan: every `crate::<module>` in a file under `src/<module>` (or
//! `src/<module>.rs`), including `use crate::{a, b::c}` groups; comments are
//! skipped. Test code counts too.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Layer number of each top-level module, from the numbered list in
/// `src/lib.rs`'s doc: "N. [`a`] ...; [`b`] ..." (continued on the lines
/// after it).
fn layers(lib: &str) -> BTreeMap<String, usize> {
    let mut layers = BTreeMap::new();
    let mut current = None;
    for line in lib.lines() {
        let Some(doc) = line.strip_prefix("//!") else {
            continue;
        };
        let doc = doc.trim();
        if let Some((number, _)) = doc.split_once(". ") {
            if let Ok(n) = number.parse::<usize>() {
                current = Some(n);
            }
        }
        if doc.is_empty() {
            current = None;
        }
        let Some(layer) = current else { continue };
        let mut rest = doc;
        while let Some(start) = rest.find("[`") {
            let after = &rest[start + 2..];
            let end = after.find("`]").expect("a closed [`name`]");
            let name = &after[..end];
            assert!(
                layers.insert(name.to_string(), layer).is_none(),
                "{name} is in two layers of src/lib.rs"
            );
            rest = &after[end..];
        }
    }
    layers
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to (`None` for lib.rs and
/// main.rs).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).unwrap();
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (relative.components().count() > 1 || !matches!(name, "lib" | "main")).then(|| name.to_string())
}

/// The top-level modules a piece of Rust names through `crate::`.
fn imports(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap_or_default();
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            // `nodectl_crate::` and the like are not `crate::`.
            let before = rest[..at].chars().next_back();
            rest = &rest[at + "crate::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            if let Some(group) = rest.strip_prefix('{') {
                // `crate::{a, b::{c, d}}`: the first segment of each item.
                let mut depth = 0;
                let mut item_start = true;
                let mut name = String::new();
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => item_start = true,
                        c if item_start && (c.is_alphanumeric() || c == '_') => name.push(c),
                        _ => {
                            if !name.is_empty() {
                                found.insert(std::mem::take(&mut name));
                            }
                            if !c.is_whitespace() {
                                item_start = false;
                            }
                        }
                    }
                }
                if !name.is_empty() {
                    found.insert(name);
                }
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.insert(name);
                }
            }
        }
    }
    found
}

/// Every import that breaks the layers: (file, its module, the import).
fn violations(src: &Path) -> Vec<String> {
    let lib = fs::read_to_string(src.join("lib.rs")).unwrap();
    let layers = layers(&lib);
    let declared: BTreeSet<String> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';').to_string())
        .collect();
    assert_eq!(
        declared,
        layers.keys().cloned().collect(),
        "every module of src/lib.rs in exactly one layer of its doc"
    );
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut wrong = Vec::new();
    for file in files {
        let Some(module) = module_of(src, &file) else {
            continue;
        };
        let own = layers[&module];
        for import in imports(&fs::read_to_string(&file).unwrap()) {
            if import == module {
                continue;
            }
            match layers.get(&import) {
                Some(&layer) if layer < own => {}
                Some(&layer) => wrong.push(format!(
                    "{}: {module} (layer {own}) imports {import} (layer {layer})",
                    file.display()
                )),
                None => wrong.push(format!(
                    "{}: {module} imports crate::{import}, no module of src/lib.rs",
                    file.display()
                )),
            }
        }
    }
    wrong
}

#[test]
fn every_module_imports_only_from_layers_below_its_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let wrong = violations(&src);
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
}

/// Cycles among the files of one directory module (`src/model/*.rs` and
/// the like): file `a` depends on file `b` when it names `crate::<dir>::b`
/// or `super::b`. `mod.rs` (which declares and re-exports) and test code
/// (from `#[cfg(test)]` on, and the test-only fixtures) are left out.
fn file_cycles(src: &Path) -> Vec<String> {
    let mut cycles = Vec::new();
    let mut dirs: Vec<PathBuf> = fs::read_dir(src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let module = dir.file_name().unwrap().to_str().unwrap().to_string();
        let mut files: BTreeMap<String, String> = BTreeMap::new();
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let Some(name) = path.file_stem().and_then(|n| n.to_str()) else {
                continue;
            };
            if path.extension().is_none_or(|e| e != "rs") || matches!(name, "mod" | "fixtures") {
                continue;
            }
            let code = fs::read_to_string(&path).unwrap();
            let code = code.split("#[cfg(test)]").next().unwrap_or_default();
            files.insert(name.to_string(), code.to_string());
        }
        let edges: BTreeMap<&str, BTreeSet<&str>> = files
            .iter()
            .map(|(name, code)| {
                let used = files
                    .keys()
                    .filter(|other| *other != name)
                    .filter(|other| {
                        imports_of(code, &format!("crate::{module}::{other}"))
                            || imports_of(code, &format!("super::{other}"))
                    })
                    .map(String::as_str)
                    .collect();
                (name.as_str(), used)
            })
            .collect();
        // Depth-first search for a back edge.
        fn visit<'a>(
            node: &'a str,
            edges: &BTreeMap<&'a str, BTreeSet<&'a str>>,
            path: &mut Vec<&'a str>,
            done: &mut BTreeSet<&'a str>,
            found: &mut Vec<String>,
        ) {
            if let Some(at) = path.iter().position(|n| *n == node) {
                found.push([&path[at..], &[node]].concat().join(" -> "));
                return;
            }
            if !done.insert(node) {
                return;
            }
            path.push(node);
            for next in &edges[node] {
                visit(next, edges, path, done, found);
            }
            path.pop();
        }
        let mut done = BTreeSet::new();
        let mut found = Vec::new();
        for node in edges.keys() {
            visit(node, &edges, &mut Vec::new(), &mut done, &mut found);
        }
        cycles.extend(found.into_iter().map(|c| format!("src/{module}: {c}")));
    }
    cycles
}

/// Whether `code` names `path` followed by `::`, `;`, `,` or `}` (an item
/// of it, or the module itself).
fn imports_of(code: &str, path: &str) -> bool {
    code.lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .any(|line| {
            line.match_indices(path).any(|(at, _)| {
                let before = line[..at].chars().next_back();
                let after = line[at + path.len()..].chars().next();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                    && matches!(after, Some(':' | ';' | ',' | '}' | ')'))
            })
        })
}

#[test]
fn no_two_files_of_one_module_import_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let cycles = file_cycles(&src);
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

#[test]
fn a_cycle_between_two_files_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("model")).unwrap();
    fs::write(dir.path().join("model/mod.rs"), "pub mod a;\npub mod b;\n").unwrap();
    fs::write(dir.path().join("model/a.rs"), "use crate::model::b::B;\n").unwrap();
    fs::write(
        dir.path().join("model/b.rs"),
        "use crate::model::a::{A, C};\n",
    )
    .unwrap();
    assert_eq!(file_cycles(dir.path()), ["src/model: a -> b -> a"]);
    fs::write(dir.path().join("model/b.rs"), "use crate::model::abc::A;\n").unwrap();
    assert!(file_cycles(dir.path()).is_empty());
}

#[test]
fn the_model_is_a_leaf_and_checks_read_only_the_model() {
    // The same rule, stated for the layers the house rests on: whatever
    // src/lib.rs says, these must hold.
    let lib = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let layers = layers(&lib);
    assert_eq!(layers["model"], 0);
    for (module, above) in [
        ("sources", ["commands", "render", "act", "checks"]),
        ("checks", ["commands", "render", "act", "sources"]),
    ] {
        for other in above {
            assert!(
                layers[module] <= layers[other],
                "{module} may not import {other}"
            );
        }
    }
}

/// What the files of the floor (`src/read/`) name of the crate, as
/// "file: crate::module". The floor is held to naming nothing, whatever
/// src/lib.rs says of its layer: every layer stands on it.
fn floor_imports(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(&src.join("read"), &mut files);
    files.sort();
    let mut found = Vec::new();
    for file in files {
        for import in imports(&fs::read_to_string(&file).unwrap()) {
            if import != "read" {
                found.push(format!("{}: crate::{import}", file.display()));
            }
        }
    }
    found
}

#[test]
fn the_floor_is_a_leaf_importing_nothing_of_the_crate() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = fs::read_to_string(src.join("lib.rs")).unwrap();
    assert_eq!(layers(&lib)["read"], 0);
    let found = floor_imports(&src);
    assert!(
        found.is_empty(),
        "the floor imports the crate:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_sees_every_form_of_import() {
    let code = "use crate::model::{Gap, Snapshot};\n\
                use crate::{checks, render::{self, Format}};\n\
                let x = crate::sources::proc_scan::scan();\n\
                // use crate::commands;\n\
                #[serde(with = \"crate::model::path_json\")]\n\
                let y = nodectl_crate::act;\n";
    let found: Vec<String> = imports(code).into_iter().collect();
    assert_eq!(found, ["checks", "model", "render", "sources"]);
}

#[test]
fn a_forbidden_import_is_caught() {
    // A copy of src/ with one import against the layers in the model.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let copy = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    for file in &files {
        let target = copy.path().join(file.strip_prefix(&root).unwrap());
        fs::create_dir_all(target.parent().unwrap()).unwrap();
        fs::copy(file, &target).unwrap();
    }
    assert!(violations(copy.path()).is_empty());
    for (file, import, says) in [
        (
            "model/gap.rs",
            "use crate::sources::proc_scan;",
            "model (layer 0) imports sources",
        ),
        (
            "checks/zombie.rs",
            "use crate::sources::proc_scan;",
            "checks (layer 2) imports sources",
        ),
        (
            "sources/proc_scan.rs",
            "use crate::render::Format;",
            "sources (layer 2) imports render",
        ),
    ] {
        let path = copy.path().join(file);
        let original = fs::read_to_string(&path).unwrap();
        fs::write(&path, format!("{import}\n{original}")).unwrap();
        let wrong = violations(copy.path());
        assert!(wrong.iter().any(|w| w.contains(says)), "{file}: {wrong:?}");
        fs::write(&path, original).unwrap();
    }
    // The floor naming the model: against the layers, and against the floor.
    let path = copy.path().join("read/bounded.rs");
    let original = fs::read_to_string(&path).unwrap();
    fs::write(&path, format!("use crate::model::Gap;\n{original}")).unwrap();
    let wrong = violations(copy.path());
    assert!(
        wrong
            .iter()
            .any(|w| w.contains("read (layer 0) imports model")),
        "{wrong:?}"
    );
    assert_eq!(floor_imports(copy.path()).len(), 1);
}

/// The code of a file before its `#[cfg(test)]` module, in lines.
fn code_lines(text: &str) -> usize {
    text.lines()
        .take_while(|line| line.trim() != "#[cfg(test)]")
        .count()
}

/// Files over `limit` lines of code (tests not counted), with their count.
fn long_rooms(src: &Path, limit: usize) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files
        .iter()
        .filter_map(|file| {
            let lines = code_lines(&fs::read_to_string(file).unwrap());
            (lines > limit).then(|| format!("{}: {lines} lines", file.display()))
        })
        .collect()
}

/// A room holds one concern: no file of `src/` is over 600 lines outside
/// its tests (issue 27). A longer one is split by what it does.
#[test]
fn no_file_of_src_is_over_600_lines_outside_its_tests() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let long = long_rooms(&src, 600);
    assert!(long.is_empty(), "split these:\n{}", long.join("\n"));
    // The same scan, held to a limit every real room passes, names them.
    assert!(long_rooms(&src, 100).len() > 10, "the scan reads src/");
    assert_eq!(
        code_lines("fn a() {}\n\n#[cfg(test)]\nmod tests {\n}\n"),
        2,
        "tests are not counted"
    );
}
