//! Imports run one way: each module of the macros imports only modules below it in
//! [`LAYERS`], so there is no circle and a reader can learn the crate from the bottom up.
//! (rustfmt sorts the `mod` lines of `lib.rs`, so the order lives here, where it is
//! checked.)

/// The macros' modules, lowest first.
const LAYERS: &[&str] = &[
    // Reporting errors, and reading what the user wrote.
    "diag",
    "duration",
    "item",
    "args",
    // The function, the checks, and the expansion.
    "func",
    "valid",
    "expand",
    "idempotent",
    "derive",
];

/// The modules `source` imports from its own crate, outside its tests and comments (a
/// doc link may point anywhere).
fn imports(source: &str) -> Vec<String> {
    let code: String = source
        .split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or(source)
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let name: String = code[at + "crate::".len()..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !found.contains(&name) {
            found.push(name);
        }
    }
    found
}

#[test]
fn each_module_imports_only_modules_below_it() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
    let lib = std::fs::read_to_string(format!("{dir}/lib.rs")).unwrap();
    let mut violations = Vec::new();
    for line in lib.lines() {
        let Some(name) = line
            .trim_start_matches("pub ")
            .strip_prefix("mod ")
            .and_then(|rest| rest.strip_suffix(';'))
        else {
            continue;
        };
        let position = LAYERS.iter().position(|m| *m == name);
        let position = position.unwrap_or_else(|| panic!("`{name}` is not in LAYERS"));
        let source = std::fs::read_to_string(format!("{dir}/{name}.rs")).unwrap();
        for used in imports(&source) {
            match LAYERS.iter().position(|m| *m == used) {
                Some(at) if at < position => {}
                Some(_) => violations.push(format!("{name} imports {used}, above it")),
                None => {}
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}
