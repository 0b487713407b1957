//! The arguments of `#[retry(...)]`, parsed with their spans so that every error points
//! at its own token, and all of them reported in one compile.

use std::time::Duration;

use proc_macro2::{Span, TokenStream};
use syn::parse::{ParseStream, Parser, discouraged::Speculative};
use syn::{Ident, LitFloat, LitInt, LitStr, Path, Token};

use crate::diag::push;
use crate::duration;

mod kw {
    syn::custom_keyword!(transient);
    syn::custom_keyword!(unsent);
    syn::custom_keyword!(__idempotent);
}

/// A value with the span of the tokens it was written as.
#[derive(Clone, Copy, Debug)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

/// Which jitter the user named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Jitter {
    None,
    Full,
    Equal,
    Decorrelated,
}

/// What the function does with failures of nested `#[retry]` calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layers {
    Innermost,
    Every,
}

/// Which failures to retry.
#[derive(Clone)]
pub enum On {
    /// The error type's `Classify` impl decides.
    Transient(Span),
    /// Only failures that prove the request never left.
    Unsent(Span),
    /// A user function `fn(&E) -> bool`.
    Predicate(Path),
}

/// When a slow attempt is hedged: after a delay, or after a percentile of the function's
/// recent attempt latencies (a fraction, 0.95 for `"p95"`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HedgeAt {
    After(Duration),
    Percentile(f64),
}

/// The parsed arguments; `None` where the user left the default. A value keeps its span
/// where a later check or the generated code reports an error at it.
#[derive(Default)]
pub struct Args {
    pub deadline: Option<Spanned<Duration>>,
    pub attempts: Option<u32>,
    pub base: Option<Duration>,
    pub cap: Option<Duration>,
    pub multiplier: Option<f64>,
    pub jitter: Option<Jitter>,
    pub on: Option<On>,
    pub attempt_timeout: Option<Spanned<Duration>>,
    pub max_retry_after: Option<Duration>,
    pub uncertain_attempts: Option<u32>,
    pub budget: Option<Path>,
    pub breaker: Option<Path>,
    pub before_wait: Option<Path>,
    pub layers: Option<Layers>,
    pub key: Option<Ident>,
    pub hedge: Option<Spanned<HedgeAt>>,
    pub hedges: Option<Spanned<u32>>,
    pub krate: Option<Path>,
    /// Each key given, with the span of its name: where an error about how it combines
    /// with another key points.
    pub written: Vec<(&'static str, Span)>,
}

impl Args {
    /// The span of the key `name`'s name, if it was given.
    pub fn span_of(&self, name: &str) -> Option<Span> {
        self.written
            .iter()
            .find(|(written, _)| *written == name)
            .map(|(_, span)| *span)
    }
}

/// Parses the attribute's tokens. Every malformed argument adds an error and parsing
/// goes on at the next comma, so one compile reports them all.
pub fn parse(tokens: TokenStream) -> (Args, Option<syn::Error>) {
    let mut args = Args::default();
    let mut errors: Option<syn::Error> = None;
    let parser = |input: ParseStream| {
        while !input.is_empty() {
            if let Err(e) = parse_one(input, &mut args) {
                push(&mut errors, e);
                until_comma(input);
            }
            if input.is_empty() {
                break;
            }
            if let Err(e) = input.parse::<Token![,]>() {
                push(&mut errors, e);
                until_comma(input);
                let _ = input.parse::<Token![,]>();
            }
        }
        Ok(())
    };
    if let Err(e) = parser.parse2(tokens) {
        push(&mut errors, e);
    }
    (args, errors)
}

/// The tokens up to the next comma (or the end), consumed.
fn until_comma(input: ParseStream) -> TokenStream {
    input
        .step(|cursor| {
            let mut tokens = TokenStream::new();
            let mut rest = *cursor;
            while let Some((tt, next)) = rest.token_tree() {
                if matches!(&tt, proc_macro2::TokenTree::Punct(p) if p.as_char() == ',') {
                    break;
                }
                tokens.extend([tt]);
                rest = next;
            }
            Ok((tokens, rest))
        })
        .unwrap_or_default()
}

fn parse_one(input: ParseStream, args: &mut Args) -> syn::Result<()> {
    // `#[idempotent]` used to mark `#[retry]` by adding this argument, which a user could
    // as well write by hand to pass the idempotency check. The mark is now `#[idempotent]`
    // itself (see `idempotent.rs`); the old marker is refused, saying what to write.
    if input.peek(kw::__idempotent) {
        return Err(syn::Error::new(
            input.parse::<kw::__idempotent>()?.span,
            "`__idempotent` is not an argument of `#[retry]`; remove it, and if running the function twice is harmless, mark the function `#[idempotent]`",
        ));
    }
    let key = if input.peek(Token![crate]) {
        let token = input.parse::<Token![crate]>()?;
        Ident::new("crate", token.span)
    } else if input.peek(Ident) {
        input.call(syn::ext::IdentExt::parse_any)?
    } else {
        return Err(syn::Error::new(
            input.span(),
            format!(
                "expected an argument `key = value`; the keys are: {}",
                names()
            ),
        ));
    };
    let name = key.to_string();
    let Some(entry) = KEYS.iter().find(|entry| entry.name == name) else {
        return Err(syn::Error::new(
            key.span(),
            format!("unknown argument `{name}`; expected one of: {}", names()),
        ));
    };
    if !input.peek(Token![=]) {
        return Err(syn::Error::new(
            key.span(),
            format!("expected `{name} = ...`; {}", entry.example),
        ));
    }
    input.parse::<Token![=]>()?;
    if !(entry.parse)(input, args)? {
        return Err(syn::Error::new(
            key.span(),
            format!("duplicate argument `{name}`; give each argument once"),
        ));
    }
    args.written.push((entry.name, key.span()));
    Ok(())
}

/// One key of `#[retry(...)]`: its name, an example of its use for the errors, and how
/// its value is parsed into the arguments (`false` if the key was already given).
struct Key {
    name: &'static str,
    example: &'static str,
    parse: fn(ParseStream, &mut Args) -> syn::Result<bool>,
}

/// Sets `field` to `value` unless it is set already.
fn set<T>(field: &mut Option<T>, value: T) -> bool {
    let fresh = field.is_none();
    if fresh {
        *field = Some(value);
    }
    fresh
}

/// The keys `#[retry]` accepts, in the order the documentation lists them.
const KEYS: &[Key] = &[
    Key {
        name: "deadline",
        example: "e.g. `deadline = \"30s\"`",
        parse: |input, args| {
            Ok(set(
                &mut args.deadline,
                positive_duration(input, "deadline")?,
            ))
        },
    },
    Key {
        name: "attempts",
        example: "e.g. `attempts = 6`",
        parse: |input, args| Ok(set(&mut args.attempts, attempts(input, "attempts")?)),
    },
    Key {
        name: "base",
        example: "e.g. `base = \"200ms\"`",
        parse: |input, args| Ok(set(&mut args.base, duration(input)?.value)),
    },
    Key {
        name: "cap",
        example: "e.g. `cap = \"20s\"`",
        parse: |input, args| Ok(set(&mut args.cap, duration(input)?.value)),
    },
    Key {
        name: "multiplier",
        example: "e.g. `multiplier = 2` or `multiplier = 1.5`",
        parse: |input, args| Ok(set(&mut args.multiplier, multiplier(input)?)),
    },
    Key {
        name: "jitter",
        example: "one of `jitter = \"none\"`, `\"full\"`, `\"equal\"`, `\"decorrelated\"`",
        parse: |input, args| Ok(set(&mut args.jitter, jitter(input)?)),
    },
    Key {
        name: "on",
        example: "`on = transient`, `on = unsent`, or `on = path::to::predicate`",
        parse: |input, args| Ok(set(&mut args.on, on(input)?)),
    },
    Key {
        name: "attempt_timeout",
        example: "e.g. `attempt_timeout = \"2s\"`",
        parse: |input, args| {
            Ok(set(
                &mut args.attempt_timeout,
                positive_duration(input, "attempt_timeout")?,
            ))
        },
    },
    Key {
        name: "max_retry_after",
        example: "e.g. `max_retry_after = \"60s\"`",
        parse: |input, args| Ok(set(&mut args.max_retry_after, duration(input)?.value)),
    },
    Key {
        name: "uncertain_attempts",
        example: "e.g. `uncertain_attempts = 2`",
        parse: |input, args| {
            Ok(set(
                &mut args.uncertain_attempts,
                attempts(input, "uncertain_attempts")?,
            ))
        },
    },
    Key {
        name: "budget",
        example: "`budget = NAME`, naming a `static NAME: persevere::RetryBudget`",
        parse: |input, args| {
            let declaration =
                "static NAME: persevere::RetryBudget = persevere::RetryBudget::new();";
            let path = named(input, "budget", "a `static`", declaration)?;
            Ok(set(&mut args.budget, path))
        },
    },
    Key {
        name: "breaker",
        example: "`breaker = NAME`, naming a `static NAME: persevere::CircuitBreaker`",
        parse: |input, args| {
            let declaration =
                "static NAME: persevere::CircuitBreaker = persevere::CircuitBreaker::new();";
            let path = named(input, "breaker", "a `static`", declaration)?;
            Ok(set(&mut args.breaker, path))
        },
    },
    Key {
        name: "layers",
        example: "`layers = \"innermost\"` or `layers = \"every\"`",
        parse: |input, args| Ok(set(&mut args.layers, layers(input)?)),
    },
    Key {
        name: "before_wait",
        example: "`before_wait = path::to::hook`, a `fn(&persevere::BeforeWait<'_, E>)`",
        parse: |input, args| {
            let declaration = "fn NAME(wait: &persevere::BeforeWait<'_, E>) { ... }";
            let path = named(input, "before_wait", "a function", declaration)?;
            Ok(set(&mut args.before_wait, path))
        },
    },
    Key {
        name: "key",
        example: "`key = name`, naming the parameter of type `persevere::IdempotencyKey`",
        parse: |input, args| Ok(set(&mut args.key, key_param(input)?)),
    },
    Key {
        name: "hedge",
        example: "e.g. `hedge = \"50ms\"` (a delay) or `hedge = \"p95\"` (a percentile of recent latencies)",
        parse: |input, args| Ok(set(&mut args.hedge, hedge(input)?)),
    },
    Key {
        name: "hedges",
        example: "e.g. `hedges = 2`, from 1 to 3",
        parse: |input, args| Ok(set(&mut args.hedges, hedges(input)?)),
    },
    Key {
        name: "crate",
        example: "e.g. `crate = \"my_persevere\"`",
        parse: |input, args| {
            let lit: LitStr = input.parse().map_err(|e| {
                syn::Error::new(
                    e.span(),
                    "expected a path in a string: `crate = \"my_persevere\"`",
                )
            })?;
            Ok(set(&mut args.krate, lit.parse::<Path>()?))
        },
    },
];

/// The names of the keys, for the errors.
fn names() -> String {
    KEYS.iter()
        .map(|key| key.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The example of the key `name`.
fn example(name: &str) -> &'static str {
    KEYS.iter()
        .find(|key| key.name == name)
        .map_or("", |key| key.example)
}

fn duration(input: ParseStream) -> syn::Result<Spanned<Duration>> {
    let lit: LitStr = input.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            "expected a duration in a string, e.g. \"30s\", \"200ms\" or \"1m30s\"",
        )
    })?;
    let value = duration::parse(&lit.value()).map_err(|m| syn::Error::new(lit.span(), m))?;
    Ok(Spanned {
        value,
        span: lit.span(),
    })
}

fn positive_duration(input: ParseStream, key: &str) -> syn::Result<Spanned<Duration>> {
    let d = duration(input)?;
    if d.value.is_zero() {
        return Err(syn::Error::new(
            d.span,
            format!("`{key}` must be greater than zero; {}", example(key)),
        ));
    }
    Ok(d)
}

fn attempts(input: ParseStream, key: &str) -> syn::Result<u32> {
    let lit: LitInt = input.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            format!("expected a whole number; {}", example(key)),
        )
    })?;
    let value: u32 = lit.base10_parse().map_err(|_| {
        syn::Error::new(
            lit.span(),
            format!("`{key}` must be a whole number from 1 to 4294967295"),
        )
    })?;
    if value == 0 {
        let message = if key == "attempts" {
            "`attempts = 0` would never call the function; it counts the first call, so write `attempts = 1` for no retries".to_owned()
        } else {
            format!(
                "`{key}` must be at least 1: it counts the first call too, so write `{key} = 1` to never retry those failures"
            )
        };
        return Err(syn::Error::new(lit.span(), message));
    }
    Ok(value)
}

fn multiplier(input: ParseStream) -> syn::Result<f64> {
    let (value, span) = if input.peek(LitInt) {
        let lit: LitInt = input.parse()?;
        (lit.base10_parse::<f64>()?, lit.span())
    } else if input.peek(LitFloat) {
        let lit: LitFloat = input.parse()?;
        (lit.base10_parse::<f64>()?, lit.span())
    } else {
        return Err(syn::Error::new(
            input.span(),
            "expected a number: `multiplier = 2` or `multiplier = 1.5`",
        ));
    };
    if !value.is_finite() {
        return Err(syn::Error::new(
            span,
            "`multiplier` is not a finite number: it is too large for an `f64`; write a factor such as `multiplier = 2`",
        ));
    }
    if value < 1.0 {
        return Err(syn::Error::new(
            span,
            "`multiplier` must be at least 1: waits must not shrink from one retry to the next",
        ));
    }
    Ok(value)
}

fn jitter(input: ParseStream) -> syn::Result<Jitter> {
    const KINDS: &str = "\"none\", \"full\", \"equal\", \"decorrelated\"";
    let lit: LitStr = input.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            format!("expected the jitter in a string, one of {KINDS}"),
        )
    })?;
    match lit.value().as_str() {
        "none" => Ok(Jitter::None),
        "full" => Ok(Jitter::Full),
        "equal" => Ok(Jitter::Equal),
        "decorrelated" => Ok(Jitter::Decorrelated),
        other => Err(syn::Error::new(
            lit.span(),
            format!("unknown jitter \"{other}\"; expected one of {KINDS}"),
        )),
    }
}

fn on(input: ParseStream) -> syn::Result<On> {
    if input.peek(kw::transient) && !input.peek2(Token![::]) {
        return Ok(On::Transient(input.parse::<kw::transient>()?.span));
    }
    if input.peek(kw::unsent) && !input.peek2(Token![::]) {
        return Ok(On::Unsent(input.parse::<kw::unsent>()?.span));
    }
    let path: Path = input.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            "expected `on = transient`, `on = unsent`, or the path of a function `fn(&E) -> bool`",
        )
    })?;
    Ok(On::Predicate(path))
}

/// `key = NAME`, the path of a `static` or a function, which `declaration` declares.
/// Anything else, such as an expression (`RetryBudget::new()`, a closure), is reported
/// whole, with how to name it.
fn named(input: ParseStream, key: &str, what: &str, declaration: &str) -> syn::Result<Path> {
    let fork = input.fork();
    if let Ok(path) = fork.parse::<Path>() {
        if fork.is_empty() || fork.peek(Token![,]) {
            input.advance_to(&fork);
            return Ok(path);
        }
    }
    let span = input.span();
    let value = until_comma(input);
    let message = format!(
        "`{key}` names {what}, not an expression: declare `{declaration}` and write `{key} = NAME`"
    );
    Err(if value.is_empty() {
        syn::Error::new(span, message)
    } else {
        syn::Error::new_spanned(value, message)
    })
}

fn layers(input: ParseStream) -> syn::Result<Layers> {
    let lit: LitStr = input
        .parse()
        .map_err(|e| syn::Error::new(e.span(), format!("expected {}", example("layers"))))?;
    match lit.value().as_str() {
        "innermost" => Ok(Layers::Innermost),
        "every" => Ok(Layers::Every),
        other => Err(syn::Error::new(
            lit.span(),
            format!(
                "unknown layers \"{other}\"; expected \"innermost\" (only the innermost of nested #[retry] calls retries a failure, the default) or \"every\" (this function retries even failures a nested #[retry] call already retried)"
            ),
        )),
    }
}

fn key_param(input: ParseStream) -> syn::Result<Ident> {
    input.parse::<Ident>().map_err(|e| {
        syn::Error::new(
            e.span(),
            "expected the name of a parameter: `key = idempotency_key`",
        )
    })
}

/// `hedge = "50ms"` or `hedge = "p95"`.
fn hedge(input: ParseStream) -> syn::Result<Spanned<HedgeAt>> {
    const WHAT: &str = "a delay such as \"50ms\", or a percentile of the function's recent attempt latencies such as \"p95\"";
    let lit: LitStr = input
        .parse()
        .map_err(|e| syn::Error::new(e.span(), format!("expected {WHAT}, in a string")))?;
    let span = lit.span();
    let text = lit.value();
    let at = |value| Ok(Spanned { value, span });
    if let Some(number) = text.strip_prefix('p') {
        let not_a_percentile = || {
            syn::Error::new(
                span,
                format!(
                    "\"{text}\" is not a percentile; write `p` and a number from 50 up to (not including) 100, e.g. \"p95\" or \"p99.9\""
                ),
            )
        };
        // Digits and at most one point: no sign, exponent, `inf` or `NaN`.
        let plain = !number.is_empty()
            && number.chars().all(|c| c.is_ascii_digit() || c == '.')
            && number.matches('.').count() <= 1;
        let percent: f64 = match number.parse() {
            Ok(percent) if plain => percent,
            _ => return Err(not_a_percentile()),
        };
        if !(50.0..100.0).contains(&percent) {
            let why = if percent >= 100.0 {
                "no attempt is slower than the slowest, so no hedge would ever be sent"
            } else {
                "below the median, most calls would be sent twice"
            };
            return Err(syn::Error::new(
                span,
                format!(
                    "`hedge = \"{text}\"`: {why}; write a percentile from p50 up to (not including) p100, e.g. \"p95\" or \"p99.9\""
                ),
            ));
        }
        return at(HedgeAt::Percentile(percent / 100.0));
    }
    if let Some(number) = text.strip_prefix('P') {
        return Err(syn::Error::new(
            span,
            format!("a percentile is written with a small `p`: \"p{number}\""),
        ));
    }
    // A plain number without a unit: each fix suggested is one that compiles. Anything
    // else that reads as a number (`inf`, `1e3`, `-5`) is left to the duration's own
    // message.
    let plain = text.contains(|c: char| c.is_ascii_digit())
        && text.chars().all(|c| c.is_ascii_digit() || c == '.')
        && text.matches('.').count() <= 1;
    if let (true, Ok(value)) = (plain, text.parse::<f64>()) {
        let percentile = (50.0..100.0).contains(&value);
        // Below a millisecond, tokio's timer cannot wait: a fraction reads as seconds.
        let unit = if value >= 1.0 { "ms" } else { "s" };
        let message = match (percentile, value > 0.0) {
            (true, _) => format!(
                "\"{text}\" has no unit: write a percentile \"p{text}\" or a delay such as \"{text}ms\""
            ),
            (false, true) => {
                format!("\"{text}\" has no unit: write a delay such as \"{text}{unit}\"")
            }
            (false, false) => format!(
                "\"{text}\" has no unit, and `hedge` after no delay would send every request twice; write the time after which an attempt is slow, e.g. \"50ms\", or a percentile such as \"p95\""
            ),
        };
        return Err(syn::Error::new(span, message));
    }
    let delay = duration::parse(&text)
        .map_err(|m| syn::Error::new(span, format!("{m}; `hedge` takes {WHAT}")))?;
    if delay.is_zero() {
        return Err(syn::Error::new(
            span,
            "`hedge` after no delay would send every request twice; write the time after which an attempt is slow, e.g. \"50ms\", or a percentile such as \"p95\"",
        ));
    }
    if delay < Duration::from_millis(1) {
        return Err(syn::Error::new(
            span,
            format!(
                "`hedge = \"{text}\"` is shorter than tokio's timer can wait (1 ms): the copy would go at 1 ms all the same; write at least \"1ms\", or a percentile such as \"p95\""
            ),
        ));
    }
    at(HedgeAt::After(delay))
}

/// `hedges = N`, from 1 to 3.
fn hedges(input: ParseStream) -> syn::Result<Spanned<u32>> {
    let message =
        "`hedges` is the most copies of a slow attempt sent beside it: a whole number from 1 to 3";
    let lit: LitInt = input
        .parse()
        .map_err(|e| syn::Error::new(e.span(), message))?;
    match lit.base10_parse::<u32>() {
        Ok(n @ 1..=3) => Ok(Spanned {
            value: n,
            span: lit.span(),
        }),
        _ => Err(syn::Error::new(lit.span(), message)),
    }
}
