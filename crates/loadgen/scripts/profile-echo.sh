#!/usr/bin/env bash
# Profiles a server under echo load: the server on CPU 1, loadgen on CPU 0, and, in the
# middle of the measured window, `perf record -e cpu-clock -g` and `perf stat` (system calls
# and context switches) on the server for PERF_SECS seconds. Prints loadgen's throughput and
# server CPU per echo, the perf stat counts, and the profile's split by binary and its top
# symbols; leaves perf.data in OUT for `perf report -i`.
#
#   crates/loadgen/scripts/profile-echo.sh SERVER_COMMAND...
#   e.g. crates/loadgen/scripts/profile-echo.sh target/release/srv-fiber --proto echo --cpus 1
#
# Environment: LOADGEN (default target/release/loadgen), CONNS (1000), RATE (empty: closed
# loop; a number: open loop at that many echoes/s), DURATION (6), PERF_SECS (3), OUT (a
# directory, default a new temporary one). Needs perf (Debian: linux-perf); only software
# events are used, so it works in a VM without hardware counters.
set -euo pipefail
# shellcheck source=start-server.sh
. "$(dirname "$0")/start-server.sh"
LOADGEN=${LOADGEN:-target/release/loadgen}
CONNS=${CONNS:-1000}
RATE=${RATE:-}
DURATION=${DURATION:-6}
PERF_SECS=${PERF_SECS:-3}
OUT=${OUT:-$(mktemp -d)}
command -v perf >/dev/null || { echo "perf is not installed (Debian: apt-get install linux-perf)" >&2; exit 1; }
pid=
lg=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; [ -n "$lg" ] && kill "$lg" 2>/dev/null; true' EXIT
mkdir -p "$OUT"
start_server "$OUT/ready" "$OUT/server.log" "$@"
rate=()
[ -n "$RATE" ] && rate=(--rate "$RATE")
taskset -c 0 "$LOADGEN" echo --addr "$addr" --conns "$CONNS" --duration "$DURATION" --warmup 1 \
    --cpus 0 --server-pid "$pid" --json "$OUT/loadgen.json" --quiet "${rate[@]}" >/dev/null &
lg=$!
# The window starts after the warm-up; profile its middle.
sleep $(( (DURATION - PERF_SECS) / 2 + 1 ))
perf stat -e raw_syscalls:sys_enter,context-switches -p "$pid" -o "$OUT/perf-stat.txt" \
    -- sleep "$PERF_SECS" &
stat=$!
perf record -q -e cpu-clock -g -p "$pid" -o "$OUT/perf.data" -- sleep "$PERF_SECS" >/dev/null 2>&1
wait "$stat" "$lg"
lg=
kill "$pid"
wait "$pid" 2>/dev/null || true
pid=
python3 - "$OUT/loadgen.json" "$PERF_SECS" "$OUT/perf-stat.txt" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
secs = float(sys.argv[2])
rate = d["throughput_per_sec"]
print(f"{rate:,.0f} echoes/s, server CPU per echo {d['server_cpu_per_msg_us'] or float('nan'):.2f} us, "
      f"client-bound: {d['client_bound']}")
for line in open(sys.argv[3]):
    m = re.match(r"\s*([\d,]+)\s+(\S+)", line)
    if m and ("sys_enter" in m.group(2) or "context" in m.group(2)):
        n = int(m.group(1).replace(",", ""))
        print(f"{m.group(2)}: {n / (rate * secs):.3f} per echo")
PY
perf report -i "$OUT/perf.data" --no-children --sort dso --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -5
perf report -i "$OUT/perf.data" --no-children --sort sym --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -25
echo "perf data: $OUT/perf.data"
