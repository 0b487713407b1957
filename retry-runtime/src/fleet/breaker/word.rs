//! A breaker's state in one atomic word: the state (2 bits), the number of the latest
//! half-open spell, and a count (of consecutive failures, or of probes out).

pub(super) const CLOSED: u64 = 0;
pub(super) const OPEN: u64 = 1;
pub(super) const HALF_OPEN: u64 = 2;
const SHIFT: u32 = 62;
const SPELL_SHIFT: u32 = 32;
pub(super) const COUNT_MASK: u64 = (1 << SPELL_SHIFT) - 1;
/// Half-open spells are numbered modulo this, so that a probe's number fits in a byte
/// beside the closed breaker's permit. A probe still out 254 spells later (each lasts an
/// open time and a probe's answer) is taken for a probe of the spell it comes back in,
/// the one case where a stale probe decides.
pub(super) const SPELLS: u64 = 254;

pub(super) const fn word(state: u64, spell: u64, count: u64) -> u64 {
    (state << SHIFT) | (spell << SPELL_SHIFT) | count
}

pub(super) const fn state_of(word: u64) -> u64 {
    word >> SHIFT
}

/// The number of the latest half-open spell, below [`SPELLS`].
pub(super) const fn spell_of(word: u64) -> u64 {
    (word >> SPELL_SHIFT) & ((1 << (SHIFT - SPELL_SHIFT)) - 1)
}

/// Whether the breaker whose state word is `current` is half-open in spell `spell`.
pub(super) const fn in_spell(current: u64, spell: u64) -> bool {
    state_of(current) == HALF_OPEN && spell_of(current) == spell
}

pub(super) const fn count_of(word: u64) -> u64 {
    word & COUNT_MASK
}
