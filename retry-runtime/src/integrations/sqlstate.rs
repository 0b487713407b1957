//! PostgreSQL's SQLSTATE codes, as a retry reads them: shared by the `postgres`
//! (tokio-postgres) and `sqlx` integrations, which read the code from their own errors.

use crate::classify::class::Class;

/// The class of a failure the server reported with SQLSTATE `code`:
///
/// | SQLSTATE | name | class |
/// | --- | --- | --- |
/// | `40001` | `serialization_failure` | the transaction was rolled back: not applied |
/// | `40P01` | `deadlock_detected` | the transaction was rolled back: not applied |
/// | `57P03` | `cannot_connect_now` | unsent: the server refused the connection |
/// | `53300` | `too_many_connections` | unsent: the server refused the connection |
/// | `08001`, `08004` | could not connect, connection rejected | unsent |
/// | `40003` | `statement_completion_unknown` | uncertain |
/// | `57P01`, `57P02` | `admin_shutdown`, `crash_shutdown` | uncertain: the session ended, a COMMIT may have taken effect |
/// | other `08` codes | connection exceptions | uncertain |
/// | `57014` | `query_canceled` | transient, as the attempt cut at its limit (which `statement_timeout` races with) |
/// | anything else | constraint violations (`23505`, `23P01`...), syntax, permissions, ... | permanent |
pub(crate) fn class(code: &str) -> Class {
    match code {
        "40001" | "40P01" => Class::NotApplied,
        "57P03" | "53300" | "08001" | "08004" => Class::Unsent,
        "40003" | "57P01" | "57P02" => Class::Uncertain,
        "57014" => Class::Transient,
        _ if code.starts_with("08") => Class::Uncertain,
        _ => Class::Permanent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Every code the table names, and neighbours of each that it does not.
    #[test]
    fn the_table() {
        let table = [
            ("40001", Class::NotApplied),
            ("40P01", Class::NotApplied),
            ("57P03", Class::Unsent),
            ("53300", Class::Unsent),
            ("08001", Class::Unsent),
            ("08004", Class::Unsent),
            ("40003", Class::Uncertain),
            ("57P01", Class::Uncertain),
            ("57P02", Class::Uncertain),
            ("08006", Class::Uncertain),
            ("08000", Class::Uncertain),
            ("08P01", Class::Uncertain),
            ("57014", Class::Transient),
            // Rolled back too, but for a reason another run meets again.
            ("40002", Class::Permanent),
            ("40000", Class::Permanent),
            ("25P02", Class::Permanent),
            ("23505", Class::Permanent),
            ("23P01", Class::Permanent),
            ("23503", Class::Permanent),
            ("42601", Class::Permanent),
            ("53200", Class::Permanent),
            ("55P03", Class::Permanent),
            ("57000", Class::Permanent),
            ("", Class::Permanent),
        ];
        for (code, expected) in table {
            assert_eq!(class(code), expected, "{code}");
        }
    }
}
