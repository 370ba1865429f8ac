#!/bin/bash
# usage (from the repository root): scripts/micropair.sh PAIRS OPS BENCH BEFORE AFTER
# Runs `taskset -c 1 BIN BENCH OPS` of two builds of fiber's microbench (BENCH: yield, spawn,
# nop or echo) back to back, PAIRS times, swapping which goes first every pair, and prints
# both medians and lowest figures, and the median of the per-pair ratios AFTER/BEFORE with how
# many pairs AFTER was the lower in (adjacent runs, so the host's drift cancels). Build each
# with `cargo build --release -p fiber --example microbench` and copy
# target/release/examples/microbench aside.
set -euo pipefail
if [ $# -ne 5 ]; then
    sed -n 2,7p "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
pairs=$1 ops=$2 bench=$3 before=$4 after=$5
for bin in "$before" "$after"; do
    [ -x "$bin" ] || { echo "micropair: $bin is not an executable" >&2; exit 2; }
done
run() {
    local out
    out=$(taskset -c 1 "$1" "$bench" "$ops") || { echo "micropair: $1 $bench $ops failed" >&2; exit 1; }
    awk '{for (i = 1; i <= NF; i++) if ($i == "ns/op") print $(i - 1)}' <<<"$out"
}
b=() a=()
for i in $(seq "$pairs"); do
    if ((i % 2)); then x=$(run "$before"); y=$(run "$after"); else y=$(run "$after"); x=$(run "$before"); fi
    b+=("$x") a+=("$y")
    echo "pair $i: before $x after $y ns" >&2
done
python3 - "${b[*]}" "${a[*]}" <<'PY'
import statistics as st, sys
b = [float(x) for x in sys.argv[1].split()]
a = [float(x) for x in sys.argv[2].split()]
r = [y / x for x, y in zip(b, a)]
print(f"before median {st.median(b):.1f} lowest {min(b):.1f} ns | after median {st.median(a):.1f} "
      f"lowest {min(a):.1f} ns | after/before {st.median(r):.3f}, after lower in {sum(q < 1 for q in r)} of {len(r)}")
PY
