#!/usr/bin/env bash
# How much #[retry] adds to a crate's build time.
#
#   bash tools/compile_time/run.sh [N_FUNCTIONS] [RUNS]     # defaults: 200 functions, 5 runs
#
# Generates three throwaway crates (under target/compile_time/) of N async functions
# each: one with `#[persevere::retry] #[persevere::idempotent]` on every function, one
# with `#[tracing::instrument]` on every function (the comparison), and one with
# neither, the bodies the same. Builds each once (so the dependencies, persevere
# included, are built and cached), then `touch src/lib.rs` and times `cargo build` of
# the crate alone RUNS times, alternating the three, and prints the medians, the cost
# of each attribute per function (its crate's median less the plain one's, over N), and
# their ratio (target: #[retry] at most half of #[tracing::instrument]), by wall-clock
# time and by CPU time (which a shared machine's other work disturbs less). Also prints
# the time of a build with nothing to do (cargo's own fixed cost, included in all).
#
# Each timed build is from clean for the crate: incremental compilation is off
# (CARGO_INCREMENTAL=0), else a touched but unchanged file would be served from the
# incremental cache and the build would time little more than cargo itself.
#
# Environment: PROFILE=release times release builds (default: dev); BODY=request gives
# every function the body of a client call instead of a one-line one (see generate.sh);
# CARGO_TARGET_DIR is ignored: the crates share target/compile_time/target.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
n="${1:-200}"
runs="${2:-5}"
profile="${PROFILE:-dev}"
work="$root/target/compile_time"
export CARGO_TARGET_DIR="$work/target"
export CARGO_INCREMENTAL=0

kinds=(plain retry instrument)
for kind in "${kinds[@]}"; do
  bash "$here/generate.sh" "$work/$kind" "ct_$kind" "$kind" "$n" "$root"
done

now() { date +%s.%N; }

# The median of the arguments.
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# One `cargo build` of the crate in $1 after touching its source: its wall-clock seconds
# and its CPU seconds (user and system, cargo and the compiler together), as "wall cpu".
# On a shared machine the CPU time moves less: it does not count the time the build
# waited for a core.
timed_build() {
  touch "$1/src/lib.rs"
  local start end cpu
  cpu="$(mktemp)"
  start="$(now)"
  /usr/bin/time -f "%U %S" -o "$cpu" cargo build --quiet --profile "$profile" --manifest-path "$1/Cargo.toml"
  end="$(now)"
  awk -v s="$start" -v e="$end" '{ printf "%.3f %.3f\n", e - s, $1 + $2 }' "$cpu"
  rm -f "$cpu"
}

for kind in "${kinds[@]}"; do
  cargo build --quiet --profile "$profile" --manifest-path "$work/$kind/Cargo.toml"
done

# The builds alternate, so that a drift in the machine's speed (a shared VM's can move
# by a third within minutes) weighs on all alike.
declare -A med times cpu_med cpus
for _ in $(seq 1 "$runs"); do
  for kind in "${kinds[@]}"; do
    read -r wall cpu < <(timed_build "$work/$kind")
    times[$kind]+=" $wall"
    cpus[$kind]+=" $cpu"
  done
done
for kind in "${kinds[@]}"; do
  # shellcheck disable=SC2086
  med[$kind]="$(median ${times[$kind]})"
  # shellcheck disable=SC2086
  cpu_med[$kind]="$(median ${cpus[$kind]})"
  echo "$kind:${times[$kind]} s -> median ${med[$kind]} s (CPU:${cpus[$kind]} s -> median ${cpu_med[$kind]} s)"
done

noop=()
for _ in $(seq 1 "$runs"); do
  start="$(now)"
  cargo build --quiet --profile "$profile" --manifest-path "$work/plain/Cargo.toml"
  end="$(now)"
  noop+=("$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f\n", e - s }')")
done
med_noop="$(median "${noop[@]}")"

echo
echo "functions: $n, bodies: ${BODY:-small}, profile: $profile, runs: $runs (medians)"
printf 'without #[retry]: %6.3f s\n' "${med[plain]}"
printf 'with #[retry]:    %6.3f s\n' "${med[retry]}"
printf 'with #[instrument]: %4.3f s\n' "${med[instrument]}"
printf 'nothing to build: %6.3f s (cargo itself, in all)\n' "$med_noop"
awk -v p="${med[plain]}" -v r="${med[retry]}" -v t="${med[instrument]}" -v n="$n" 'BEGIN {
  printf "ratio to plain:   %6.2fx #[retry], %.2fx #[instrument]\n", r / p, t / p
  rf = (r - p) / n * 1000; tf = (t - p) / n * 1000
  printf "per function:     %6.2f ms #[retry], %.2f ms #[instrument]\n", rf, tf
  if (tf > 0) printf "#[retry] / #[instrument]: %.2f (target: at most 0.5)\n", rf / tf
}'
awk -v p="${cpu_med[plain]}" -v r="${cpu_med[retry]}" -v t="${cpu_med[instrument]}" -v n="$n" 'BEGIN {
  rf = (r - p) / n * 1000; tf = (t - p) / n * 1000
  printf "CPU per function: %6.2f ms #[retry], %.2f ms #[instrument]\n", rf, tf
  if (tf > 0) printf "CPU #[retry] / #[instrument]: %.2f\n", rf / tf
}'
