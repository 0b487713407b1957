#!/usr/bin/env bash
# Mutation testing of the runtime: `cargo mutants` changes persevere-runtime's code one
# small edit at a time and runs the workspace's tests against each; a change no test
# notices is a behaviour nothing guards.
#
#   bash tools/mutants.sh [SHARD/SHARDS] [-- extra cargo-mutants args]
#
#   bash tools/mutants.sh            # every mutant, in one go (hours on 2 cores)
#   bash tools/mutants.sh 3/20       # the fourth of 20 shards: run the shards in pieces
#   bash tools/mutants.sh 0/1 -- --file retry-runtime/src/fleet/breaker.rs
#
# The tests run are the workspace's, less the compile-fail suite (`tests/ui.rs`, the test
# named exactly `ui`: without `--exact`, `--skip ui` would skip every test with "ui" in
# its name, such as `a_quiet_budget_holds_its_floor`): each
# trybuild run rebuilds a project of its own and would make every mutant take minutes;
# the macros and their diagnostics are not what is mutated here. Results go to
# target/mutants/ (`outcomes.json`, and `missed.txt`, `caught.txt`, `unviable.txt`); the
# counts are printed at the end. Builds use the profile `mutants` (the workspace's
# `Cargo.toml`: dev without debug info, which links in about half the time). A mutant's
# tests get at least 120 s: a mutant that no other test catches reaches the doc tests,
# which are compiled again against it (31 s at most on 2 busy cores, linking with lld;
# more than 60 s with the default linker, when a miss was reported as a timeout and
# counted as caught), while a mutant that makes a test hang costs the whole limit.
#
# A run in pieces: `$out/outcomes.txt` lists each mutant tested, after its outcome
# (`caught`, `missed`, `timeout`, `unviable`). Kept (in `tools/mutants/`, say), it lets a
# later run on the same code skip what it holds and count it with its own:
#
#   RESUME=tools/mutants/outcomes.txt bash tools/mutants.sh
#
# Needs `cargo install cargo-mutants`.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo-mutants >/dev/null || { echo "cargo-mutants is not installed: cargo install cargo-mutants --locked" >&2; exit 1; }

shard="${1:-0/1}"
shift || true
[[ "${1:-}" == "--" ]] && shift

# lld, where it is installed (Debian's `lld`), links the test binaries of each mutant in
# a fraction of the time of the default linker; the results are the same.
if command -v ld.lld >/dev/null; then
  export RUSTFLAGS="${RUSTFLAGS:-} -C link-arg=-fuse-ld=lld"
fi

out=target/mutants
dir="$out/mutants.out"
resume=()
if [[ -n "${RESUME:-}" ]]; then
  saved="$(realpath "$RESUME")"
  rm -rf "$dir" "$dir.old"
  mkdir -p "$dir"
  cut -d' ' -f2- "$saved" >"$dir/previously_caught.txt"
  resume=(--iterate)
fi
mkdir -p "$out"
cargo mutants --package persevere-runtime \
  --test-package persevere-runtime,persevere,persevere-integration,persevere-check-edition-2021,persevere-check-renamed-crate \
  --shard "$shard" --output "$out" --timeout-multiplier 3 --minimum-test-timeout 120 --profile mutants \
  "${resume[@]}" "$@" -- -- --skip ui --exact || true

# Every outcome, this run's and a resumed run's, one mutant a line after its outcome.
{
  if [[ -n "${saved:-}" ]]; then cat "$saved"; fi
  for outcome in caught missed timeout unviable; do
    if [[ -f "$dir/$outcome.txt" ]]; then sed "s/^/$outcome /" "$dir/$outcome.txt"; fi
  done
} >"$out/outcomes.txt"
count() { grep -c "^$1 " "$out/outcomes.txt" || true; }
caught="$(count caught)" missed="$(count missed)" unviable="$(count unviable)" timeout="$(count timeout)"
viable=$((caught + missed + timeout))
echo
echo "shard $shard: caught $caught, missed $missed, timed out $timeout, unviable $unviable"
if ((viable > 0)); then
  awk -v c="$caught" -v t="$timeout" -v v="$viable" 'BEGIN { printf "caught (timeouts counted as caught): %.1f %% of %d viable\n", 100 * (c + t) / v, v }'
fi
grep -q "^missed " "$out/outcomes.txt" && { echo "missed:"; sed -n 's/^missed //p' "$out/outcomes.txt"; }
exit 0
