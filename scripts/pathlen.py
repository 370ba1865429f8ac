#!/usr/bin/env python3
"""User-space instructions a server executes per echo, counted exactly by single-stepping.

usage (from the repository root, after cargo build --release):
  scripts/pathlen.py [--echoes N] [--top K] [--tree FUNCTION | --locked] -- SERVER-COMMAND...
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
--tree FUNCTION prints the call tree under FUNCTION instead of the flat list. Each count comes
with how many of its instructions were locked (a `lock` prefix, `xchg` with memory, `mfence`:
each drains the store buffer); --locked lists where they are instead.

  scripts/pathlen.py --lines [--echoes N] -- SERVER-COMMAND...

counts instead the cache lines each echo runs (code lines: its instructions' addresses) and
reads or writes (data lines: each step's memory operands, pushes and returns; prefetches
excluded), over two connections whose echoes alternate: "its own" data lines are those no
echo of the other connection touched, the connection's own state (its fiber's stack, its ops,
its stream) or memory that changes every echo, cold when a thousand connections take turns.
After each wait in the kernel most lines of either kind are gone from L1 (the kernel's own
work has run there), so their number is what CPU time at equal load cannot resolve:
floor-uring runs 43 code lines and touches 28 data lines per echo, srv-reactor 71 and 32.

  scripts/pathlen.py --per SYMBOL [--echoes N] -- COMMAND...
  e.g. scripts/pathlen.py --per ringside_fiber_switch -- target/release/examples/microbench yield 1000000000

counts instead the instructions between two visits of SYMBOL (a symbol of COMMAND's executable,
as `nm` lists it) on the busiest thread of any COMMAND that repeats one operation: COMMAND runs
on CPU 1, and after a second gdb steps that thread through N + 1 visits. A fiber switch marks a
yield (`ringside_fiber_switch`), a fiber's start a spawn and join (`ringside_fiber_start`)."""
import argparse, collections, json, os, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, textwrap, time

MSG = b"0123456789abcde\n"
# Frames every step of a thread or a fiber has under it, which the flat list leaves out.
SCAFFOLD = re.compile(r"catch_unwind|do_call|call_once|start_thread|clone3|thread_start|"
                      r"begin_short_backtrace|^\{closure#\d+\}|^\?$")

# The innermost "frame" of a step that ran a locked instruction.
LOCKED = "(locked instruction)"

GDB_SCRIPT = f"LOCKED = {LOCKED!r}\n" + r'''
import gdb, json, os, re, time
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


def is_locked(pc):
    """A locked read-modify-write (lock prefix, or xchg with memory) or an mfence: each
    drains the store buffer."""
    b = mem.read_memory(pc, 4).tobytes()
    k = 1 if 0x40 <= b[0] <= 0x4f else 0
    return (b[0] == 0xf0 or (b[k] in (0x86, 0x87) and b[k + 1] >> 6 != 3)
            or b[:3] == b"\x0f\xae\xf0")


MEM = re.compile(r"(?:%([fg]s):)?(-?0x[0-9a-f]+|-?[0-9]+)?\((%[a-z0-9]+)?(?:,(%[a-z0-9]+)(?:,([1248]))?)?\)")
NO_ACCESS = re.compile(r"^(lea|nop|prefetch|endbr)")
PREFIX = re.compile(r"^(rep[a-z]*|lock|data16|addr32|[c-gs]s|rex(\.[WRXB]+)?|notrack|bnd)$")


def reg(f, name):
    if name == "rip":
        return 0
    return int(f.read_register(name)) & 0xFFFFFFFFFFFFFFFF


def touched(pc):
    """The cache lines the instruction at `pc` is about to read or write (user space only:
    a system call's own accesses are the kernel's), with the innermost function's name."""
    f = gdb.newest_frame()
    d = f.architecture().disassemble(pc)[0]
    asm, size = d["asm"], d["length"]
    words = asm.split()
    while len(words) > 1 and PREFIX.match(words[0]):
        words = words[1:]
    mnem = words[0] if words else ""
    addrs = []
    if asm.startswith("rep") and mnem[:4] in ("movs", "stos", "cmps", "scas"):
        # A string instruction: rcx elements from rsi and/or rdi (counted as bytes).
        n = reg(f, "rcx")
        for r in ("rsi", "rdi") if mnem[:4] in ("movs", "cmps") else ("rdi",):
            a = reg(f, r)
            addrs += range(a & ~63, a + max(n, 1), 64)
    elif not NO_ACCESS.match(mnem):
        width = 64 if "%zmm" in asm else 32 if "%ymm" in asm else 16 if "%xmm" in asm else 8
        for seg, disp, base, index, scale in MEM.findall(asm.split("#")[0]):
            a = int(disp, 0) if disp else 0
            if base == "%rip":
                a += pc + size
            elif base:
                a += reg(f, base[1:])
            if index:
                a += reg(f, index[1:]) * int(scale or 1)
            if seg:
                a += reg(f, seg + "_base")
            addrs += [a, a + width - 1]
    sp = None
    if mnem.startswith(("push", "call")):
        sp = reg(f, "rsp") - 8
    elif mnem.startswith(("pop", "ret")):
        sp = reg(f, "rsp")
    elif mnem == "leave":
        sp = reg(f, "rbp")
    if sp is not None:
        addrs.append(sp)
    return [f.name() or "?", sorted({a & ~63 for a in addrs if a > 4095}), reg(f, "rsp"), pc]


def frames(pc):
    names = [LOCKED] if is_locked(pc) else []
    f = gdb.newest_frame()
    while f is not None and len(names) < 64:
        names.append(f.name() or "?")
        f = f.older()
    return names


deadline = time.time() + cfg["timeout"]
first = True
marker = cfg.get("marker")
while waits <= cfg["echoes"] and time.time() < deadline:
    pc = int(gdb.parse_and_eval("$pc"))
    if marker is not None:
        # One unit is the run from one visit of the marker to the next.
        if pc == marker:
            if waits > 0:
                echoes.append(current)
            current, waits = [], waits + 1
        if waits > 0 and waits <= cfg["echoes"]:
            current.append(frames(pc))
        gdb.execute("stepi", to_string=True)
        continue
    is_syscall = mem.read_memory(pc, 2).tobytes() == b"\x0f\x05"
    if first:
        # Attached inside a system call: the thread stopped just after its `syscall`.
        is_syscall, first = mem.read_memory(pc - 2, 2).tobytes() == b"\x0f\x05", False
    if waits > 0:
        current.append(touched(pc) if cfg.get("lines") else frames(pc))
    t0 = time.time()
    if is_syscall:
        open(cfg["in_syscall"], "w").close()
    gdb.execute("stepi", to_string=True)
    if is_syscall:
        os.unlink(cfg["in_syscall"])
    if is_syscall and time.time() - t0 > 0.1:
        # The step before this one ran a system call that blocked: the thread waited for the
        # next message, so the path of one echo ends here. (Only a system call: gdb may take
        # as long to step over a fiber's stack switch.)
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


def symbol_address(pid, exe, symbol):
    """Where `symbol` of `exe` sits in process `pid` (a position-independent executable is
    loaded at the start of its first mapping)."""
    exe = os.path.realpath(exe)
    nm = subprocess.run(["nm", exe], capture_output=True, text=True)
    offsets = [int(l.split()[0], 16) for l in nm.stdout.splitlines()
               if len(l.split()) == 3 and l.split()[2] == symbol]
    if not offsets:
        raise SystemExit(f"pathlen: {exe} has no symbol {symbol!r} (`nm {exe}` lists them)")
    bases = [int(l.split("-")[0], 16) for l in open(f"/proc/{pid}/maps") if l.split()[-1] == exe]
    elf_type = open(exe, "rb").read(18)[16]
    return offsets[0] + (min(bases) if elf_type == 3 else 0)


def busiest(before, after):
    """The thread whose CPU time grew most between two `thread_cpu` readings."""
    return max(after, key=lambda tid: after[tid] - before.get(tid, 0))


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
    text = log.read().decode(errors="replace")
    err = text.find("Python Exception")
    return text[err:err + 3000] if err >= 0 else text[-3000:]


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
    ap.add_argument("--locked", action="store_true",
                    help="list where the locked instructions are (their innermost four frames)")
    ap.add_argument("--per", metavar="SYMBOL",
                    help="count per visit of SYMBOL in any COMMAND, not per echo of a server")
    ap.add_argument("--lines", action="store_true",
                    help="count the cache lines each echo touches, and those no echo of another "
                         "connection touches, instead of instructions")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("give the server command after --")
    if shutil.which("gdb") is None:
        raise SystemExit("pathlen: needs gdb: apt-get install gdb")
    if a.lines and a.per:
        ap.error("--lines counts per echo of a server, not --per")
    echoes = trace_per_symbol(cmd, a) if a.per else trace_echoes(cmd, a)
    if a.lines:
        report_lines(cmd, echoes, a.maps, a.top)
        return
    counts = [len(s) for s in echoes]
    locked = [sum(1 for names in s if names[0] == LOCKED) for s in echoes]
    unit = f"visit of {a.per}" if a.per else "echo"
    print(f"{' '.join(cmd)}: user instructions per {unit} {statistics.median(counts):.0f} "
          f"(each: {' '.join(map(str, counts))}), locked {statistics.median(locked):.0f}")
    if a.locked:
        where = collections.Counter(" < ".join(n[:60] for n in names[1:5])
                                    for s in echoes for names in s if names[0] == LOCKED)
        for place, c in where.most_common():
            print(f"{c / len(echoes):6.1f}  {place}")
        return
    if a.json:
        json.dump({"command": cmd, "per_" + ("visit" if a.per else "echo"): counts,
                   "locked": locked}, open(a.json, "w"))
    if a.tree:
        tree(echoes, a.tree)
        return
    n = len(echoes)
    shown = [(name, c) for name, c in inclusive(echoes).most_common() if not SCAFFOLD.search(name)]
    for name, c in shown[: a.top]:
        print(f"{c / n:8.1f}  {name[:130]}")


def region(maps, line, sp):
    """Where address `line` is: the stack the instruction ran on (within 32 KiB of its stack
    pointer: a fiber's or the thread's), or the mapping of /proc/PID/maps that holds it, named
    by its file or, for an anonymous one, by its size."""
    if abs(line - sp) < 32 << 10:
        return "stack"
    for m in maps:
        f = m.split()
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        if lo <= line < hi:
            name = f[5] if len(f) > 5 else f"anonymous {(hi - lo) >> 10} KiB"
            return os.path.basename(name) if name.startswith("/") else name
    return "unmapped"


def report_lines(cmd, echoes, maps, top):
    """Per echo: the distinct cache lines touched, and its own ones: those that no echo of the
    other connection touched (the connection's state, or memory that changes every echo).
    With many connections these are the lines an echo finds cold."""
    # Per echo, each data line and each code line with what touched it first, and the
    # distinct instructions run.
    sets, code_sets, pcs = [], [], []
    for steps in echoes:
        first, code_first, ran = {}, {}, set()
        for name, lines, sp, pc in steps:
            code_first.setdefault(pc & ~63, name)
            ran.add(pc)
            for line in lines:
                first.setdefault(line, (name, sp))
        sets.append(first)
        code_sets.append(code_first)
        pcs.append(ran)
    conns = [set().union(*sets[c::2]) for c in (0, 1)]
    own = [{l: n for l, n in s.items() if l not in conns[1 - k % 2]} for k, s in enumerate(sets)]
    pages = [len({l >> 12 for l in s}) for s in own]
    print(f"{' '.join(cmd)}: code lines per echo {statistics.median(len(c) for c in code_sets):.0f} "
          f"in {statistics.median(len({pc >> 12 for pc in p}) for p in pcs):.0f} pages, "
          f"{statistics.median(len(p) / len(c) for p, c in zip(pcs, code_sets)):.1f} distinct "
          f"instructions per code line, "
          f"data lines {statistics.median(len(s) for s in sets):.0f} "
          f"(each: {' '.join(str(len(s)) for s in sets)}), its own {statistics.median(len(s) for s in own):.0f} "
          f"(each: {' '.join(str(len(s)) for s in own)}) in {statistics.median(pages):.0f} pages")
    by = collections.Counter()
    for s in own:
        for line, (name, sp) in s.items():
            by[(region(maps, line, sp), name)] += 1
    print("its own lines per echo, by mapping and the function that touched each first:")
    for (where, name), c in by.most_common():
        print(f"{c / len(own):6.1f}  {where[:28]:28}  {name[:90]}")
    by_code = collections.Counter()
    for c in code_sets:
        by_code.update(c.values())
    print(f"code lines per echo, by the function that ran in each first (the {top} with most):")
    for name, c in by_code.most_common(top):
        print(f"{c / len(echoes):6.1f}  {name[:110]}")
    print("the first echo's own lines, in address order:")
    for line, (name, sp) in sorted(own[0].items()):
        print(f"  {line:#x}  {region(maps, line, sp)[:28]:28}  {name[:90]}")


def run_gdb(pid, cfg, tmp):
    """Starts gdb on `pid` with the stepping script and `cfg`; returns it and its log."""
    json.dump(cfg, open(os.path.join(tmp, "cfg.json"), "w"))
    script = os.path.join(tmp, "trace.py")
    open(script, "w").write(f"CFG = {os.path.join(tmp, 'cfg.json')!r}\n" + GDB_SCRIPT)
    # gdb prints every step's stop: into a file, which no pipe's buffer can block.
    log = open(os.path.join(tmp, "gdb.log"), "w+b")
    gdb = subprocess.Popen(["gdb", "-q", "-batch", "-p", str(pid), "-x", script],
                           stdout=log, stderr=subprocess.STDOUT)
    return gdb, log


def read_trace(cfg, log):
    if not os.path.exists(cfg["out"]):
        raise SystemExit("pathlen: gdb gave no trace; it said:\n" + tail(log))
    units = json.load(open(cfg["out"]))
    if not units:
        raise SystemExit("pathlen: nothing traced (the thread never reached the end of a unit)")
    return units


def clean_up(gdb, proc, tmp):
    """Stops gdb if it still runs, kills the traced process and removes the scratch files."""
    if gdb is not None and gdb.poll() is None:
        gdb.kill()
        gdb.wait()
    proc.kill()
    proc.wait(10)
    shutil.rmtree(tmp, ignore_errors=True)


def trace_per_symbol(cmd, a):
    """The instructions between visits of `a.per` on the busiest thread of `cmd`."""
    tmp = tempfile.mkdtemp(prefix="pathlen-")
    gdb = None
    try:
        proc = subprocess.Popen(["taskset", "-c", "1"] + cmd, stdout=subprocess.DEVNULL)
    except OSError as e:
        raise SystemExit(f"pathlen: cannot run {cmd[0]}: {e}")
    try:
        time.sleep(1.0)
        before = thread_cpu(proc.pid)
        time.sleep(0.3)
        after = thread_cpu(proc.pid)
        if proc.poll() is not None or not after:
            raise SystemExit(f"pathlen: {cmd[0]} ended within a second: give it more to do")
        cfg = {"tid": busiest(before, after), "echoes": a.echoes, "timeout": 60 + 10 * a.echoes,
               "marker": symbol_address(proc.pid, shutil.which(cmd[0]) or cmd[0], a.per),
               "attached": os.path.join(tmp, "attached"),
               "in_syscall": os.path.join(tmp, "in-syscall"), "out": os.path.join(tmp, "units.json")}
        gdb, log = run_gdb(proc.pid, cfg, tmp)
        gdb.wait(timeout=cfg["timeout"] + 30)
        return read_trace(cfg, log)
    finally:
        clean_up(gdb, proc, tmp)


def trace_echoes(cmd, a):
    """The instructions per echo of the server `cmd`, on the thread that does them."""
    tmp = tempfile.mkdtemp(prefix="pathlen-")
    gdb = None
    srv = subprocess.Popen(["taskset", "-c", "1"] + cmd + ["--proto", "echo", "--addr", "127.0.0.1:0"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        ready = srv.stdout.readline().decode().split()
        if len(ready) < 2 or ready[0] != "READY":
            raise SystemExit(f"pathlen: the server did not print READY (got {ready!r})")
        host, port = ready[1].rsplit(":", 1)
        # --lines alternates two connections, so that what one echo touches can be told
        # apart from what every echo touches.
        socks = []
        for _ in range(2 if a.lines else 1):
            sock = socket.create_connection((host, int(port)), timeout=30)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            echo(sock)
            socks.append(sock)
        before = thread_cpu(srv.pid)
        for i in range(200):
            echo(socks[i % len(socks)])
        after = thread_cpu(srv.pid)
        # Decoding each instruction's operands (--lines) makes a step much slower: a longer timeout.
        per_echo = 40 if a.lines else 2
        cfg = {"tid": busiest(before, after), "echoes": a.echoes, "timeout": 60 + per_echo * a.echoes,
               "lines": a.lines, "attached": os.path.join(tmp, "attached"),
               "in_syscall": os.path.join(tmp, "in-syscall"), "out": os.path.join(tmp, "echoes.json")}
        gdb, log = run_gdb(srv.pid, cfg, tmp)
        wait_for(cfg["attached"], 60, "gdb to attach")
        try:
            for i in range(a.echoes + 1):
                wait_blocked(cfg["in_syscall"], 120)
                echo(socks[i % len(socks)])
        except (OSError, SystemExit) as e:
            gdb.kill()
            gdb.wait()
            raise SystemExit(f"pathlen: an echo failed under gdb ({e}); gdb said:\n" + tail(log))
        gdb.wait(timeout=cfg["timeout"] + 30)
        if a.lines:
            a.maps = open(f"/proc/{srv.pid}/maps").read().splitlines()
        return read_trace(cfg, log)
    finally:
        clean_up(gdb, srv, tmp)


if __name__ == "__main__":
    main()
