#!/usr/bin/env python3
"""User-space instructions a server executes per echo, counted exactly by single-stepping.

usage (from the repository root, after cargo build --release):
  scripts/pathlen.py [--echoes N] [--top K] [--tree FUNCTION] -- SERVER-COMMAND...
  e.g. scripts/pathlen.py -- target/release/srv-fiber --workers 1

Starts the server on CPU 1 with `--proto echo --addr 127.0.0.1:0`, warms one connection with
200 echoes of 16 bytes, then attaches gdb to the thread that did them (the one whose CPU time
grew most) and steps it one instruction at a time while the client sends N more echoes, each
once the thread has sat in a system call for 0.2 s. Each echo is the run of instructions between two blocking system calls (a step over a
`syscall` that takes longer than 0.1 s is the thread waiting for the next message). Prints the
instructions of each echo, their median, and the functions with the most instructions per
echo, counted inclusively (a function's callees count for it): a figure that does not move
with the host's load, unlike CPU time. What it does not see: the kernel's work, and cache
misses (one connection, so everything the path touches is warm).

Needs gdb (`apt-get install gdb`) and ptrace rights (root, or kernel.yama.ptrace_scope 0).
--tree FUNCTION prints the call tree under FUNCTION instead of the flat list."""
import argparse, collections, json, os, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, textwrap, time

MSG = b"0123456789abcde\n"
# Frames every step of a thread or a fiber has under it, which the flat list leaves out.
SCAFFOLD = re.compile(r"catch_unwind|do_call|call_once|start_thread|clone3|thread_start|"
                      r"begin_short_backtrace|^\{closure#\d+\}|^\?$")

GDB_SCRIPT = r'''
import gdb, json, os, time
cfg = json.load(open(CFG))
gdb.execute("set pagination off")
gdb.execute("set scheduler-locking on")
for t in gdb.selected_inferior().threads():
    if t.ptid[1] == cfg["tid"]:
        t.switch()
        break
else:
    raise gdb.GdbError("thread %d not found" % cfg["tid"])
open(cfg["attached"], "w").close()
mem = gdb.selected_inferior()
echoes, current, waits = [], [], 0
deadline = time.time() + cfg["timeout"]
first = True
while waits <= cfg["echoes"] and time.time() < deadline:
    pc = int(gdb.parse_and_eval("$pc"))
    is_syscall = mem.read_memory(pc, 2).tobytes() == b"\x0f\x05"
    if first:
        # Attached inside a system call: the thread stopped just after its `syscall`.
        is_syscall, first = mem.read_memory(pc - 2, 2).tobytes() == b"\x0f\x05", False
    if waits > 0:
        names = []
        f = gdb.newest_frame()
        while f is not None and len(names) < 64:
            names.append(f.name() or "?")
            f = f.older()
        current.append(names)
    t0 = time.time()
    if is_syscall:
        open(cfg["in_syscall"], "w").close()
    gdb.execute("stepi", to_string=True)
    if is_syscall:
        os.unlink(cfg["in_syscall"])
    if time.time() - t0 > 0.1:
        # The step before this one ran a system call that blocked: the thread waited for the
        # next message, so the path of one echo ends here.
        if waits > 0:
            echoes.append(current)
        current, waits = [], waits + 1
json.dump(echoes, open(cfg["out"], "w"))
gdb.execute("detach")
'''


def thread_cpu(pid):
    """Each thread's CPU time so far, in ns."""
    cpu = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            cpu[int(tid)] = int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0])
        except OSError:
            continue
    return cpu


def echo(sock):
    sock.sendall(MSG)
    got = b""
    while len(got) < len(MSG):
        chunk = sock.recv(64)
        if not chunk:
            raise SystemExit("pathlen: the server closed the connection")
        got += chunk
    if got != MSG:
        raise SystemExit(f"pathlen: the server echoed {got!r}, not {MSG!r}")


def tail(log):
    log.seek(0)
    return log.read().decode(errors="replace")[-3000:]


def wait_blocked(marker, seconds):
    """Waits until the traced thread has sat in one system call for 0.2 s: it waits for the
    next message, so what it did for the last one is all counted."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if time.time() - os.stat(marker).st_mtime > 0.2:
                return
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    raise SystemExit("pathlen: timed out waiting for the server to wait for a message")


def wait_for(path, seconds, what):
    deadline = time.time() + seconds
    while not os.path.exists(path):
        if time.time() > deadline:
            raise SystemExit(f"pathlen: timed out waiting for {what}")
        time.sleep(0.05)


def inclusive(echoes):
    counts = collections.Counter()
    for steps in echoes:
        for names in steps:
            for name in set(names):
                counts[name] += 1
    return counts


def tree(echoes, root, depth=6, min_share=0.01):
    paths = collections.Counter()
    for steps in echoes:
        for names in steps:
            stack = list(reversed(names))
            if root not in stack:
                continue
            sub = stack[stack.index(root):][: depth + 1]
            for k in range(1, len(sub) + 1):
                paths[tuple(sub[:k])] += 1
    if not paths:
        raise SystemExit(f"pathlen: no frame named {root!r} in the trace (--top lists the names)")
    n = len(echoes)
    total = sum(len(s) for s in echoes) / n

    def show(prefix):
        kids = [(c, k) for k, c in paths.items() if len(k) == len(prefix) + 1 and k[:-1] == prefix]
        for c, k in sorted(kids, reverse=True):
            if c / n < min_share * total:
                continue
            print(f"{'  ' * len(prefix)}{c / n:7.1f} {k[-1][:120]}")
            show(k)

    show(())


def main():
    # Piped into `head`: stop quietly, as a shell tool does.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--echoes", type=int, default=5)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--tree", metavar="FUNCTION")
    ap.add_argument("--json", metavar="FILE", help="write the per-echo counts here")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("give the server command after --")
    if shutil.which("gdb") is None:
        raise SystemExit("pathlen: needs gdb: apt-get install gdb")
    tmp = tempfile.mkdtemp(prefix="pathlen-")
    gdb = None
    srv = subprocess.Popen(["taskset", "-c", "1"] + cmd + ["--proto", "echo", "--addr", "127.0.0.1:0"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        ready = srv.stdout.readline().decode().split()
        if len(ready) < 2 or ready[0] != "READY":
            raise SystemExit(f"pathlen: the server did not print READY (got {ready!r})")
        host, port = ready[1].rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=30)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        echo(sock)
        before = thread_cpu(srv.pid)
        for _ in range(200):
            echo(sock)
        after = thread_cpu(srv.pid)
        busiest = max(after, key=lambda tid: after[tid] - before.get(tid, 0))
        cfg = {"tid": busiest, "echoes": a.echoes, "timeout": 60 + 2 * a.echoes,
               "attached": os.path.join(tmp, "attached"),
               "in_syscall": os.path.join(tmp, "in-syscall"), "out": os.path.join(tmp, "echoes.json")}
        json.dump(cfg, open(os.path.join(tmp, "cfg.json"), "w"))
        script = os.path.join(tmp, "trace.py")
        open(script, "w").write(f"CFG = {os.path.join(tmp, 'cfg.json')!r}\n" + GDB_SCRIPT)
        # gdb prints every step's stop: into a file, which no pipe's buffer can block.
        log = open(os.path.join(tmp, "gdb.log"), "w+b")
        gdb = subprocess.Popen(["gdb", "-q", "-batch", "-p", str(srv.pid), "-x", script],
                               stdout=log, stderr=subprocess.STDOUT)
        wait_for(cfg["attached"], 60, "gdb to attach")
        try:
            for _ in range(a.echoes + 1):
                wait_blocked(cfg["in_syscall"], 120)
                echo(sock)
        except (OSError, SystemExit) as e:
            gdb.kill()
            gdb.wait()
            raise SystemExit(f"pathlen: an echo failed under gdb ({e}); gdb said:\n" + tail(log))
        gdb.wait(timeout=cfg["timeout"] + 30)
        if not os.path.exists(cfg["out"]):
            raise SystemExit("pathlen: gdb gave no trace; it said:\n" + tail(log))
        echoes = json.load(open(cfg["out"]))
        if not echoes:
            raise SystemExit("pathlen: no echo traced")
    finally:
        if gdb is not None and gdb.poll() is None:
            gdb.kill()
            gdb.wait()
        srv.kill()
        srv.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    counts = [len(s) for s in echoes]
    print(f"{' '.join(cmd)}: user instructions per echo {statistics.median(counts):.0f} "
          f"(each: {' '.join(map(str, counts))})")
    if a.json:
        json.dump({"command": cmd, "per_echo": counts}, open(a.json, "w"))
    if a.tree:
        tree(echoes, a.tree)
        return
    n = len(echoes)
    shown = [(name, c) for name, c in inclusive(echoes).most_common() if not SCAFFOLD.search(name)]
    for name, c in shown[: a.top]:
        print(f"{c / n:8.1f}  {name[:130]}")


if __name__ == "__main__":
    main()
