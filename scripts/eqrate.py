#!/usr/bin/env python3
"""Server CPU per request at equal load for any protocol loadgen drives (echo, kv, http), the
servers rotated over rounds (round r starts with server r: A B C, B C A, ...), loadgen on CPU 0,
the server on CPU 1.

usage (from the repository root, after cargo build --release):
  scripts/eqrate.py PROTO ROUNDS CONNS SECONDS RATE 'CMD A' 'CMD B' ...      (RATE 0: closed loop)
  e.g. scripts/eqrate.py kv 5 50 4 20000 'target/release/srv-reactor --workers 1' \\
           'peers/go/srv-go --workers 1 --model eventloop'

Each command gets `--proto PROTO --addr 127.0.0.1:0` and must print `READY <addr>`. CPU is the
server's schedstat (all its threads) over the measured window. Prints one line per server
(median, min and max of CPU per request, throughput, p99, errors), then the ratios of each
server's median and of its lowest run to the first server's (noise on a shared host only adds
CPU time, so the lowest is the steadier estimate), and the per-round ratios' median."""
import json, os, shlex, statistics, subprocess, sys, tempfile, time

LOADGEN = os.environ.get("LOADGEN", "target/release/loadgen")
WARMUP = 2.0


def schedns(pid):
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(open(f"/proc/{pid}/task/{t}/schedstat").read().split()[0])
        except (OSError, ValueError):
            pass
    return total


def one(proto, cmd, conns, secs, rate):
    srv = subprocess.Popen(["taskset", "-c", "1"] + shlex.split(cmd) + ["--proto", proto, "--addr", "127.0.0.1:0"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        line = srv.stdout.readline().decode().split()
        if len(line) != 2 or line[0] != "READY":
            sys.exit(f"{cmd}: no READY line (got {line!r})")
        fd, out = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        lg = ["taskset", "-c", "0", LOADGEN, proto, "--addr", line[1], "--conns", str(conns),
              "--duration", str(secs), "--warmup", str(WARMUP), "--json", out]
        if rate:
            lg += ["--rate", str(rate)]
        p = subprocess.Popen(lg, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(WARMUP + 0.5)
        c0, t0 = schedns(srv.pid), time.time()
        time.sleep(secs - 1)
        c1, t1 = schedns(srv.pid), time.time()
        if p.wait(timeout=secs + 60) != 0:
            sys.exit(f"{cmd}: loadgen failed")
        j = json.load(open(out))
        os.unlink(out)
    finally:
        srv.terminate()
        srv.wait(10)
    tp = j["throughput_per_sec"]
    errs = j["errors"]
    errs = sum(errs.values()) if isinstance(errs, dict) else errs
    return (c1 - c0) / 1e3 / (t1 - t0) / tp, tp, j["latency_us"]["p99"], errs


def main():
    if len(sys.argv) < 8:
        sys.exit(__doc__)
    proto = sys.argv[1]
    rounds, conns, secs, rate = map(int, sys.argv[2:6])
    cmds = sys.argv[6:]
    res = {c: [] for c in cmds}
    for r in range(rounds):
        for c in cmds[r % len(cmds):] + cmds[:r % len(cmds)]:
            res[c].append(one(proto, c, conns, secs, rate))
        print(f"round {r}: " + " ".join(f"{res[c][-1][0]:.2f}" for c in cmds), flush=True)
    med = {c: statistics.median(x[0] for x in res[c]) for c in cmds}
    low = {c: min(x[0] for x in res[c]) for c in cmds}
    for c in cmds:
        cpu = [x[0] for x in res[c]]
        print(f"{c}: cpu/req median {med[c]:.2f} us [{min(cpu):.2f}-{max(cpu):.2f}] "
              f"tput {statistics.median(x[1] for x in res[c]):.0f}/s "
              f"p99 {statistics.median(x[2] for x in res[c]):.0f} us errors {sum(x[3] for x in res[c])}")
    first = cmds[0]
    print("ratios: " + " ".join(f"{med[c] / med[first]:.3f}" for c in cmds))
    print("min-ratios: " + " ".join(f"{low[c] / low[first]:.3f}" for c in cmds))
    paired = [statistics.median(x[0] / y[0] for x, y in zip(res[c], res[first])) for c in cmds]
    print("per-round ratios (median): " + " ".join(f"{q:.3f}" for q in paired))


if __name__ == "__main__":
    main()
