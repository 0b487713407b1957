//! Retry layers: the `#[retry]` call enclosing the running code, held per thread in its
//! [`frame`]; the deadline it hands down to nested calls ([`deadline`]) and the attempt it
//! is making ([`attempt`]); deadline scopes that are not retry layers ([`scope`]).

pub mod attempt;
pub mod deadline;
pub(crate) mod frame;
pub(crate) mod scope;
