//! The compile errors the README and the guides (`src/guide/*.md`) quote are the
//! compiler's own: each quoted message is the `.stderr` of a compile-fail case
//! (`tests/ui`, checked by `tests/ui.rs`), named in a comment above it, and the code above
//! the message is that case's code. A message quoted without a case fails here.

use std::fs;

/// A document's code blocks, in order: (info string, body, the comment line just above
/// the opening fence, if any).
fn blocks(text: &str) -> Vec<(String, String, Option<String>)> {
    let mut blocks = Vec::new();
    let mut lines = text.lines();
    let mut previous: Option<&str> = None;
    while let Some(line) = lines.next() {
        if let Some(info) = line.strip_prefix("```") {
            let mut body = String::new();
            for line in lines.by_ref() {
                if line.starts_with("```") {
                    break;
                }
                body.push_str(line);
                body.push('\n');
            }
            let comment = previous
                .filter(|p| p.starts_with("<!--"))
                .map(str::to_owned);
            blocks.push((info.to_owned(), body, comment));
            previous = None;
        } else if !line.trim().is_empty() {
            previous = Some(line);
        }
    }
    blocks
}

/// The README, then each guide, by name.
fn documents() -> Vec<String> {
    let mut guides: Vec<String> = fs::read_dir("src/guide")
        .unwrap()
        .map(|entry| entry.unwrap().path().display().to_string())
        .filter(|path| path.ends_with(".md"))
        .collect();
    guides.sort();
    assert!(!guides.is_empty(), "no guide in src/guide");
    let mut documents = vec!["README.md".to_owned()];
    documents.extend(guides);
    documents
}

#[test]
fn every_quoted_compile_error_is_a_checked_case() {
    let mut checked = 0;
    for document in documents() {
        checked += check_quotes(&document);
    }
    assert!(
        checked >= 1,
        "the README and the guides quote no compile error any more"
    );
}

/// Checks each compile error `document` quotes; returns how many it quotes.
fn check_quotes(document: &str) -> usize {
    let text = fs::read_to_string(document).unwrap();
    let blocks = blocks(&text);
    let mut checked = 0;
    for (i, (info, body, comment)) in blocks.iter().enumerate() {
        if info != "text" || !body.starts_with("error") {
            continue;
        }
        let case = comment
            .as_deref()
            .and_then(|c| c.strip_prefix("<!-- stderr: "))
            .and_then(|c| c.strip_suffix(" -->"))
            .unwrap_or_else(|| {
                panic!(
                    "{document} quotes a compile error without naming its case: put `<!-- stderr: tests/ui/NAME.stderr -->` above it\n{body}"
                )
            });
        let stderr = fs::read_to_string(case).unwrap_or_else(|e| panic!("{case}: {e}"));
        let source = case.replace(".stderr", ".rs");
        let expected = stderr.replace(&source, "src/main.rs");
        assert_eq!(
            body.trim_end(),
            expected.trim_end(),
            "{document}'s quote of {case} is not what the compiler prints"
        );
        // The code above the quote is the case's, so the quote's line numbers hold.
        let (code_info, code, _) = &blocks[i - 1];
        assert!(
            code_info.contains("compile_fail"),
            "{case}: no code above it"
        );
        let written = fs::read_to_string(&source).unwrap();
        let written = written
            .trim_end()
            .strip_suffix("fn main() {}")
            .unwrap_or(&written);
        assert_eq!(
            code.trim_end(),
            written.trim_end(),
            "{source} is not {document}'s code"
        );
        checked += 1;
    }
    checked
}
