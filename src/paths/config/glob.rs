//! Go's `filepath.Clean`, `filepath.Glob` and `filepath.Match`, as
//! containerd's `resolveImports` uses them for `imports`.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use super::opened;

/// A globbed directory listing with more names than this is not read on.
const MAX_DIR_NAMES: usize = 4096;

/// Go's `filepath.Clean`, lexically: `.` dropped, `..` eats its parent.
pub(super) fn clean(path: &Path) -> PathBuf {
    let mut out: Vec<Component> = Vec::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match out.last() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir) => {}
                _ => out.push(component),
            },
            other => out.push(other),
        }
    }
    if out.is_empty() {
        return PathBuf::from(".");
    }
    out.iter().collect()
}

/// Go's `filepath.Glob`: each directory's names sorted, a directory that
/// cannot be listed matches nothing, a malformed pattern is an error.
pub(super) fn glob(
    pattern: &Path,
    root: Option<&Path>,
    changed: &mut i64,
) -> io::Result<Vec<PathBuf>> {
    let text = pattern.to_string_lossy();
    if !has_meta(&text) {
        return Ok(match std::fs::symlink_metadata(opened(pattern, root)) {
            Ok(_) => vec![pattern.to_path_buf()],
            Err(_) => Vec::new(),
        });
    }
    let (Some(dir), Some(name)) = (pattern.parent(), pattern.file_name()) else {
        return Err(bad_pattern());
    };
    let name = name.to_string_lossy();
    let dirs = match has_meta(&dir.to_string_lossy()) {
        true => glob(dir, root, changed)?,
        false => vec![dir.to_path_buf()],
    };
    let mut out = Vec::new();
    for dir in dirs {
        let listed = opened(&dir, root);
        let Ok(metadata) = std::fs::metadata(&listed) else {
            continue;
        };
        if !metadata.is_dir() {
            continue;
        }
        // A drop-in added or removed changes its directory.
        *changed = (*changed).max(metadata.ctime() * 1_000_000_000 + metadata.ctime_nsec());
        let Ok(entries) = std::fs::read_dir(&listed) else {
            continue;
        };
        let mut names = Vec::new();
        for entry in entries.flatten() {
            if names.len() == MAX_DIR_NAMES {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} holds over {MAX_DIR_NAMES} names", dir.display()),
                ));
            }
            if let Ok(entry) = entry.file_name().into_string() {
                names.push(entry);
            }
        }
        names.sort();
        for entry in names {
            if glob_match(&name, &entry)? {
                out.push(dir.join(entry));
            }
        }
    }
    Ok(out)
}

fn has_meta(text: &str) -> bool {
    text.contains(['*', '?', '[', '\\'])
}

fn bad_pattern() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "syntax error in pattern")
}

/// One pattern element of Go's `filepath.Match`.
enum Token {
    Star,
    AnyChar,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    Literal(char),
}

fn tokens(pattern: &str) -> io::Result<Vec<Token>> {
    let mut out = Vec::new();
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(match c {
            '*' => Token::Star,
            '?' => Token::AnyChar,
            '\\' => Token::Literal(chars.next().ok_or_else(bad_pattern)?),
            '[' => {
                let negated = chars.next_if_eq(&'^').is_some();
                let mut ranges = Vec::new();
                loop {
                    let low = match chars.next().ok_or_else(bad_pattern)? {
                        ']' if !ranges.is_empty() => break,
                        '\\' => chars.next().ok_or_else(bad_pattern)?,
                        '-' | ']' => return Err(bad_pattern()),
                        c => c,
                    };
                    let high = match chars.next_if_eq(&'-') {
                        Some(_) => match chars.next().ok_or_else(bad_pattern)? {
                            '\\' => chars.next().ok_or_else(bad_pattern)?,
                            '-' | ']' => return Err(bad_pattern()),
                            c => c,
                        },
                        None => low,
                    };
                    ranges.push((low, high));
                }
                Token::Class { negated, ranges }
            }
            c => Token::Literal(c),
        });
    }
    Ok(out)
}

/// Go's `filepath.Match` of a name (no separator in it): `*` any run,
/// `?` one character, `[...]` a class. Linear: a star backtracks only to
/// the last star.
fn glob_match(pattern: &str, name: &str) -> io::Result<bool> {
    let tokens = tokens(pattern)?;
    let name: Vec<char> = name.chars().collect();
    let one = |token: &Token, c: char| match token {
        Token::AnyChar => c != '/',
        Token::Literal(l) => *l == c,
        Token::Class { negated, ranges } => {
            ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c)) != *negated
        }
        Token::Star => false,
    };
    let (mut t, mut n) = (0, 0);
    let mut last_star: Option<(usize, usize)> = None;
    while n < name.len() {
        if t < tokens.len() {
            if let Token::Star = tokens[t] {
                last_star = Some((t, n));
                t += 1;
                continue;
            }
            if one(&tokens[t], name[n]) {
                t += 1;
                n += 1;
                continue;
            }
        }
        match last_star {
            Some((star, from)) if name[from] != '/' => {
                last_star = Some((star, from + 1));
                t = star + 1;
                n = from + 1;
            }
            _ => return Ok(false),
        }
    }
    Ok(tokens[t..].iter().all(|token| matches!(token, Token::Star)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_match_is_go_s() {
        let matches = |p: &str, n: &str| glob_match(p, n).unwrap();
        assert!(matches("*.toml", "10-a.toml"));
        assert!(matches("*.toml", ".hidden.toml"));
        assert!(!matches("*.toml", "a.toml.bak"));
        assert!(matches("?0-*.toml", "10-a.toml"));
        assert!(matches("[0-4]*", "3x"));
        assert!(!matches("[^0-4]*", "3x"));
        assert!(matches("a*b*c", "aXbYbZc"));
        assert!(glob_match("[*.toml", "x").is_err());
    }
}
