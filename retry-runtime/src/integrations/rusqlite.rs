//! SQLite through rusqlite: a busy or locked database is transient, everything else
//! permanent. Enabled by the `rusqlite` cargo feature.
//!
//! SQLite answers `SQLITE_BUSY` when another connection holds a lock it needs, and
//! `SQLITE_LOCKED` when a conflict is within the same connection's shared cache: both
//! clear when the other writer finishes, which is what a retry with backoff waits for.
//! A constraint violation, a malformed statement or a full disk does not.

use crate::classify::class::{Class, Classify};

/// `SQLITE_BUSY` and `SQLITE_LOCKED` (with their extended codes) are transient; all
/// other errors, constraint violations among them, are permanent.
impl Classify for rusqlite::Error {
    fn classify(&self) -> Class {
        match self.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                Class::Transient
            }
            _ => Class::Permanent,
        }
    }
}
