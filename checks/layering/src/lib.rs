//! Nothing but the house rules of the runtime and the macros, in `tests/`.
