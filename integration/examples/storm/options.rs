//! The command line of the storm example, parsed by hand: eight flags need no crate.

use std::path::PathBuf;

pub const USAGE: &str = "\
usage: storm [--clients N] [--outage SECS] [--fail P] [--capacity RPS] [--seed S] [--svg PATH]
             [--shared] [--shed]

  --clients N       clients, each starting one call a second (default 1000)
  --outage SECS     how long the dependency fails, from t = 20 s (default 60)
  --fail P          the share of requests it fails then, each at random: 1 is a total
                    outage, 0.5 fails half of them (default 1)
  --capacity RPS    requests it serves a second at most; the rest get a 503 (default 1200)
  --seed S          seed of the jitter; the same seed gives the same run (default 1)
  --svg PATH        write a plot of the load over time, one panel per strategy
  --shared          one retry budget and breaker for the whole fleet, as if every client
                    ran in one process (default: one per client)
  --shed            put the dependency behind the server's retry admission layer, the
                    clients sending persevere's attempt header";

/// What the user asked for.
#[derive(Debug)]
pub struct Options {
    pub clients: u32,
    pub outage: u64,
    pub fail: f64,
    pub capacity: u32,
    pub seed: u64,
    pub svg: Option<PathBuf>,
    pub shared: bool,
    pub shed: bool,
}

impl Options {
    /// The options in `args`; `None` if help was asked for.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Option<Self>, String> {
        let mut options = Options {
            clients: 1000,
            outage: 60,
            fail: 1.0,
            capacity: 1200,
            seed: 1,
            svg: None,
            shared: false,
            shed: false,
        };
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
                None => (arg, None),
            };
            let mut value = || {
                inline
                    .clone()
                    .or_else(|| args.next())
                    .ok_or_else(|| format!("{flag} needs a value"))
            };
            match flag.as_str() {
                "--clients" => options.clients = number(&flag, &value()?, 1)?,
                "--outage" => options.outage = number(&flag, &value()?, 0)?,
                "--fail" => options.fail = fraction(&flag, &value()?)?,
                "--capacity" => options.capacity = number(&flag, &value()?, 1)?,
                "--seed" => options.seed = number(&flag, &value()?, 0)?,
                "--svg" => options.svg = Some(PathBuf::from(value()?)),
                "--shared" => options.shared = true,
                "--shed" => options.shed = true,
                "-h" | "--help" => return Ok(None),
                _ => return Err(format!("unknown argument `{flag}`")),
            }
        }
        Ok(Some(options))
    }
}

fn number<T: std::str::FromStr + PartialOrd + From<u8>>(
    flag: &str,
    text: &str,
    least: u8,
) -> Result<T, String> {
    match text.parse::<T>() {
        Ok(n) if n >= T::from(least) => Ok(n),
        _ => Err(format!(
            "{flag} takes a whole number of at least {least}, not `{text}`"
        )),
    }
}

fn fraction(flag: &str, text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(format!("{flag} takes a number from 0 to 1, not `{text}`")),
    }
}
