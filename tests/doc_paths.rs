//! Every example in the runtime's docs, which docs.rs shows on `persevere`'s pages too
//! (`persevere` re-exports the runtime), is written as a user of `persevere` writes it:
//! `persevere::...`, never `persevere_runtime::...`, which fails in a user's crate with
//! E0432. (The runtime's doc tests run them so, through a dev-dependency on `persevere`.)

use std::fs;
use std::path::Path;

fn doc_lines_naming_the_runtime(dir: &Path, found: &mut Vec<String>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            doc_lines_naming_the_runtime(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = fs::read_to_string(&path).unwrap();
            for (n, line) in text.lines().enumerate() {
                let doc = line.trim_start();
                if (doc.starts_with("///") || doc.starts_with("//!"))
                    && doc.contains("persevere_runtime::")
                {
                    found.push(format!("{}:{}: {}", path.display(), n + 1, doc));
                }
            }
        }
    }
}

#[test]
fn runtime_docs_use_persevere_paths() {
    let mut found = Vec::new();
    doc_lines_naming_the_runtime(Path::new("retry-runtime/src"), &mut found);
    assert!(
        found.is_empty(),
        "write `persevere::` in these doc lines:\n{}",
        found.join("\n")
    );
}
