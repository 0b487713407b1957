//! What a retried function brings to the driver besides its policy: its return type (an
//! [`Outcome`]), what each failure means, how the events show it, and its own hooks.
//!
//! Everything here is chosen per function at compile time and is zero-sized except the
//! classifier, a function pointer: a hook is a function item, and an unused hook is
//! [`Unused`], so a function pays nothing for the keys it does not set. What its
//! connection parameters said of an open transaction at the call's start
//! ([`TransactionFacts`]) is a `bool` per connection, and nothing for any other
//! parameter.

use std::fmt;
use std::marker::PhantomData;

use crate::classify::class::Class;
use crate::classify::timed_out::AttemptTimedOut;
use crate::fleet::breaker::CircuitOpen;
use crate::schedule::hook::BeforeWait;

/// The return type of a retried function: a `Result`.
#[diagnostic::on_unimplemented(
    message = "`#[retry]` needs a function that returns `Result`, not `{Self}`",
    label = "a retried function must return `Result<T, E>`",
    note = "only an `Err` can be retried; declare the function as `-> Result<T, E>`"
)]
pub trait Outcome {
    /// The error type.
    type Err;
    /// The failure, if this outcome is one.
    fn failure(&self) -> Option<&Self::Err>;
    /// An outcome that fails with `error`.
    fn from_err(error: Self::Err) -> Self;
}

impl<T, E> Outcome for Result<T, E> {
    type Err = E;

    #[inline]
    fn failure(&self) -> Option<&E> {
        self.as_ref().err()
    }

    fn from_err(error: E) -> Self {
        Err(error)
    }
}

/// An error as the events show it: through `Display` if it has one, else `Debug`, else
/// its type's name.
pub enum Shown<'a> {
    /// An error that implements `Display`.
    Display(&'a dyn fmt::Display),
    /// An error that implements `Debug` only.
    Debug(&'a dyn fmt::Debug),
    /// An error that implements neither: its type's name.
    Opaque(&'static str),
}

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shown::Display(e) => e.fmt(f),
            Shown::Debug(e) => e.fmt(f),
            Shown::Opaque(name) => write!(f, "an error of type `{name}`"),
        }
    }
}

/// How the events show the errors of type `E`: a zero-sized choice, made where the type
/// is known.
pub trait ShowError<E> {
    /// `error` as the events show it.
    fn show(error: &E) -> Shown<'_>;
}

/// Shows an error through its `Display`.
#[derive(Clone, Copy, Debug)]
pub struct ViaDisplay;

/// Shows an error through its `Debug`.
#[derive(Clone, Copy, Debug)]
pub struct ViaDebug;

/// Shows an error by its type's name.
#[derive(Clone, Copy, Debug)]
pub struct ViaName;

impl<E: fmt::Display> ShowError<E> for ViaDisplay {
    fn show(error: &E) -> Shown<'_> {
        Shown::Display(error)
    }
}

impl<E: fmt::Debug> ShowError<E> for ViaDebug {
    fn show(error: &E) -> Shown<'_> {
        Shown::Debug(error)
    }
}

impl<E> ShowError<E> for ViaName {
    fn show(_: &E) -> Shown<'_> {
        Shown::Opaque(std::any::type_name::<E>())
    }
}

/// A hook the function does not have.
#[derive(Clone, Copy, Debug)]
pub struct Unused;

/// Makes the outcome of a call refused by an open circuit breaker.
pub trait OnOpen<R> {
    /// The outcome for a call refused with `open`.
    fn open(&self, open: CircuitOpen) -> R;
}

impl<R, F: Fn(CircuitOpen) -> R> OnOpen<R> for F {
    fn open(&self, open: CircuitOpen) -> R {
        self(open)
    }
}

impl<R> OnOpen<R> for Unused {
    fn open(&self, _: CircuitOpen) -> R {
        unreachable!("only a policy with a breaker refuses a call, and it has a conversion")
    }
}

/// Makes the outcome of an attempt cut by its time limit.
pub trait OnTimeout<R> {
    /// The outcome of an attempt cut by `timeout`.
    fn timed_out(&self, timeout: AttemptTimedOut) -> R;
}

impl<R, F: Fn(AttemptTimedOut) -> R> OnTimeout<R> for F {
    fn timed_out(&self, timeout: AttemptTimedOut) -> R {
        self(timeout)
    }
}

/// A blocking function's: only an async attempt is cut, and every async function has a
/// conversion (the macro and `retry_fn` require one).
impl<R> OnTimeout<R> for Unused {
    fn timed_out(&self, _: AttemptTimedOut) -> R {
        unreachable!("only an async attempt is cut, and an async function has a conversion")
    }
}

/// Called before each wait (`before_wait = hook`).
pub trait OnWait<E> {
    /// Tells the hook of the coming wait.
    fn before_wait(&self, wait: &BeforeWait<'_, E>);
}

impl<E, F: Fn(&BeforeWait<'_, E>)> OnWait<E> for F {
    fn before_wait(&self, wait: &BeforeWait<'_, E>) {
        self(wait)
    }
}

impl<E> OnWait<E> for Unused {
    fn before_wait(&self, _: &BeforeWait<'_, E>) {}
}

/// What a function's parameters said, at the start of the call, of an open database
/// transaction: whether one of them is a connection inside one. Made by the code
/// `#[retry]` generates, from a probe of each parameter (`integrations/transaction.rs`):
/// `()` for none, a pair for each parameter probed, a connection's answer a `bool`, any
/// other parameter's nothing.
pub trait TransactionFacts {
    /// Whether a connection among the parameters is inside an open transaction.
    fn inside_transaction(&self) -> bool;
}

impl TransactionFacts for () {
    #[inline]
    fn inside_transaction(&self) -> bool {
        false
    }
}

impl<A: TransactionFacts, B: TransactionFacts> TransactionFacts for (A, B) {
    #[inline]
    fn inside_transaction(&self) -> bool {
        self.0.inside_transaction() || self.1.inside_transaction()
    }
}

/// A function's [`Handling`], as the driver asks it: not generic over the
/// function, so that the driver's loop is compiled once per return type.
pub(crate) trait ErasedHandling<R: Outcome> {
    /// What a failure means.
    fn classify(&self, error: &R::Err) -> Class;
    /// The failure as the events show it.
    fn show<'e>(&self, error: &'e R::Err) -> Shown<'e>;
    /// The outcome of a call refused by the breaker.
    fn circuit_open(&self, open: CircuitOpen) -> R;
    /// The outcome of an attempt cut by its time limit.
    fn timed_out(&self, timeout: AttemptTimedOut) -> R;
    /// Called before each wait.
    fn before_wait(&self, wait: &BeforeWait<'_, R::Err>);
    /// Whether the call began inside an open transaction, as a connection parameter
    /// said: then it does not retry (see [`GiveUp::InsideTransaction`]).
    ///
    /// [`GiveUp::InsideTransaction`]: crate::GiveUp::InsideTransaction
    fn inside_transaction(&self) -> bool;
}

/// One function's treatment of its failures, whose error type is `E`: its classifier,
/// how its errors are shown, its hooks (each a function or [`Unused`]), and what its
/// connection parameters said of an open transaction (`X`, see [`TransactionFacts`]).
///
/// Generic over the error type rather than the return type, and with no bounds of its
/// own, so that a return type that is not a `Result` is reported once, where the driver
/// requires an [`Outcome`].
pub struct Handling<E, S, O, T, W, X = ()> {
    classify: fn(&E) -> Class,
    show: PhantomData<S>,
    on_open: O,
    on_timeout: T,
    before_wait: W,
    transactions: X,
}

impl<E, S, O, T, W> Handling<E, S, O, T, W> {
    /// `classify` says what a failure means and `show` how the events show it; `on_open`
    /// makes the outcome of a call the breaker refuses, `on_timeout` that of an attempt
    /// cut by its time limit, and `before_wait` is called before each wait.
    #[inline]
    pub fn new(
        classify: fn(&E) -> Class,
        show: S,
        on_open: O,
        on_timeout: T,
        before_wait: W,
    ) -> Self {
        let _ = show;
        Self {
            classify,
            show: PhantomData,
            on_open,
            on_timeout,
            before_wait,
            transactions: (),
        }
    }

    /// The same handling, for a call whose parameters said `facts` of an open
    /// transaction, at its start.
    #[inline]
    pub fn with_transactions<X: TransactionFacts>(self, facts: X) -> Handling<E, S, O, T, W, X> {
        Handling {
            classify: self.classify,
            show: PhantomData,
            on_open: self.on_open,
            on_timeout: self.on_timeout,
            before_wait: self.before_wait,
            transactions: facts,
        }
    }
}

impl<E, S, O, T, W, X> Handling<E, S, O, T, W, X> {
    /// The classifier: what a failure means.
    pub(crate) fn classifier(&self) -> fn(&E) -> Class {
        self.classify
    }
}

impl<R: Outcome, S, O, T, W, X> ErasedHandling<R> for Handling<R::Err, S, O, T, W, X>
where
    S: ShowError<R::Err>,
    O: OnOpen<R>,
    T: OnTimeout<R>,
    W: OnWait<R::Err>,
    X: TransactionFacts,
{
    #[inline]
    fn classify(&self, error: &R::Err) -> Class {
        (self.classify)(error)
    }

    fn show<'e>(&self, error: &'e R::Err) -> Shown<'e> {
        S::show(error)
    }

    fn circuit_open(&self, open: CircuitOpen) -> R {
        self.on_open.open(open)
    }

    fn timed_out(&self, timeout: AttemptTimedOut) -> R {
        self.on_timeout.timed_out(timeout)
    }

    fn before_wait(&self, wait: &BeforeWait<'_, R::Err>) {
        self.before_wait.before_wait(wait)
    }

    #[inline]
    fn inside_transaction(&self) -> bool {
        self.transactions.inside_transaction()
    }
}
