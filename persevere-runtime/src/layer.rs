//! Retry layers: the `#[retry]` call enclosing the running code, held per thread in its
//! [`frame`]; the deadline it hands down to nested calls ([`deadline`]) and the attempt it
//! is making ([`attempt`]).

pub mod attempt;
pub mod deadline;
pub(crate) mod frame;
