//! The house's size rules, on both crates: no file over 500 lines before its tests, no
//! function over 80 lines unless the comment above it says why one idea needs it (a
//! line starting "One function"). Read from rustfmt's layout: a function ends at the
//! first line that closes it at its own indent.

use std::fs;
use std::path::{Path, PathBuf};

const FILE_LINES: usize = 500;
const FUNCTION_LINES: usize = 80;

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether `line` begins a function with a body, and at which indent.
fn function_at(line: &str) -> Option<usize> {
    let code = line.trim_start();
    let indent = line.len() - code.len();
    let mut rest = code;
    for prefix in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "const ",
        "async ",
        "unsafe ",
    ] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    (rest.starts_with("fn ") && !line.trim_end().ends_with(';')).then_some(indent)
}

/// What breaks the rules in the sources at `src` (relative to the workspace).
fn oversized(src: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(src);
    let mut paths = Vec::new();
    files(&root, &mut paths);
    let mut found = Vec::new();
    for path in paths {
        let name = path.strip_prefix(&root).unwrap().display().to_string();
        if name.ends_with("tests.rs") {
            continue;
        }
        let text = fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let code = lines
            .iter()
            .position(|l| l.starts_with("#[cfg(test)]"))
            .unwrap_or(lines.len());
        if code > FILE_LINES {
            found.push(format!("{src}/{name}: {code} lines before its tests"));
        }
        for (at, line) in lines[..code].iter().enumerate() {
            let Some(indent) = function_at(line) else {
                continue;
            };
            let close = format!("{}}}", " ".repeat(indent));
            let Some(end) = lines[at..code].iter().position(|l| *l == close) else {
                continue;
            };
            let excused = lines[..at]
                .iter()
                .rev()
                .take_while(|l| {
                    let l = l.trim_start();
                    l.starts_with("//") || l.starts_with("#[")
                })
                .any(|l| {
                    l.trim_start()
                        .trim_start_matches('/')
                        .trim_start()
                        .starts_with("One function")
                });
            if end > FUNCTION_LINES && !excused {
                found.push(format!(
                    "{src}/{name}:{}: a function of {end} lines",
                    at + 1
                ));
            }
        }
    }
    found
}

#[test]
fn the_runtime_keeps_its_files_and_functions_short() {
    let found = oversized("retry-runtime/src");
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_macros_keep_their_files_and_functions_short() {
    let found = oversized("retry-macros/src");
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn a_function_is_found_by_its_first_line() {
    assert_eq!(function_at("    pub(crate) fn drive<'p>("), Some(4));
    assert_eq!(function_at("fn main() {"), Some(0));
    assert_eq!(
        function_at("    fn parts(self: Pin<&mut Self>) -> Parts<'_>;"),
        None
    );
    assert_eq!(function_at("    let f = fn_name;"), None);
}
