//! Imports run one way: each module of the runtime imports only modules below it in
//! [`LAYERS`], so there is no circle and a reader can learn the crate from the bottom up.
//! (rustfmt sorts the `mod` lines of `lib.rs`, so the order lives here, where it is
//! checked.)

/// The runtime's modules, lowest first.
const LAYERS: &[&str] = &[
    // Time, and the vocabulary every other module speaks.
    "clock",
    "classify",
    "give_up",
    "hook",
    "key",
    "rng",
    "limit",
    "timeout",
    "window",
    "latency",
    // The layer nested calls see, in a thread-local.
    "layer",
    // Shared state per dependency and per function.
    "budget",
    "breaker",
    "batch",
    "stats",
    // What a call may do, and the sans-I/O state machine that decides.
    "policy",
    "backoff",
    "state",
    "telemetry",
    // One call's state, the function's own handling, and the driver.
    "call",
    "handling",
    "hedge",
    "run",
    "step",
    "hedging",
    "retry_fn",
    // What users and generated code reach.
    "deadline",
    "attempt",
    "http",
    "reqwest",
    "rusqlite",
    "tower",
    "macro_support",
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
