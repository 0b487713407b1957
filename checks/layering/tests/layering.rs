//! Imports run one way: each module of the runtime and of the macros imports only modules
//! below it in its crate's list here, so there is no circle and a reader can learn a crate
//! from the bottom up. (rustfmt sorts `mod` lines, so the order lives here, where it is
//! checked.)
//!
//! Every file under a crate's `src/` is read, its module path taken from its file path
//! (`fleet/budget.rs` is `fleet::budget`), and every path it names through `crate::`,
//! `super::` or `self::` outside its tests is resolved to the module it reaches: in a
//! `use` (grouped or not), a type, an expression or a macro's arguments. A doc link may
//! point anywhere (it is a string to the parser). Naming an item through the crate's
//! root (`crate::Class`) is refused: a root re-export would hide where the item lives.

use std::fs;
use std::path::Path;

use proc_macro2::{Delimiter, TokenStream, TokenTree};

/// The runtime's modules, lowest first, by room.
const RUNTIME: &[&str] = &[
    // Leaves any room may use.
    "key",
    "rng",
    // What a failure means, and why a call stopped.
    "classify::class",
    "classify::give_up",
    "classify::timed_out",
    // Time.
    "time::clock",
    "time::timer",
    // The enclosing call: its frame, the deadline it hands down, the attempt it makes.
    "layer::frame",
    "layer::scope",
    "layer::deadline",
    "layer::attempt",
    // Shared state per dependency and per function.
    "fleet::window",
    "fleet::budget",
    "fleet::breaker",
    "fleet::batch",
    "fleet::stats",
    // What a call may do, and the sans-I/O decision after each failure.
    "schedule::hook",
    "schedule::policy",
    "schedule::backoff",
    "schedule::state",
    // One call's state, the function's own handling, and the driver.
    "driver::telemetry",
    "driver::call",
    "driver::handling",
    "driver::run",
    "driver::retrying",
    "driver::step",
    "driver::retry_fn",
    // Hedged attempts.
    "hedge::latency",
    "hedge::spec",
    "hedge::accounting",
    "hedge::copies",
    "hedge::hedged",
    // The integrations, then what names all their errors.
    "integrations::http",
    "integrations::reqwest",
    "integrations::rusqlite",
    "integrations::tower",
    "integrations::tonic",
    "integrations::transaction",
    "integrations::sqlstate",
    "integrations::postgres",
    "integrations::sqlx",
    "integrations::error_chain",
    // What generated code calls.
    "macro_support",
];

/// The macros' modules, lowest first. A room's own file (`args.rs`) reads the attribute
/// through its submodules, so it comes after them.
const MACROS: &[&str] = &[
    // Reporting errors, and reading what the user wrote.
    "diag",
    "duration",
    "item",
    // The arguments: what they are once read, one `key = value`, the grammar of each
    // family of keys, the keys, and the reading of the list.
    "args::parsed",
    "args::key",
    "args::schedule",
    "args::failures",
    "args::named",
    "args::hedge",
    "args::keys",
    "args",
    // The function, and the checks: its signature, then how the arguments fit it.
    "func",
    "valid::signature",
    "valid",
    // The expansion: the site, the handling, the shared pieces, the two expansions.
    "expand::opaque",
    "expand::site",
    "expand::handling",
    "expand::parts",
    "expand::future",
    "expand::steps",
    "expand",
    "idempotent",
    // The derive: reading the attributes, checking them, the arms, then the impls.
    "derive::attr",
    "derive::check",
    "derive::arm",
    "derive",
];

/// A module path, as segments.
type ModPath = Vec<String>;

/// The module path of the file at `relative` (to `src/`): `a/b.rs` is `a::b`; `lib.rs`
/// is the root.
fn module_of(relative: &Path) -> ModPath {
    let mut path: ModPath = relative
        .with_extension("")
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    if path == ["lib"] {
        path.clear();
    }
    if path.last().is_some_and(|s| s == "mod") {
        path.pop();
    }
    path
}

/// Whether `tokens[at..]` is `#[cfg(test)]`.
fn is_test_attribute(tokens: &[TokenTree], at: usize) -> bool {
    let (Some(TokenTree::Punct(hash)), Some(TokenTree::Group(attr))) =
        (tokens.get(at), tokens.get(at + 1))
    else {
        return false;
    };
    hash.as_char() == '#'
        && attr.delimiter() == Delimiter::Bracket
        && attr.stream().to_string().replace(' ', "") == "cfg(test)"
}

/// Where the item that begins at `tokens[at..]` ends: after its first `;` or its first
/// `{ ... }`, whichever comes first.
fn end_of_item(tokens: &[TokenTree], mut at: usize) -> usize {
    while let Some(token) = tokens.get(at) {
        at += 1;
        match token {
            TokenTree::Punct(p) if p.as_char() == ';' => break,
            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => break,
            _ => {}
        }
    }
    at
}

/// The paths `tokens` name from the crate, each resolved from where `module` is, outside
/// items under `#[cfg(test)]`.
fn named_paths(tokens: TokenStream, module: &ModPath, found: &mut Vec<ModPath>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        if is_test_attribute(&tokens, i) {
            i = end_of_item(&tokens, i + 2);
            continue;
        }
        let start = match &tokens[i] {
            TokenTree::Ident(ident) if ident == "crate" => Some(ModPath::new()),
            TokenTree::Ident(ident) if ident == "self" => Some(module.clone()),
            TokenTree::Ident(ident) if ident == "super" => {
                let mut parent = module.clone();
                parent.pop();
                Some(parent)
            }
            _ => None,
        };
        let after_colons =
            i >= 1 && matches!(&tokens[i - 1], TokenTree::Punct(p) if p.as_char() == ':');
        match start {
            Some(start) if !after_colons && is_colons(&tokens, i + 1) => {
                i = path_from(&tokens, i + 3, start, found);
            }
            _ => {
                if let TokenTree::Group(group) = &tokens[i] {
                    // Attributes hold doc links, which may point anywhere.
                    let attribute = group.delimiter() == Delimiter::Bracket
                        && matches!(tokens.get(i.wrapping_sub(1)), Some(TokenTree::Punct(p)) if p.as_char() == '#' || p.as_char() == '!');
                    if !attribute {
                        named_paths(group.stream(), module, found);
                    }
                }
                i += 1;
            }
        }
    }
}

/// Whether `tokens[at..]` begins with `::`.
fn is_colons(tokens: &[TokenTree], at: usize) -> bool {
    matches!((tokens.get(at), tokens.get(at + 1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) if a.as_char() == ':' && b.as_char() == ':')
}

/// Reads a path's segments after `prefix` from `tokens[at..]` (`a::b::{c, d::e}`), pushes
/// each whole path, and returns where the path ends.
fn path_from(
    tokens: &[TokenTree],
    mut at: usize,
    mut prefix: ModPath,
    found: &mut Vec<ModPath>,
) -> usize {
    loop {
        match tokens.get(at) {
            Some(TokenTree::Ident(ident)) => {
                let name = ident.to_string();
                match name.as_str() {
                    "super" => {
                        prefix.pop();
                    }
                    "self" => {}
                    _ => prefix.push(name),
                }
                at += 1;
                if is_colons(tokens, at) {
                    at += 2;
                    continue;
                }
                found.push(prefix);
                return at;
            }
            Some(TokenTree::Group(group)) if group.delimiter() == Delimiter::Brace => {
                let inner: Vec<TokenTree> = group.stream().into_iter().collect();
                for branch in
                    inner.split(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ','))
                {
                    if !branch.is_empty() {
                        path_from(branch, 0, prefix.clone(), found);
                    }
                }
                return at + 1;
            }
            _ => {
                found.push(prefix);
                return at;
            }
        }
    }
}

/// The position in `layers` of the module `path` is in (the longest entry it starts
/// with), if any.
fn layer_of(layers: &[&str], path: &[String]) -> Option<usize> {
    layers
        .iter()
        .enumerate()
        .filter(|(_, entry)| {
            let entry: Vec<&str> = entry.split("::").collect();
            entry.len() <= path.len() && entry.iter().zip(path).all(|(a, b)| a == b)
        })
        .max_by_key(|(_, entry)| entry.len())
        .map(|(at, _)| at)
}

/// Every `.rs` file under `dir`, relative to `root`.
fn files(root: &Path, dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path.strip_prefix(root).unwrap().to_path_buf());
        }
    }
}

/// What is wrong with the imports of the crate whose sources are in `src` (relative to
/// the workspace), against `layers`.
fn violations(src: &str, layers: &[&str]) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(src);
    let mut paths = Vec::new();
    files(&root, &root, &mut paths);
    paths.sort();
    let mut violations = Vec::new();
    for relative in paths {
        let module = module_of(&relative);
        if module.iter().any(|s| s == "tests") {
            continue;
        }
        let text = fs::read_to_string(root.join(&relative)).unwrap();
        let tokens: TokenStream = text
            .parse()
            .unwrap_or_else(|e| panic!("{src}/{}: {e:?}", relative.display()));
        let mut found = Vec::new();
        named_paths(tokens, &module, &mut found);
        let here = layer_of(layers, &module);
        if here.is_none() && !found.is_empty() && module.len() > 1 {
            violations.push(format!(
                "{src}/{}: `{}` is not in the list",
                relative.display(),
                module.join("::")
            ));
            continue;
        }
        for path in found {
            let name = path.join("::");
            match (layer_of(layers, &path), here) {
                // A room or the root declaring and re-exporting its own modules.
                (Some(_), None) => {}
                (Some(at), Some(here)) if at <= here => {}
                (Some(_), Some(_)) => {
                    violations.push(format!("{}: imports `{name}`, above it", module.join("::")))
                }
                (None, _) if path.len() <= 1 && here.is_none() => {}
                (None, _) => violations.push(format!(
                    "{}: names `{name}` through the crate's root; name the module it is in",
                    if module.is_empty() {
                        "lib".into()
                    } else {
                        module.join("::")
                    }
                )),
            }
        }
    }
    violations
}

#[test]
fn each_module_of_the_runtime_imports_only_modules_below_it() {
    let violations = violations("retry-runtime/src", RUNTIME);
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn each_module_of_the_macros_imports_only_modules_below_it() {
    let violations = violations("retry-macros/src", MACROS);
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

/// The checker itself, on sources made to fail it.
mod checker {
    use super::*;

    fn paths(source: &str, module: &[&str]) -> Vec<String> {
        let module: ModPath = module.iter().map(|s| s.to_string()).collect();
        let mut found = Vec::new();
        named_paths(source.parse().unwrap(), &module, &mut found);
        found.iter().map(|p| p.join("::")).collect()
    }

    #[test]
    fn reads_every_form_of_path() {
        let source = "
            use crate::a::b::C;
            use crate::{d::E, f::{g::H, i}};
            use super::j::K;
            use self::l::M;
            fn f() -> crate::n::O { crate::p::q(); super::super::r::s!() }
            /// [`crate::doc::Link`]
            #[doc = \"crate::also::Doc\"]
            struct S;
            #[cfg(test)]
            mod tests { use crate::t::U; }
            #[cfg(test)]
            use crate::v::W;
            impl S { #[cfg(test)] fn t() { crate::x::y() } fn z() { crate::z::z() } }
        ";
        assert_eq!(
            paths(source, &["room", "m"]),
            [
                "a::b::C",
                "d::E",
                "f::g::H",
                "f::i",
                "room::j::K",
                "room::m::l::M",
                "n::O",
                "p::q",
                "r::s",
                "z::z"
            ]
        );
    }

    #[test]
    fn finds_the_layer_of_a_path() {
        let layers = &["a", "b::c", "b::d"];
        let path = |s: &str| s.split("::").map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(layer_of(layers, &path("a::X")), Some(0));
        assert_eq!(layer_of(layers, &path("b::d::e::F")), Some(2));
        assert_eq!(layer_of(layers, &path("b::X")), None);
        assert_eq!(module_of(Path::new("b/d/tests.rs")), path("b::d::tests"));
        assert_eq!(module_of(Path::new("lib.rs")), ModPath::new());
    }
}
