//! The statistics of several functions as a table.

use std::fmt;

use crate::fleet::stats::StatsSnapshot;

/// Snapshots of several functions, printed as a table by `Display`:
///
/// ```text
/// function                 requests  attempts  retries  ratio   ok  failed  1st  2nd  3rd+  breaker  budget  waited
/// shop::inventory::stock        120       131       11   0.09  118       2  112    4     2  2.410s
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report(pub Vec<StatsSnapshot>);

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self
            .0
            .iter()
            .map(|s| s.function.len())
            .max()
            .unwrap_or(0)
            .max("function".len());
        // Columns for hedges only when a function hedges; for abandoned calls, only
        // when a caller dropped one.
        let hedged = self.0.iter().any(|s| s.hedges > 0);
        let abandoned = self.0.iter().any(|s| s.abandoned > 0);
        write!(
            f,
            "{:<width$}  {:>8}  {:>8}  {:>7}  {:>5}  {:>8}  {:>6}  {:>8}  {:>8}  {:>8}  {:>7}  {:>7}  {:>9}",
            "function",
            "requests",
            "attempts",
            "retries",
            "ratio",
            "ok",
            "failed",
            "1st try",
            "2nd try",
            "3rd+ try",
            "breaker",
            "budget",
            "waited"
        )?;
        if hedged {
            write!(f, "  {:>7}  {:>7}", "hedges", "won")?;
        }
        if abandoned {
            write!(f, "  {:>9}", "abandoned")?;
        }
        writeln!(f)?;
        for s in &self.0 {
            let later: u64 = s.attempts_to_success[2..].iter().sum();
            write!(
                f,
                "{:<width$}  {:>8}  {:>8}  {:>7}  {:>5.2}  {:>8}  {:>6}  {:>8}  {:>8}  {:>8}  {:>7}  {:>7}  {:>8.3}s",
                s.function,
                s.requests,
                s.attempts,
                s.retries,
                s.retry_ratio(),
                s.succeeded,
                s.failed.total(),
                s.attempts_to_success[0],
                s.attempts_to_success[1],
                later,
                s.failed.circuit_open,
                s.failed.budget_refused,
                s.waited.as_secs_f64(),
            )?;
            if hedged {
                write!(f, "  {:>7}  {:>7}", s.hedges, s.hedges_won)?;
            }
            if abandoned {
                write!(f, "  {:>9}", s.abandoned)?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}
