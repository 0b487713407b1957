//! Duration literals: `"30s"`, `"200ms"`, `"1.5s"`, `"1m30s"`, checked when the macro
//! expands.

use std::time::Duration;

const UNITS: &str = "ns, us, ms, s, m, h";

/// Parses a duration written as one or more `<number><unit>` parts, the number a whole
/// or decimal number and the unit one of `ns`, `us`, `ms`, `s`, `m`, `h`: each unit at
/// most once, the largest first, and no spaces, so that a duration reads one way only.
/// A refusal says what to write instead.
pub fn parse(text: &str) -> Result<Duration, String> {
    let example = "write a number and a unit, e.g. \"30s\", \"200ms\" or \"1m30s\"";
    if text.trim().is_empty() {
        return Err(format!("empty duration; {example}"));
    }
    if text.trim_start().starts_with('-') {
        return Err(format!(
            "a duration cannot be negative: \"{text}\"; {example}"
        ));
    }
    if text.contains(char::is_whitespace) {
        let joined: String = text.split_whitespace().collect();
        return Err(match parse(&joined) {
            Ok(_) => format!("a duration has no spaces: write \"{joined}\""),
            Err(_) => format!("a duration has no spaces: \"{text}\"; {example}"),
        });
    }
    let parts = parts(text, example)?;
    let mut total: u128 = 0;
    for part in &parts {
        total = total
            .checked_add(part.nanos)
            .ok_or_else(|| too_long(text))?;
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| too_long(text))?;
    let duration = Duration::new(secs, (total % 1_000_000_000) as u32);
    for pair in parts.windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        if before.scale == after.scale {
            return Err(format!(
                "the unit `{}` is written twice in \"{text}\"; write each unit once: \"{}\"",
                after.unit,
                canonical(total)
            ));
        }
        if before.scale < after.scale {
            return Err(format!(
                "`{}` comes after `{}` in \"{text}\"; write the largest unit first: \"{}\"",
                after.unit,
                before.unit,
                canonical(total)
            ));
        }
    }
    Ok(duration)
}

/// One `<number><unit>` part of a duration, in nanoseconds.
struct Part<'a> {
    unit: &'a str,
    scale: u128,
    nanos: u128,
}

/// The parts of a duration with no spaces, in the order written.
fn parts<'a>(text: &'a str, example: &str) -> Result<Vec<Part<'a>>, String> {
    let mut parts = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_len);
        if number.is_empty() {
            return Err(format!(
                "expected a number at `{rest}` in \"{text}\"; {example}"
            ));
        }
        if number.matches('.').count() > 1 || !number.contains(|c: char| c.is_ascii_digit()) {
            return Err(format!(
                "malformed number `{number}` in \"{text}\"; {example}"
            ));
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "µs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => {
                return Err(format!(
                    "missing unit after `{number}` in \"{text}\"; the units are {UNITS}"
                ));
            }
            other => {
                return Err(format!(
                    "unknown unit `{other}` in \"{text}\"; the units are {UNITS}"
                ));
            }
        };
        let nanos = scaled(number, scale).ok_or_else(|| too_long(text))?;
        parts.push(Part { unit, scale, nanos });
        rest = next;
    }
    Ok(parts)
}

/// `nanos` written the one accepted way: each unit once, the largest first, whole
/// numbers (`"1h30s"`, `"2s500ms"`).
fn canonical(mut nanos: u128) -> String {
    if nanos == 0 {
        return "0s".to_owned();
    }
    let mut out = String::new();
    for (unit, scale) in [
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
        ("ns", 1),
    ] {
        if nanos >= scale {
            out.push_str(&format!("{}{unit}", nanos / scale));
            nanos %= scale;
        }
    }
    out
}

fn too_long(text: &str) -> String {
    format!("the duration \"{text}\" is too long to represent")
}

/// `number * scale` in nanoseconds, exactly, for a decimal `number`; a fraction finer
/// than a nanosecond is dropped.
fn scaled(number: &str, scale: u128) -> Option<u128> {
    let number = number.replace('_', "");
    let (whole, fraction) = number.split_once('.').unwrap_or((&number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let mut nanos = whole.checked_mul(scale)?;
    let mut unit = scale;
    for digit in fraction.chars() {
        unit /= 10;
        nanos = nanos.checked_add(u128::from(digit.to_digit(10)?) * unit)?;
    }
    Some(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn accepted() {
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("200ms"), Ok(ms(200)));
        assert_eq!(parse("1.5s"), Ok(ms(1500)));
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse("7ns"), Ok(Duration::from_nanos(7)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
        assert_eq!(parse("1_000ms"), Ok(ms(1000)));
        assert_eq!(parse(".5s"), Ok(ms(500)));
        assert_eq!(parse("1h2m3s4ms5us6ns"), Ok(Duration::new(3723, 4_005_006)));
        assert_eq!(parse("1.5m30s"), Ok(Duration::from_secs(120)));
    }

    #[test]
    fn refused() {
        for (text, wanted) in [
            ("", "empty duration"),
            ("   ", "empty duration"),
            ("-1s", "cannot be negative"),
            ("30x", "unknown unit `x`"),
            ("30", "missing unit after `30`"),
            ("s", "expected a number"),
            ("1.2.3s", "malformed number `1.2.3`"),
            ("_s", "malformed number `_`"),
            ("._s", "malformed number `._`"),
            ("99999999999999999999999h", "too long"),
            (
                "1s1s",
                "the unit `s` is written twice in \"1s1s\"; write each unit once: \"2s\"",
            ),
            ("1m30s20s", "the unit `s` is written twice"),
            (
                "30s1h",
                "`h` comes after `s` in \"30s1h\"; write the largest unit first: \"1h30s\"",
            ),
            ("500ms1s", "write the largest unit first: \"1s500ms\""),
            ("1 ms", "a duration has no spaces: write \"1ms\""),
            (" 30s", "a duration has no spaces: write \"30s\""),
            ("1m 30s", "a duration has no spaces: write \"1m30s\""),
            (
                "30 x",
                "a duration has no spaces: \"30 x\"; write a number and a unit",
            ),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(wanted), "{text:?}: {err}");
        }
    }
}
