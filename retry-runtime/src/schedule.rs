//! What a call may do and when: its [`policy`], the waits between attempts
//! ([`backoff`]), the sans-I/O decision after each failure ([`state`]) and the hook called
//! before each wait ([`hook`]).

pub mod backoff;
pub(crate) mod hook;
pub(crate) mod policy;
pub(crate) mod state;
