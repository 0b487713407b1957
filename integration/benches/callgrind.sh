#!/usr/bin/env bash
# Instructions per call of every variant of benches/instructions.rs, under callgrind:
# (Ir at N calls - Ir at 0 calls) / N, so start-up and the warm-up call cancel out.
# Instruction counts do not move with the load on the machine, unlike wall time.
#
#   bash integration/benches/callgrind.sh [N]     # N calls per variant, default 20000
#
# Environment: CARGO_TARGET_DIR as usual; MANIFEST, the package whose `instructions`
# bench is measured, taken relative to the directory the script is run from (by default,
# and so far the only one, integration/benches/default-features/Cargo.toml: persevere
# with its default features only); CALLGRIND_KEEP=DIR keeps the raw outputs there, for
# `callgrind_annotate --inclusive=yes DIR/retry.N.out`.
set -euo pipefail
manifest="$(realpath "${MANIFEST:-$(dirname "$0")/default-features/Cargo.toml}")"
cd "$(dirname "$0")/.."

n="${1:-20000}"
keep="${CALLGRIND_KEEP:-}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

bin="$(cargo bench --manifest-path "$manifest" --bench instructions --no-run --message-format=json 2>/dev/null |
  sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)"
[[ -x "$bin" ]] || { echo "could not build integration/benches/instructions.rs" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }

# The total instructions of one run of variant $1 with $2 calls.
ir() {
  local file="$out/${1//\//_}.$2.out"
  valgrind --tool=callgrind --callgrind-out-file="$file" "$bin" "$1" "$2" >/dev/null 2>&1
  [[ -n "$keep" ]] && mkdir -p "$keep" && cp "$file" "$keep/"
  sed -n 's/^summary: \([0-9]*\).*/\1/p' "$file"
}

per_call() {
  local zero full
  zero="$(ir "$1" 0)"
  full="$(ir "$1" "$n")"
  echo $(((full - zero) / n))
}

printf '%-22s %12s %10s\n' variant instr/call "x baseline"
for group in "direct retry backon tokio-retry tower" \
  "once/hand-loop once/retry once/backon once/tokio-retry once/tower" \
  "sync/direct sync/retry" \
  "sync/once/hand-loop sync/once/retry"; do
  base=""
  for variant in $group; do
    count="$(per_call "$variant")"
    [[ -z "$base" ]] && base="$count"
    printf '%-22s %12d %10s\n' "$variant" "$count" \
      "$(awk -v a="$count" -v b="$base" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')"
  done
  echo
done
echo "N = $n calls per variant; baseline = the first variant of each block; binary: $bin"
