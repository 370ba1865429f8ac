#!/usr/bin/env python3
"""The A/A check of the default run's verdicts: one server under two names, run after run, and
how many "against the reference" cells at equal load showed a ratio where none is real, and in
how many runs the column said anything (the family's error: at most 5% of runs).

usage (from the repository root, after a release build, nothing else running):
  scripts/aacheck.py run RUNS OUT [SERVERS]    RUNS default runs into OUT/run1 ... OUT/runRUNS,
                                               then the tally
  scripts/aacheck.py tally OUT                 the tally of the runs already in OUT

SERVERS defaults to `reactor,reactor+name=again`; each run is
`cargo xtask bench --no-build --servers SERVERS --out OUT/runK`. A run that exits non-zero
stops the check with its log's path.

The tally prints one line per run: which server went first in 3 of the 5 rounds at the
equal-load point (the order is drawn at each point; see xtask/src/plan/order.rs), and each
cell that is not the reference, as report.md shows it (median [interval], against the
reference), marking the cells that gave a verdict. Then the count of verdicts and of runs with
one, and, from the repeats themselves, how often the server that went first 3 times came out
the dearer (about half the runs if position costs nothing) and the geometric mean of that
ratio. The column is one family (docs/VERDICTS.md): a run of equal servers shows a verdict
somewhere in at most 5% of runs, whatever the count of servers. (Reports from before the
reference was named in advance call it `best` and carry a per-round column; both are read.)"""
import glob, json, math, os, statistics, subprocess, sys

EQUAL_LOAD = "**CPU per echo at equal load**"


def runs_in(out):
    dirs = [d for d in glob.glob(os.path.join(out, "run*")) if os.path.isdir(d)]
    return sorted(dirs, key=lambda d: int(os.path.basename(d)[3:]))


def cells(report):
    """The rows of the at-a-glance table at equal load: (server, median, against)."""
    table = report.split(EQUAL_LOAD, 1)[1].split("\n\n")[1]
    for line in table.splitlines():
        if line.startswith("| **"):
            c = [x.strip() for x in line.strip("|").split("|")]
            yield c[0].strip("*"), c[2], c[3]


def open_point(meta):
    return next(o for o in meta["orders"] if o["point"].startswith("open-"))


def leftover(run, point):
    """The server that went first in more rounds than the other, and the ratio of its median
    CPU per echo to the other's (two servers only)."""
    rounds = point["rounds"]
    names = rounds[0]
    if len(names) != 2:
        return None, None
    first = max(names, key=lambda s: sum(r[0] == s for r in rounds))
    values = {s: [] for s in names}
    for k, order in enumerate(rounds):
        for s in order:
            path = f"{run}/quick/{s}/{point['point']}.r{k + 1}.outcome.json"
            ok = json.load(open(path)).get("Ok")
            if ok and ok["cost"].get("cpu_us_per_req"):
                values[s].append(ok["cost"]["cpu_us_per_req"])
    other = next(s for s in names if s != first)
    if not values[first] or not values[other]:
        return first, None
    return first, statistics.median(values[first]) / statistics.median(values[other])


def tally(out):
    runs = [r for r in runs_in(out) if os.path.exists(f"{r}/report.md")]
    if not runs:
        sys.exit(f"aacheck: no run with a report.md in {out}")
    verdicts = total = runs_with_one = 0
    ratios = []
    for run in runs:
        meta = json.load(open(f"{run}/meta.json"))
        first, ratio = leftover(run, open_point(meta))
        if ratio is not None:
            ratios.append(ratio)
        shown = []
        any_verdict = False
        for server, median, against in cells(open(f"{run}/report.md").read()):
            if against in ("best", "reference", "not tested", "–"):
                continue
            total += 1
            verdict = not against.startswith("~")
            verdicts += verdict
            any_verdict |= verdict
            mark = "  <== verdict" if verdict else ""
            shown.append(f"{server}: {median} | {against}{mark}")
        runs_with_one += any_verdict
        print(f"{os.path.basename(run):<6} first 3 times: {first}; " + "; ".join(shown))
    print(f"verdicts: {verdicts} of {total} cells; runs with a verdict: {runs_with_one} of {len(runs)}")
    if ratios:
        dearer = sum(r > 1 for r in ratios)
        geomean = math.exp(statistics.mean(math.log(r) for r in ratios))
        print(
            f"the server that went first 3 times came out the dearer in {dearer} of "
            f"{len(ratios)} runs; geometric mean of its ratio {geomean:.3f}"
        )


def run(count, out, servers):
    os.makedirs(out, exist_ok=True)
    for k in range(1, count + 1):
        dest = os.path.join(out, f"run{k}")
        log = dest + ".log"
        argv = ["cargo", "xtask", "bench", "--no-build", "--servers", servers, "--out", dest]
        with open(log, "w") as f:
            code = subprocess.call(argv, stdout=f, stderr=subprocess.STDOUT)
        print(f"run {k} of {count}: exit {code}", file=sys.stderr, flush=True)
        if code != 0:
            sys.exit(f"aacheck: `{' '.join(argv)}` exited {code}; see {log}")
    tally(out)


def main(argv):
    if len(argv) >= 3 and argv[0] == "run" and argv[1].isdigit() and int(argv[1]) > 0:
        servers = argv[3] if len(argv) > 3 else "reactor,reactor+name=again"
        run(int(argv[1]), argv[2], servers)
    elif len(argv) == 2 and argv[0] == "tally":
        tally(argv[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
