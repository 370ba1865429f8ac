#!/usr/bin/env bash
# Benchmarks loadgen itself: echo at several connection counts against one server, the
# server on CPU 1 and loadgen on CPU 0, and prints the client's CPU per message beside the
# server's (read by loadgen from /proc/<pid>/stat with --server-pid).
#
#   crates/loadgen/scripts/bench-echo.sh SERVER_COMMAND...
#   e.g. crates/loadgen/scripts/bench-echo.sh target/release/srv-threads --proto echo --cpus 1
#
# Environment: LOADGEN (default target/release/loadgen), CONNS (default "1 100 1000"),
# DURATION (5), WARMUP (1), EXTRA (more loadgen options), OUT (a directory for the JSON).
set -euo pipefail
# shellcheck source=start-server.sh
. "$(dirname "$0")/start-server.sh"
LOADGEN=${LOADGEN:-target/release/loadgen}
CONNS=${CONNS:-"1 100 1000"}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
EXTRA=${EXTRA:-}
OUT=${OUT:-$(mktemp -d)}
pid=
# Whatever happens, the server this script started does not outlive it.
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null' EXIT
mkdir -p "$OUT"
printf '%-6s %10s %9s %9s %10s %10s %10s %6s %7s\n' conns msg/s p50us p99us p99.99us cli_us/msg srv_us/msg ratio bound
for conns in $CONNS; do
    start_server "$OUT/ready.$conns" "$OUT/server.$conns.log" "$@"
    # shellcheck disable=SC2086
    taskset -c 0 "$LOADGEN" echo --addr "$addr" --conns "$conns" --duration "$DURATION" \
        --warmup "$WARMUP" --cpus 0 --server-pid "$pid" --json "$OUT/echo-$conns.json" \
        --quiet $EXTRA >/dev/null
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null || true
    pid=
    jq -r '[.conns, (.throughput_per_sec|floor), .latency_us.p50, .latency_us.p99,
            .latency_us.p99_99, .client_cpu_per_msg_us, .server_cpu_per_msg_us,
            (.client_cpu_per_msg_us / .server_cpu_per_msg_us), .client_bound] | @tsv' \
        "$OUT/echo-$conns.json" |
        awk -F'\t' '{printf "%-6s %10s %9.1f %9.1f %10.1f %10.3f %10.3f %6.2f %7s\n", $1,$2,$3,$4,$5,$6,$7,$8,$9}'
done
echo "JSON summaries in $OUT" >&2
