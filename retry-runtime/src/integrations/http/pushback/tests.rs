use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue, StatusCode};
use proptest::prelude::*;

use super::*;
use crate::classify::class::Class;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        headers.append(*name, HeaderValue::from_static(value));
    }
    headers
}

fn read(pairs: &[(&'static str, &'static str)]) -> Pushback {
    Pushback::read(&headers(pairs), SystemTime::UNIX_EPOCH)
}

#[test]
fn the_wait_is_the_first_valid_header_in_the_table_s_order() {
    let all = [
        ("retry-after", "9"),
        ("x-amz-retry-after", "300"),
        ("x-ms-retry-after-ms", "200"),
        ("retry-after-ms", "100"),
    ];
    assert_eq!(read(&all).wait(), Some(ms(100)));
    assert_eq!(read(&all[..3]).wait(), Some(ms(200)));
    assert_eq!(read(&all[..2]).wait(), Some(ms(300)));
    assert_eq!(read(&all[..1]).wait(), Some(Duration::from_secs(9)));
    assert_eq!(read(&[]), Pushback::NONE);
    // A header that is not valid is passed over for the next.
    let garbled = [
        ("retry-after-ms", "soon"),
        ("x-ms-retry-after-ms", "-5"),
        ("retry-after", "2"),
    ];
    assert_eq!(read(&garbled).wait(), Some(Duration::from_secs(2)));
}

#[test]
fn millisecond_values() {
    assert_eq!(parse_millis("250"), Some(ms(250)));
    assert_eq!(parse_millis("  250 "), Some(ms(250)));
    assert_eq!(parse_millis("0"), Some(Duration::ZERO));
    // Beyond a u64: a very long wait, as for Retry-After.
    assert_eq!(parse_millis("99999999999999999999999"), Some(ms(u64::MAX)));
    for garbage in ["", " ", "-1", "+1", "1.5", "1e3", "1 2", "ms", "0x10", "١٢"] {
        assert_eq!(parse_millis(garbage), None, "{garbage:?}");
    }
}

#[test]
fn should_retry_values() {
    for (value, expected) in [
        ("true", Some(true)),
        (" TRUE ", Some(true)),
        ("False", Some(false)),
        ("false", Some(false)),
        ("yes", None),
        ("1", None),
        ("", None),
        ("falsey", None),
    ] {
        assert_eq!(parse_should_retry(value), expected, "{value:?}");
    }
}

#[test]
fn should_retry_false_wins_over_every_wait() {
    let pushback = read(&[
        ("x-should-retry", "false"),
        ("retry-after", "1"),
        ("retry-after-ms", "5"),
    ]);
    assert_eq!(pushback.wait(), None);
    assert_eq!(pushback.should_retry(), Some(false));
    for status in [429, 500, 502, 503, 504, 400] {
        let status = StatusCode::from_u16(status).unwrap();
        assert_eq!(pushback.class(status), Class::Permanent, "{status}");
    }
}

#[test]
fn should_retry_true_makes_a_permanent_failure_transient() {
    let yes = read(&[("x-should-retry", "true")]);
    assert_eq!(yes.class(StatusCode::CONFLICT), Class::Transient);
    assert_eq!(yes.class(StatusCode::BAD_REQUEST), Class::Transient);
    assert_eq!(yes.class(StatusCode::NOT_IMPLEMENTED), Class::Transient);
    // With a wait, the server's wait.
    let later = read(&[("x-should-retry", "true"), ("retry-after-ms", "40")]);
    assert_eq!(later.class(StatusCode::CONFLICT), Class::RetryAfter(ms(40)));
    // A 500 stays uncertain; a status that is not a failure is not made one.
    assert_eq!(
        later.class(StatusCode::INTERNAL_SERVER_ERROR),
        Class::Uncertain
    );
    assert_eq!(yes.class(StatusCode::OK), Class::Permanent);
    assert_eq!(yes.class(StatusCode::FOUND), Class::Permanent);
}

#[test]
fn a_wait_applies_to_a_transient_status_only() {
    let wait = read(&[("x-ms-retry-after-ms", "70")]);
    assert_eq!(
        wait.class(StatusCode::SERVICE_UNAVAILABLE),
        Class::RetryAfter(ms(70))
    );
    assert_eq!(
        wait.class(StatusCode::INTERNAL_SERVER_ERROR),
        Class::Uncertain
    );
    assert_eq!(wait.class(StatusCode::NOT_FOUND), Class::Permanent);
    assert_eq!(read(&[]).class(StatusCode::BAD_GATEWAY), Class::Transient);
}

#[test]
fn the_first_of_duplicated_headers_is_read() {
    assert_eq!(
        read(&[("retry-after-ms", "10"), ("retry-after-ms", "20")]).wait(),
        Some(ms(10))
    );
    assert_eq!(
        read(&[("x-should-retry", "true"), ("x-should-retry", "false")]).should_retry(),
        Some(true)
    );
}

#[test]
fn a_value_that_is_not_text_is_ignored() {
    let mut headers = HeaderMap::new();
    headers.insert(
        "retry-after-ms",
        HeaderValue::from_bytes(b"\xff12").unwrap(),
    );
    headers.insert(
        "x-should-retry",
        HeaderValue::from_bytes(b"tr\xffue").unwrap(),
    );
    assert_eq!(
        Pushback::read(&headers, SystemTime::UNIX_EPOCH),
        Pushback::NONE
    );
}

/// Every header the pushback reads.
const NAMES: [&str; 5] = [
    X_SHOULD_RETRY,
    RETRY_AFTER_MS,
    X_MS_RETRY_AFTER_MS,
    X_AMZ_RETRY_AFTER,
    "retry-after",
];

proptest! {
    // Arbitrary bytes in any of the headers, once or twice: no panic, and whatever is
    // read is what the value says.
    #[test]
    fn arbitrary_bytes_never_panic(
        values in proptest::collection::vec((0..NAMES.len(), proptest::collection::vec(any::<u8>(), 0..24)), 0..6),
        status in 100u16..600,
    ) {
        let mut headers = HeaderMap::new();
        for (name, bytes) in &values {
            if let Ok(value) = HeaderValue::from_bytes(bytes) {
                headers.append(NAMES[*name], value);
            }
        }
        let pushback = Pushback::read(&headers, SystemTime::UNIX_EPOCH);
        let status = StatusCode::from_u16(status).unwrap();
        let class = pushback.class(status);
        if pushback.should_retry() == Some(false) {
            prop_assert_eq!(class, Class::Permanent);
            prop_assert_eq!(pushback.wait(), None);
        }
        if let Class::RetryAfter(wait) = class {
            prop_assert_eq!(Some(wait), pushback.wait());
        }
    }

    // Numbers around and beyond every integer width, with spaces: read exactly, or a
    // very long wait past a u64.
    #[test]
    fn numbers_of_any_size_read_exactly(n in any::<u128>(), pad in 0usize..3) {
        let spaces = " ".repeat(pad);
        let text = format!("{spaces}{n}{spaces}");
        let expected = u64::try_from(n).unwrap_or(u64::MAX);
        prop_assert_eq!(parse_millis(&text), Some(Duration::from_millis(expected)));
        prop_assert_eq!(parse_millis(&format!("-{n}")), None);
    }

    #[test]
    fn signed_numbers_are_never_a_wait(n in any::<i64>()) {
        let parsed = parse_millis(&n.to_string());
        prop_assert_eq!(parsed.is_some(), n >= 0);
    }
}
