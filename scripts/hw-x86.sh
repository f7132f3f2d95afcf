#!/usr/bin/env bash
# The hardware-PMU check for x86_64: builds and runs every hardware test (tests/tests/hw_*.rs, printing what
# each counted) and the counter-read and rdpmc rows of the benchmark report, and fails unless all of them ran.
# The CI machine and the kernel matrix's x86 guests have no PMU, so this is how x86 hardware counting, rdpmc
# and PMU-interrupt sampling get proven: run it on a machine that has one, from the repository's root or anywhere.
#
#   sudo scripts/hw-x86.sh               (about 8 minutes at most, most of it building)
#   scripts/hw-x86.sh --build-only       (any x86_64 machine, PMU or not: the build steps alone)
#
# Needs: Linux on x86_64 with a hardware PMU (bare metal, or a VM with a virtual PMU: `ls /sys/bus/event_source/
# devices` lists `cpu`, or `cpu_core` and `cpu_atom`); a Rust toolchain (rustup's stable, 1.87 or newer: cargo,
# rustc, and the C linker `cc` rustc links with); crates.io reachable (or the dependencies vendored); root, or
# perf_event_paranoid <= 0, for the kernel-space rows (a skip is a failure here). Nothing else: no perf, no
# libclang (xtask and bindgen are not built).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
start=$(date +%s)
die() { printf '\nhw-x86: FAILED: %s\n' "$*" >&2; exit 1; }
elapsed() { echo "$(( $(date +%s) - start )) s"; }

build_only=false
case "${1:-}" in
  "") ;;
  --build-only) build_only=true ;;
  *) echo "usage: $0 [--build-only]" >&2; exit 2 ;;
esac

# --- 1. a hardware PMU, or a loud stop
[ "$(uname -m)" = x86_64 ] || die "this machine is $(uname -m); this check is for x86_64 (arm64: cargo xtask kernel-matrix --arch aarch64)"
devices=/sys/bus/event_source/devices
pmus=$(ls "$devices" 2>/dev/null | paste -sd " " -) || true
cpu_pmu=""
for p in cpu cpu_core; do
  if [ -e "$devices/$p" ]; then cpu_pmu=$p; break; fi
done
[ -n "$cpu_pmu" ] || $build_only || die "no hardware PMU here: $devices lists only: ${pmus:-nothing}. A VM needs a virtual PMU
(KVM/qemu: -cpu host with pmu=on; VMware: 'virtualize CPU performance counters'; clouds: bare-metal or vPMU instance types)."
command -v cargo >/dev/null || die "no cargo on PATH: install Rust with rustup (https://rustup.rs)"
printf 'hw-x86: %s, Linux %s, PMUs: %s\n' "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" \
  "$(uname -r)" "$pmus"
cpu_pmu=${cpu_pmu:-cpu}
printf 'hw-x86: perf_event_paranoid %s, %s/rdpmc %s, nmi_watchdog %s (it holds one counter when 1), uid %s\n' \
  "$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo '?')" "$cpu_pmu" \
  "$(cat "$devices/$cpu_pmu/rdpmc" 2>/dev/null || echo '?')" \
  "$(cat /proc/sys/kernel/nmi_watchdog 2>/dev/null || echo '?')" "$(id -u)"
rustc --version

# --- 2. build everything first (release: the benchmark's profile; test and bench share the dependencies)
hw_tests=()
for f in tests/tests/hw_*.rs; do hw_tests+=(--test "$(basename "$f" .rs)"); done
printf '\n==== [%s] building %s and the benchmark report\n' "$(elapsed)" "${hw_tests[*]}"
cargo build -q -p suite
cargo test -q --release -p tests "${hw_tests[@]}" --no-run
cargo bench -q -p tests --bench report --no-run
if $build_only; then printf '\nhw-x86: built in %s (--build-only: nothing run)\n' "$(elapsed)"; exit 0; fi

# --- 3. every hw_* test, with what it counted; the closing line must say 0 failed, 0 skipped
printf '\n==== [%s] hardware tests (--nocapture: each prints its counts)\n' "$(elapsed)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The suite runner sums the results and counts a test that decided not to run as skipped, not passed.
cargo run -q -p suite -- --release -p tests "${hw_tests[@]}" -- --nocapture --test-threads=1 2>&1 | tee "$log" \
  || die "a hardware test failed (above)"
closing=$(tail -n 1 "$log")
[[ "$closing" =~ ^[0-9]+\ passed,\ 0\ failed,\ 0\ skipped$ ]] \
  || die "the hardware tests did not all run: '$closing' (the skip reasons are listed above it)"

# --- 4. the counter-read and rdpmc rows of the benchmark report
printf '\n==== [%s] benchmark: counter read and rdpmc rows (cargo bench -p tests -- --only=count,rdpmc)\n' "$(elapsed)"
cargo bench -q -p tests --bench report -- --only=count,rdpmc 2>&1 | tee "$log" || die "the benchmark failed (above)"
if grep -q '^skipped: 5 rdpmc' "$log"; then
  die "the rdpmc rows skipped (see the table): user-space reads need $devices/$cpu_pmu/rdpmc >= 1"
fi

printf '\nhw-x86: done in %s: hardware tests %s; benchmark rows above\n' "$(elapsed)" "$closing"
