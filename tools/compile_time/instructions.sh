#!/usr/bin/env bash
# How much #[retry] adds to a crate's build, counted in the instructions rustc executes
# (under callgrind) rather than in seconds: a count that the machine's other work does
# not move, for comparing two versions of the macros or the runtime on a shared machine.
#
#   bash tools/compile_time/instructions.sh [N_FUNCTIONS]     # default 200
#
# Generates the same three crates as run.sh (with #[retry], with #[tracing::instrument],
# with neither: see generate.sh; BODY=request as there), builds each once so that its
# dependencies are built, then touches it and builds it again with rustc running under
# `valgrind --tool=callgrind` for the generated crate alone. Prints each crate's total
# and each attribute's instructions per function beyond the plain crate, and their ratio.
# Instructions are not time (code generation and type checking run at different speeds),
# so this complements run.sh rather than replacing it. About 3 minutes per 100 functions.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
n="${1:-200}"
work="$root/target/compile_time_instructions"
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }
export CARGO_TARGET_DIR="$work/target" CARGO_INCREMENTAL=0
mkdir -p "$work/out"

# A RUSTC_WRAPPER that runs rustc under callgrind for the generated crates only.
wrapper="$work/wrap.sh"
cat >"$wrapper" <<'WRAP'
#!/usr/bin/env bash
rustc="$1"; shift
name="" prev=""
for a in "$@"; do
  [[ "$prev" == "--crate-name" ]] && name="$a"
  prev="$a"
done
if [[ "$name" == ct_* ]]; then
  exec valgrind --tool=callgrind --callgrind-out-file="$CALLGRIND_OUT" "$rustc" "$@" 2>/dev/null
fi
exec "$rustc" "$@"
WRAP
chmod +x "$wrapper"

kinds=(plain retry instrument)
declare -A ir
for kind in "${kinds[@]}"; do
  bash "$here/generate.sh" "$work/$kind" "ct_$kind" "$kind" "$n" "$root"
  cargo build --quiet --manifest-path "$work/$kind/Cargo.toml"
  touch "$work/$kind/src/lib.rs"
  out="$work/out/$kind.callgrind"
  rm -f "$out"
  CALLGRIND_OUT="$out" RUSTC_WRAPPER="$wrapper" cargo build --quiet --manifest-path "$work/$kind/Cargo.toml"
  ir[$kind]="$(sed -n 's/^summary: \([0-9]*\).*/\1/p' "$out")"
  printf '%-10s %15d instructions\n' "$kind" "${ir[$kind]}"
done
echo "functions: $n, bodies: ${BODY:-small}, profile: dev"
awk -v p="${ir[plain]}" -v r="${ir[retry]}" -v t="${ir[instrument]}" -v n="$n" 'BEGIN {
  rf = (r - p) / n / 1e6; tf = (t - p) / n / 1e6
  printf "per function: %.2f M #[retry], %.2f M #[instrument]\n", rf, tf
  if (tf > 0) printf "#[retry] / #[instrument]: %.3f (target: at most 0.5)\n", rf / tf
}'
