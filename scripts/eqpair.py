#!/usr/bin/env python3
"""usage (from the repository root): scripts/eqpair.py ROUNDS CONNS SECONDS RATE 'AFTER A' 'BEFORE A' ['AFTER B' 'BEFORE B' ...]
../shared/tools/eqload.py with per-round output and paired ratios: commands come in pairs (AFTER BEFORE);
each round runs every command once, rotated; prints per-server medians/mins and, per pair, the
median and range of the per-round ratio AFTER/BEFORE (adjacent runs, so host drift cancels),
plus the steal ticks seen over the run."""
import os, sys, statistics, json
# The team's eqload.py (in the shared notes beside this repository) runs one point.
EQLOAD = os.environ.get("EQLOAD", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "tools", "eqload.py"))
src = open(EQLOAD).read()
src = src[:src.index("rounds, conns, dur, rate = ")]
ns = {}; exec(src, ns)
def steal(): return int(open("/proc/stat").readline().split()[8])
rounds, conns, dur, rate = map(int, sys.argv[1:5]); cmds = sys.argv[5:]
res = {c: [] for c in cmds}; s0 = steal()
for r in range(rounds):
    # Rotated: round r starts with command r, so no command always runs first or last.
    for c in cmds[r % len(cmds):] + cmds[:r % len(cmds)]:
        res[c].append(ns["one"](c, conns, dur, rate))
    print(f"round {r}: " + " ".join(f"{res[c][-1][0]:.2f}" for c in cmds), flush=True)
for c in cmds:
    cpu = [x[0] for x in res[c]]
    print(f"{c}: median {statistics.median(cpu):.2f} min {min(cpu):.2f} max {max(cpu):.2f} tput {statistics.median(x[1] for x in res[c]):.0f}/s errors {sum(x[3] for x in res[c])}")
for i in range(0, len(cmds) - 1, 2):
    a, b = cmds[i], cmds[i + 1]
    rs = [x[0] / y[0] for x, y in zip(res[a], res[b])]
    lower = sum(1 for q in rs if q < 1)
    print(f"PAIR {a}  /  {b}: ratio median {statistics.median(rs):.3f} [{min(rs):.3f}-{max(rs):.3f}], AFTER lower in {lower} of {len(rs)}")
print(f"steal ticks during the run: {steal() - s0}")
json.dump({c: res[c] for c in cmds}, open(os.environ.get("OUT", "/tmp/eqpair.json"), "w"))
