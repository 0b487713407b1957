//! Open database transactions, which a `#[retry]` function must not take: a statement
//! that fails inside a transaction aborts it, so retrying that statement (or anything
//! else inside the same transaction) fails again; PostgreSQL answers `25P02`, "current
//! transaction is aborted". The transaction is retried whole, by the function that
//! begins and commits it.

use crate::driver::handling::TransactionFacts;

/// A handle on an open database transaction. `#[retry]` on a function that takes one
/// (by value or by reference) is a compile error at that parameter, saying to put
/// `#[retry]` on the function that begins and commits the transaction instead.
///
/// This trait, the check and `#[savepoint]` exist only with the cargo feature
/// `transactions`, which the database features (`rusqlite`, `postgres`, `sqlx`) turn on:
/// a crate without them has no transaction of persevere's to catch, and does not pay the
/// check's compile time; a crate with a transaction type of its own turns it on.
///
/// Checked: the type of each parameter (and `self`), by value, `&`, `&mut` or `Box`,
/// through aliases. Not checked: a generic parameter (`T: GenericClient`, `impl
/// GenericClient`), which a transaction may be at the call, and a transaction inside
/// another value (a tuple, an `Option`, a struct's field).
///
/// The check is by type, not by name: a payment or ledger type of yours named
/// `Transaction` is not one. persevere implements this for the transactions of the
/// database crates it integrates with (`rusqlite::Transaction`, and with their features
/// tokio-postgres's and sqlx's); implement it for a transaction type of your own (a
/// wrapper around a connection that has begun one) to have it checked the same way.
///
/// A body that rolls back to a savepoint of its own before each attempt may retry
/// inside the transaction (CockroachDB's retry protocol): mark the parameter
/// `#[savepoint]` to say so.
///
/// ```compile_fail
/// use persevere::{idempotent, retry, OpenTransaction};
///
/// struct Tx;
/// impl OpenTransaction for Tx {}
///
/// #[retry]
/// #[idempotent]
/// fn transfer(tx: &mut Tx) -> std::io::Result<()> { // error: an open transaction
///     let _ = tx;
///     Ok(())
/// }
/// ```
pub trait OpenTransaction {}

#[diagnostic::do_not_recommend]
impl<T: OpenTransaction + ?Sized> OpenTransaction for &T {}
#[diagnostic::do_not_recommend]
impl<T: OpenTransaction + ?Sized> OpenTransaction for &mut T {}

#[diagnostic::do_not_recommend]
impl<T: OpenTransaction + ?Sized> OpenTransaction for Box<T> {}

#[cfg(feature = "rusqlite")]
#[diagnostic::do_not_recommend]
impl OpenTransaction for rusqlite::Transaction<'_> {}

/// A database connection that can tell, at no cost, whether a transaction is open on it:
/// a `#[retry]` function called with one inside an open transaction does not retry, and
/// returns its first failure ([`GiveUp::InsideTransaction`]), for the function that began
/// the transaction to retry it whole.
///
/// No type check can see that a connection is inside a transaction: sqlx's transaction
/// is passed on as its connection (`f(&mut *tx)`, with `f(conn: &mut PgConnection)`), and
/// rusqlite's dereferences to one (`g(&tx)`, with `g(conn: &rusqlite::Connection)`). So
/// the code `#[retry]` generates asks each parameter of a type that implements this
/// trait (by value, `&`, `&mut` or `Box`), once, at the start of the call. persevere
/// implements it for `rusqlite::Connection` (`!is_autocommit()`: a transaction begun by
/// rusqlite or by a `BEGIN` of the caller's) and, with the feature `sqlx`, for
/// `sqlx::PgConnection` (`is_in_transaction()`: a transaction begun through sqlx's
/// `begin`; one begun by a `BEGIN` statement of the caller's is not counted). A generic
/// parameter (`C: GenericClient`, `impl sqlx::PgExecutor`) is not asked, nor a
/// connection inside another value (a struct of yours): implement this trait for that
/// type to have it asked.
///
/// ```
/// use std::cell::Cell;
/// use std::io;
/// use persevere::{TransactionAware, idempotent, retry};
///
/// /// A connection of yours, which knows whether it has begun a transaction.
/// struct Db {
///     open: Cell<bool>,
/// }
///
/// impl TransactionAware for Db {
///     fn is_inside_transaction(&self) -> bool {
///         self.open.get()
///     }
/// }
///
/// #[retry(attempts = 2, base = "1ms")]
/// #[idempotent]
/// fn read(db: &Db, made: &Cell<u32>) -> io::Result<()> {
///     made.set(made.get() + 1);
///     Err(io::ErrorKind::TimedOut.into()) // transient
/// }
///
/// let (db, made) = (Db { open: Cell::new(false) }, Cell::new(0));
/// assert!(read(&db, &made).is_err());
/// assert_eq!(made.get(), 2); // retried
/// db.open.set(true);
/// assert!(read(&db, &made).is_err());
/// assert_eq!(made.get(), 3); // inside a transaction: one attempt
/// ```
///
/// [`GiveUp::InsideTransaction`]: crate::GiveUp::InsideTransaction
pub trait TransactionAware {
    /// Whether a transaction is open on this connection now.
    fn is_inside_transaction(&self) -> bool;
}

impl<T: TransactionAware + ?Sized> TransactionAware for &T {
    #[inline]
    fn is_inside_transaction(&self) -> bool {
        (**self).is_inside_transaction()
    }
}

impl<T: TransactionAware + ?Sized> TransactionAware for &mut T {
    #[inline]
    fn is_inside_transaction(&self) -> bool {
        (**self).is_inside_transaction()
    }
}

impl<T: TransactionAware + ?Sized> TransactionAware for Box<T> {
    #[inline]
    fn is_inside_transaction(&self) -> bool {
        (**self).is_inside_transaction()
    }
}

/// Inside a transaction when not in autocommit mode: SQLite's own state, which a
/// `rusqlite::Transaction`, an `unchecked_transaction` and a `BEGIN` statement all set.
#[cfg(feature = "rusqlite")]
impl TransactionAware for rusqlite::Connection {
    #[inline]
    fn is_inside_transaction(&self) -> bool {
        !self.is_autocommit()
    }
}

// What the code generated by `#[retry]` calls (re-exported by `macro_support`).

/// Probes the type `T` of a retried function's parameter: `TransactionProbe::of(&param)
/// .probe()` is, by the first inherent method that applies, an open transaction's
/// ([`InTransaction`], where `T` is an [`OpenTransaction`]), else, through `Deref`, a
/// connection's ([`ConnectionProbe::probe`], where `T` is [`TransactionAware`], asked
/// now), else any other type's ([`OtherProbe::probe`]; a generic parameter among them:
/// its type is not known to be either). All are inherent, so the generated code imports
/// no trait.
pub struct TransactionProbe<'a, T: ?Sized>(ConnectionProbe<'a, T>);

impl<'a, T: ?Sized> TransactionProbe<'a, T> {
    /// The probe of `value` and its type.
    #[inline]
    pub const fn of(value: &'a T) -> Self {
        Self(ConnectionProbe(Some(value)))
    }

    /// The probe of the type `T`, for a parameter bound by a pattern, which has no value
    /// to ask.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        Self(ConnectionProbe(None))
    }
}

impl<T: OpenTransaction + ?Sized> TransactionProbe<'_, T> {
    /// An open transaction.
    pub fn probe(&self) -> InTransaction {
        InTransaction
    }
}

impl<'a, T: ?Sized> std::ops::Deref for TransactionProbe<'a, T> {
    type Target = ConnectionProbe<'a, T>;

    #[inline]
    fn deref(&self) -> &ConnectionProbe<'a, T> {
        &self.0
    }
}

/// What a [`TransactionProbe`] of a type that is not an open transaction falls back to.
pub struct ConnectionProbe<'a, T: ?Sized>(Option<&'a T>);

impl<T: TransactionAware + ?Sized> ConnectionProbe<'_, T> {
    /// A connection, and whether it is inside an open transaction now (never, for a
    /// parameter bound by a pattern).
    #[inline]
    pub fn probe(&self) -> OnConnection {
        OnConnection(self.0.is_some_and(T::is_inside_transaction))
    }
}

impl<T: ?Sized> std::ops::Deref for ConnectionProbe<'_, T> {
    type Target = OtherProbe;

    #[inline]
    fn deref(&self) -> &OtherProbe {
        &OtherProbe
    }
}

/// What a [`ConnectionProbe`] of any other type falls back to.
pub struct OtherProbe;

impl OtherProbe {
    /// Neither an open transaction nor a connection that can tell.
    #[inline]
    pub fn probe(&self) -> NoTransaction {
        NoTransaction
    }
}

/// What the probe of an open transaction finds.
pub struct InTransaction;

/// What the probe of a connection finds: whether it was inside an open transaction.
#[derive(Clone, Copy)]
pub struct OnConnection(bool);

/// What the probe of any other type finds.
#[derive(Clone, Copy)]
pub struct NoTransaction;

impl TransactionFacts for OnConnection {
    #[inline]
    fn inside_transaction(&self) -> bool {
        self.0
    }
}

impl TransactionFacts for NoTransaction {
    #[inline]
    fn inside_transaction(&self) -> bool {
        false
    }
}

/// Reported already, at the parameter: no second error where the facts are used.
impl TransactionFacts for InTransaction {
    fn inside_transaction(&self) -> bool {
        true
    }
}

/// What a retried function's parameter must be: not an open transaction.
#[diagnostic::on_unimplemented(
    message = "`#[retry]` retries a statement inside an open transaction, which fails once the transaction is aborted",
    label = "this parameter is an open database transaction (`persevere::OpenTransaction`)",
    note = "a statement that fails inside a transaction aborts it, so running it again fails too (PostgreSQL answers 25P02); put `#[retry]` on the function that begins and commits the transaction, so each attempt runs it whole",
    note = "if the body rolls back to a savepoint of its own before each attempt (CockroachDB's retry protocol), mark the parameter `#[savepoint]`"
)]
pub trait OutsideTransaction {}

impl OutsideTransaction for NoTransaction {}
impl OutsideTransaction for OnConnection {}

/// What a parameter marked `#[savepoint]` must be: an open transaction.
#[diagnostic::on_unimplemented(
    message = "`#[savepoint]` marks a parameter that is an open transaction, and `{Self}` is not one",
    label = "not an open database transaction (`persevere::OpenTransaction`)",
    note = "`#[savepoint]` lets a `#[retry]` function take an open transaction whose body rolls back to a savepoint before each attempt; remove it from this parameter"
)]
pub trait SavepointParam {}

impl<T: OpenTransaction + ?Sized> SavepointParam for T {}

/// Checks that a parameter marked `#[savepoint]` is an open transaction.
#[inline]
pub fn savepoint<T: SavepointParam + ?Sized>(_value: &T) {}

/// Checks that a parameter is not an open transaction, and returns what its probe found.
#[inline]
pub fn outside_transaction<P: OutsideTransaction>(probe: P) -> P {
    probe
}
