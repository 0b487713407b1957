//! Nothing but the layering check, in `tests/layering.rs`.
