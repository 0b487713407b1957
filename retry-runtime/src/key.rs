//! Idempotency keys: what makes a write safe to repeat.

use std::fmt;
use std::str::FromStr;

use rand::Rng;

/// A random 128-bit key that identifies one logical operation across all its attempts.
///
/// A server that stores the key with the result of the first attempt that reached it can
/// answer a repeated attempt with that result instead of doing the work twice: this is
/// what makes a payment or an insert safe to retry. The key must be made once per
/// operation, before the first attempt, and every attempt must carry it unchanged, which
/// is what `#[retry(key = ...)]` enforces: the key is a parameter, so each attempt of one
/// call sees the same value.
///
/// It is written as a version-4 UUID, a form servers commonly accept in an
/// `Idempotency-Key` header:
///
/// ```
/// use persevere::IdempotencyKey;
///
/// let key = IdempotencyKey::new();
/// let text = key.to_string();
/// assert_eq!(text.len(), 36);
/// assert_eq!(text.parse::<IdempotencyKey>(), Ok(key));
/// assert_ne!(IdempotencyKey::new(), key);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdempotencyKey(u128);

impl IdempotencyKey {
    /// A new key from the thread's cryptographically secure generator.
    pub fn new() -> Self {
        Self::from_u128(rand::rng().random())
    }

    /// The key with these 128 bits, the version and variant bits of a version-4 UUID
    /// forced, so that a key read back from its text is equal to the original.
    pub const fn from_u128(bits: u128) -> Self {
        const VERSION_MASK: u128 = 0xF << 76;
        const VARIANT_MASK: u128 = 0b11 << 62;
        Self((bits & !VERSION_MASK & !VARIANT_MASK) | (0x4 << 76) | (0b10 << 62))
    }

    /// The 128 bits of the key.
    pub const fn as_u128(&self) -> u128 {
        self.0
    }
}

impl Default for IdempotencyKey {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            (b >> 96) as u32,
            (b >> 80) as u16,
            (b >> 64) as u16,
            (b >> 48) as u16,
            b & 0xFFFF_FFFF_FFFF
        )
    }
}

impl fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IdempotencyKey({self})")
    }
}

/// The error of parsing an [`IdempotencyKey`] from text that is not a version-4 UUID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseKeyError;

impl fmt::Display for ParseKeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an idempotency key is a version-4 UUID: 8-4-4-4-12 hexadecimal digits")
    }
}

impl std::error::Error for ParseKeyError {}

impl FromStr for IdempotencyKey {
    type Err = ParseKeyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let groups: Vec<&str> = s.split('-').collect();
        let lengths = [8, 4, 4, 4, 12];
        if groups.len() != lengths.len()
            || groups
                .iter()
                .zip(lengths)
                .any(|(g, n)| g.len() != n || !g.bytes().all(|c| c.is_ascii_hexdigit()))
        {
            return Err(ParseKeyError);
        }
        let bits = u128::from_str_radix(&groups.concat(), 16).map_err(|_| ParseKeyError)?;
        let key = Self::from_u128(bits);
        if key.0 == bits {
            Ok(key)
        } else {
            Err(ParseKeyError)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A key's bits, as a caller stores them (a database column of 128 bits), make the
    // same key again; its `Debug` names it. Can fail: bits that came back as 0 or 1, or
    // a `Debug` that wrote nothing.
    #[test]
    fn bits_round_trip_and_debug_names_the_key() {
        let key = IdempotencyKey::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        assert_eq!(key.as_u128(), 0x0123_4567_89ab_4def_8123_4567_89ab_cdef);
        assert_eq!(IdempotencyKey::from_u128(key.as_u128()), key);
        assert_eq!(
            format!("{key:?}"),
            "IdempotencyKey(01234567-89ab-4def-8123-456789abcdef)"
        );
    }

    #[test]
    fn text_round_trip_and_uuid_v4_shape() {
        for _ in 0..100 {
            let key = IdempotencyKey::new();
            let text = key.to_string();
            assert_eq!(&text[14..15], "4", "{text}");
            assert!(matches!(&text[19..20], "8" | "9" | "a" | "b"), "{text}");
            assert_eq!(text.parse(), Ok(key));
        }
    }

    #[test]
    fn malformed_text_is_refused() {
        for bad in [
            "",
            "not-a-key",
            "00000000-0000-0000-0000-000000000000", // not version 4
            "0000000-00000-4000-8000-000000000000",
            "g0000000-0000-4000-8000-000000000000",
            "+0000000-0000-4000-8000-000000000000",
        ] {
            assert_eq!(bad.parse::<IdempotencyKey>(), Err(ParseKeyError), "{bad}");
        }
        assert!(
            "00000000-0000-4000-8000-000000000000"
                .parse::<IdempotencyKey>()
                .is_ok()
        );
    }

    // The error says what a key must look like, for the message a caller passes on.
    #[test]
    fn the_parse_error_says_what_a_key_is() {
        let error = "not-a-key".parse::<IdempotencyKey>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "an idempotency key is a version-4 UUID: 8-4-4-4-12 hexadecimal digits"
        );
    }
}
