# Sourced by the scripts here: start_server READY_FILE LOG_FILE COMMAND... starts the
# server on CPU 1, sets `pid` to its pid and `addr` to the address of its READY line, or
# prints the server's log and exits 1 if no READY line comes within 10 s.
start_server() {
    local ready=$1 log=$2
    shift 2
    taskset -c 1 "$@" >"$ready" 2>"$log" &
    pid=$!
    for _ in $(seq 100); do
        grep -qs '^READY ' "$ready" && break
        sleep 0.1
    done
    addr=$(awk '/^READY /{print $2; exit}' "$ready")
    if [ -z "$addr" ]; then
        echo "the server printed no READY line: $(cat "$log")" >&2
        exit 1
    fi
}
