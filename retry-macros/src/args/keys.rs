//! The keys `#[retry]` accepts, each with its example and the grammar of its value.

use crate::args::failures::{layers, on};
use crate::args::hedge::{hedge, hedges};
use crate::args::key::{Key, set};
use crate::args::named::{key_param, krate, named};
use crate::args::schedule::{attempts, duration, jitter, multiplier, positive_duration};

/// The keys `#[retry]` accepts, in the order the documentation lists them.
pub const KEYS: &[Key] = &[
    Key {
        name: "deadline",
        example: "e.g. `deadline = \"30s\"`",
        parse: |key, input, args| Ok(set(&mut args.deadline, positive_duration(input, key)?)),
    },
    Key {
        name: "attempts",
        example: "e.g. `attempts = 6`",
        parse: |key, input, args| Ok(set(&mut args.attempts, attempts(input, key)?)),
    },
    Key {
        name: "base",
        example: "e.g. `base = \"200ms\"`",
        parse: |_, input, args| Ok(set(&mut args.base, duration(input)?.value)),
    },
    Key {
        name: "cap",
        example: "e.g. `cap = \"20s\"`",
        parse: |_, input, args| Ok(set(&mut args.cap, duration(input)?.value)),
    },
    Key {
        name: "multiplier",
        example: "e.g. `multiplier = 2` or `multiplier = 1.5`",
        parse: |_, input, args| Ok(set(&mut args.multiplier, multiplier(input)?)),
    },
    Key {
        name: "jitter",
        example: "one of `jitter = \"none\"`, `\"full\"`, `\"equal\"`, `\"decorrelated\"`",
        parse: |_, input, args| Ok(set(&mut args.jitter, jitter(input)?)),
    },
    Key {
        name: "on",
        example: "`on = transient`, `on = unsent`, or `on = path::to::predicate`",
        parse: |_, input, args| Ok(set(&mut args.on, on(input)?)),
    },
    Key {
        name: "attempt_timeout",
        example: "e.g. `attempt_timeout = \"2s\"`",
        parse: |key, input, args| {
            Ok(set(
                &mut args.attempt_timeout,
                positive_duration(input, key)?,
            ))
        },
    },
    Key {
        name: "max_retry_after",
        example: "e.g. `max_retry_after = \"60s\"`",
        parse: |_, input, args| Ok(set(&mut args.max_retry_after, duration(input)?.value)),
    },
    Key {
        name: "uncertain_attempts",
        example: "e.g. `uncertain_attempts = 2`",
        parse: |key, input, args| Ok(set(&mut args.uncertain_attempts, attempts(input, key)?)),
    },
    Key {
        name: "budget",
        example: "`budget = NAME`, naming a `static NAME: persevere::RetryBudget`",
        parse: |_, input, args| {
            let declaration =
                "static NAME: persevere::RetryBudget = persevere::RetryBudget::new();";
            let path = named(input, "budget", "a `static`", declaration)?;
            Ok(set(&mut args.budget, path))
        },
    },
    Key {
        name: "breaker",
        example: "`breaker = NAME`, naming a `static NAME: persevere::CircuitBreaker`",
        parse: |_, input, args| {
            let declaration =
                "static NAME: persevere::CircuitBreaker = persevere::CircuitBreaker::new();";
            let path = named(input, "breaker", "a `static`", declaration)?;
            Ok(set(&mut args.breaker, path))
        },
    },
    Key {
        name: "layers",
        example: "`layers = \"innermost\"` or `layers = \"every\"`",
        parse: |key, input, args| Ok(set(&mut args.layers, layers(input, key)?)),
    },
    Key {
        name: "before_wait",
        example: "`before_wait = path::to::hook`, a `fn(&persevere::BeforeWait<'_, E>)`",
        parse: |_, input, args| {
            let declaration = "fn NAME(wait: &persevere::BeforeWait<'_, E>) { ... }";
            let path = named(input, "before_wait", "a function", declaration)?;
            Ok(set(&mut args.before_wait, path))
        },
    },
    Key {
        name: "key",
        example: "`key = name`, naming the parameter of type `persevere::IdempotencyKey`",
        parse: |_, input, args| Ok(set(&mut args.key, key_param(input)?)),
    },
    Key {
        name: "hedge",
        example: "e.g. `hedge = \"50ms\"` (a delay) or `hedge = \"p95\"` (a percentile of recent latencies)",
        parse: |_, input, args| Ok(set(&mut args.hedge, hedge(input)?)),
    },
    Key {
        name: "hedges",
        example: "e.g. `hedges = 2`, from 1 to 3",
        parse: |_, input, args| Ok(set(&mut args.hedges, hedges(input)?)),
    },
    Key {
        name: "crate",
        example: "e.g. `crate = \"my_persevere\"`",
        parse: |_, input, args| Ok(set(&mut args.krate, krate(input)?)),
    },
];

/// The names of the keys, for the errors.
pub fn names() -> String {
    KEYS.iter()
        .map(|key| key.name)
        .collect::<Vec<_>>()
        .join(", ")
}
