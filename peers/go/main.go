// Command srv-go is ringside's Go server. By default (--model goroutines) it
// is the goroutine-per-connection reference server: the idiomatic Go server
// that the papers measure against, serving the echo, chat and kv protocols of
// docs/PROTOCOL.md with the standard library alone, and HTTP/1.1 (--proto
// http) on net/http. --model sessions keeps the goroutine per connection
// and serves echo, kv and http with the event loops' sessions (HTTP: their
// own parser, pipelined responses written together, not net/http). The other
// models serve the same sessions from event loops (the Go event-loop
// article's designs): --model eventloop (epoll, a loop per worker), --model
// poll (one busy loop per worker trying every socket; echo and kv only; it
// keeps its CPUs busy even when idle) and --model gnet (the gnet v2 engine).
//
// Usage:
//
//	srv-go --proto echo|chat|kv|http [--model goroutines|sessions|eventloop|poll|gnet]
//	       [--addr 127.0.0.1:0] [--workers N] [--cpus LIST]
//	       [--compute-us N] [--msg-size 16] [--data DIR] [--fsync never|always]
//	       [--max-pending BYTES] [--kv-owner] [--lock-os-thread true|false]
//
// It prints "READY <addr>" on stdout once it accepts connections. SIGINT and
// SIGTERM stop it: it stops accepting, flushes the room logs, prints one line
// of counters on stderr and exits 0. Bad arguments, a port in use or an
// unusable --data make it print one line on stderr and exit 2.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"ringside/srv-go/internal/affinity"
)

// Sizes every ringside server shares (docs/protocol-notes.md).
const (
	readBufSize     = 16 << 10 // bytes per read
	echoMaxPending  = 64 << 10 // unsent echo per connection
	maxLineLen      = 4096     // a chat line, newline included
	defaultPending  = 1 << 20  // --max-pending
	defaultMsgSize  = 16       // --msg-size
	defaultAddr     = "127.0.0.1:0"
	exitBadUsage    = 2
	progName        = "srv-go"
	usageLine       = "usage: srv-go --proto echo|chat|kv|http [--model goroutines|sessions|eventloop|poll|gnet] [--addr 127.0.0.1:0] [--workers N] [--cpus LIST] [--compute-us N] [--msg-size 16] [--data DIR] [--fsync never|always] [--max-pending BYTES] [--kv-owner] [--lock-os-thread true|false]"
	maxComputeMicro = 10_000_000 // 10 s of spin per message is already absurd
	modelHelp       = `--model goroutines: a goroutine per connection (the default; http on net/http);
  sessions: a goroutine per connection over the event loops' sessions (echo, kv and http; http without net/http);
  eventloop: an epoll loop per worker;
  poll: a loop per worker trying every non-blocking socket in turn, echo and kv only: it keeps a CPU
  per worker busy even when no one is connected, by design (the Go article's non-blocking loop);
  gnet: the gnet v2 engine, a loop per worker.
--lock-os-thread true|false: gnet only: run each gnet loop on a locked OS thread (default false, as gnet's own examples run: measured cheaper).`
)

type protocol int

const (
	protoEcho protocol = iota
	protoChat
	protoKV
	protoHTTP
)

// model is how the server does its I/O.
type model int

const (
	modelGoroutines model = iota // a goroutine per connection, Go's netpoller
	modelSessions                // the same, driving the loop models' sessions
	modelEventloop               // an epoll loop per worker
	modelPoll                    // a busy loop per worker trying every socket
	modelGnet                    // the gnet v2 engine, a loop per worker
)

var modelNames = [...]string{"goroutines", "sessions", "eventloop", "poll", "gnet"}

var protoNames = [...]string{"echo", "chat", "kv", "http"}

// serves says whether a model serves a protocol: poll, the article's
// design for its kv server, serves echo and kv only; sessions no chat (a
// goroutine blocked in Read cannot be woken by another connection's SAY).
func (m model) serves(p protocol) bool {
	switch m {
	case modelPoll:
		return p == protoEcho || p == protoKV
	case modelSessions:
		return p != protoChat
	}
	return true
}

// config is the parsed command line.
type config struct {
	proto      protocol
	model      model
	addr       string
	workers    int
	cpus       []int
	computeUs  int
	msgSize    int
	data       string
	fsync      bool
	maxPending int
	kvOwner    bool
	// lockOSThread: gnet's loops each on a locked OS thread (gnet's
	// WithLockOSThread).
	lockOSThread bool
}

func main() {
	os.Exit(run(os.Args[1:]))
}

// usageError is a problem with the command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

func fail(err error) int {
	fmt.Fprintf(os.Stderr, "%s: %v\n", progName, err)
	return exitBadUsage
}

func run(args []string) int {
	cfg, err := parseArgs(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Println(usageLine)
		fmt.Println(modelHelp)
		return 0
	}
	if err != nil {
		return fail(fmt.Errorf("%w (%s --help for usage)", err, progName))
	}

	// From here on a signal stops the server cleanly, even one that arrives
	// while the room logs are still being recovered.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)

	if len(cfg.cpus) > 0 {
		if err := affinity.PinProcess(cfg.cpus); err != nil {
			return fail(fmt.Errorf("--cpus: %w", err))
		}
	}
	workers := cfg.workers
	if workers == 0 {
		workers = runtime.NumCPU()
		if len(cfg.cpus) > 0 {
			workers = len(cfg.cpus)
		}
	}
	runtime.GOMAXPROCS(workers)
	cfg.workers = workers

	if cfg.model != modelGoroutines && cfg.model != modelSessions {
		return runLoops(cfg, sigs)
	}
	return runGoroutines(cfg, sigs)
}

// runGoroutines serves with a goroutine per connection until a signal
// (--model goroutines and sessions).
func runGoroutines(cfg config, sigs <-chan os.Signal) int {
	// Listen before touching --data, so that a port in use leaves the room
	// logs exactly as they were.
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fail(fmt.Errorf("cannot listen on %s: %w", cfg.addr, unwrapOp(err)))
	}

	var serve func(*net.TCPConn, *counters)
	var chat *chatServer
	var httpSrv *http.Server
	switch {
	case cfg.model == modelSessions:
		maker, limit, _, _ := loopService(cfg) // no chat: no rooms to open
		serve = sessionServe(maker, limit)
	case cfg.proto == protoEcho:
		e := &echoServer{computeUs: cfg.computeUs, msgSize: cfg.msgSize}
		serve = e.serve
	case cfg.proto == protoChat:
		chat, err = openChat(cfg)
		if err != nil {
			ln.Close()
			return fail(err)
		}
		serve = chat.serve
	case cfg.proto == protoKV:
		serve = newKVServer(min(cfg.maxPending, echoMaxPending), cfg.kvOwner).serve
	case cfg.proto == protoHTTP:
		httpSrv = newHTTPServer()
	}

	if err := ready(ln.Addr()); err != nil {
		ln.Close()
		if chat != nil {
			chat.shutdown()
		}
		return fail(err)
	}

	if httpSrv != nil {
		go httpSrv.Serve(ln)
	} else {
		go acceptLoop(ln, serve)
	}

	<-sigs
	ln.Close()
	if httpSrv != nil {
		httpSrv.Close()
	}
	return stop(chat)
}

// ready prints the READY line. os.Stdout is not buffered in Go: the line is
// out once Fprintf returns.
func ready(addr net.Addr) error {
	if _, err := fmt.Fprintf(os.Stdout, "READY %s\n", addr); err != nil {
		return fmt.Errorf("writing the READY line: %w", err)
	}
	return nil
}

// stop flushes the room logs and prints the stop line: every owner's
// counters, summed.
func stop(chat *chatServer) int {
	if chat != nil {
		chat.shutdown()
	}
	t := totals()
	fmt.Fprintf(os.Stderr, "%s: stopped: conns=%d bytes_in=%d bytes_out=%d msgs=%d\n", progName,
		t[0], t[1], t[2], t[3])
	return 0
}

// acceptLoop runs a goroutine per accepted connection until ln is closed.
// Each connection counts into counters of its own, retired when it ends.
func acceptLoop(ln net.Listener, serve func(*net.TCPConn, *counters)) {
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors or a connection that died in the
			// backlog: wait a little and go on, as net/http does.
			if backoff == 0 {
				backoff = 5 * time.Millisecond
			} else {
				backoff = min(2*backoff, time.Second)
			}
			fmt.Fprintf(os.Stderr, "%s: accept: %v; retrying in %v\n", progName, err, backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		st := newCounters()
		st.conns.Add(1)
		// TCP_NODELAY is already on: Go sets it on every TCP connection.
		go func() {
			serve(c.(*net.TCPConn), st)
			st.retire()
		}()
	}
}

// unwrapOp drops the "listen tcp 127.0.0.1:80:" prefix of a *net.OpError,
// which the caller already says in its own words.
func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		var sc *os.SyscallError
		if errors.As(op.Err, &sc) {
			return sc.Err
		}
		return op.Err
	}
	return err
}

// parseArgs parses the common ringside server command line. The flag package
// accepts -flag and --flag, with the value after = or as the next argument.
func parseArgs(args []string) (config, error) {
	cfg := config{}
	fs := flag.NewFlagSet(progName, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported once, on one line, by run
	proto := fs.String("proto", "", "echo, chat, kv or http")
	modelName := fs.String("model", "goroutines", "goroutines, sessions (echo, kv and http), eventloop, poll (echo and kv; keeps a CPU busy per worker even when idle) or gnet")
	fs.StringVar(&cfg.addr, "addr", defaultAddr, "address to listen on")
	workers := fs.String("workers", "", "GOMAXPROCS (default: the CPUs it may use)")
	cpus := fs.String("cpus", "", "CPUs to pin the process to, e.g. 1,3 or 0-3")
	compute := fs.String("compute-us", "0", "echo only: µs of the thread's own CPU time spun per echo message")
	msgSize := fs.String("msg-size", strconv.Itoa(defaultMsgSize), "echo message size in bytes")
	fs.StringVar(&cfg.data, "data", "", "directory of the chat room logs")
	fsync := fs.String("fsync", "never", "never or always")
	maxPending := fs.String("max-pending", strconv.Itoa(defaultPending), "bytes of live output queued per chat connection (kv, http: pending replies, at most 64 KiB; gnet: the unsent output at which a connection is cut)")
	fs.BoolVar(&cfg.kvOwner, "kv-owner", false, "kv: one goroutine owns the store, connections send it their requests")
	// A value, not a bool flag: the bench passes `--lock-os-thread false`
	// (+lock-os-thread=false), which a bool flag would not take.
	lock := fs.String("lock-os-thread", "false", "gnet: each loop on a locked OS thread, true or false")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, err
		}
		return cfg, &usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return cfg, usagef("unexpected argument %q", fs.Arg(0))
	}

	switch *proto {
	case "echo":
		cfg.proto = protoEcho
	case "chat":
		cfg.proto = protoChat
	case "kv":
		cfg.proto = protoKV
	case "http":
		cfg.proto = protoHTTP
	case "":
		return cfg, usagef("--proto is required (echo, chat, kv or http)")
	default:
		return cfg, usagef("--proto %q: expected echo, chat, kv or http", *proto)
	}
	var err error
	if cfg.model, err = parseModel(*modelName, cfg.proto); err != nil {
		return cfg, err
	}
	if *workers != "" {
		if cfg.workers, err = intFlag("workers", *workers, 1, 4096); err != nil {
			return cfg, err
		}
	}
	if *cpus != "" {
		if cfg.cpus, err = affinity.ParseList(*cpus); err != nil {
			return cfg, usagef("--cpus %v", err)
		}
	}
	if cfg.computeUs, err = intFlag("compute-us", *compute, 0, maxComputeMicro); err != nil {
		return cfg, err
	}
	// A message is held until it is complete, so it must fit in what a
	// connection may keep pending.
	if cfg.msgSize, err = intFlag("msg-size", *msgSize, 1, echoMaxPending); err != nil {
		return cfg, err
	}
	switch *fsync {
	case "never":
	case "always":
		cfg.fsync = true
	default:
		return cfg, usagef("--fsync %q: expected never or always", *fsync)
	}
	if cfg.maxPending, err = intFlag("max-pending", *maxPending, 1, math.MaxInt32); err != nil {
		return cfg, err
	}
	if cfg.addr == "" {
		return cfg, usagef("--addr must not be empty")
	}
	switch *lock {
	case "true":
		cfg.lockOSThread = true
	case "false":
	default:
		return cfg, usagef("--lock-os-thread %q: expected true or false", *lock)
	}
	lockGiven := false
	fs.Visit(func(f *flag.Flag) { lockGiven = lockGiven || f.Name == "lock-os-thread" })
	if lockGiven && cfg.model != modelGnet {
		return cfg, usagef("--lock-os-thread is gnet's option (--model gnet); the eventloop and poll loops always lock theirs")
	}
	return cfg, nil
}

// parseModel parses --model and checks that the model serves proto.
func parseModel(name string, proto protocol) (model, error) {
	for m, n := range modelNames {
		if n != name {
			continue
		}
		if !model(m).serves(proto) {
			var served []string
			for p, pn := range protoNames {
				if model(m).serves(protocol(p)) {
					served = append(served, pn)
				}
			}
			last := len(served) - 1
			return 0, usagef("--model %s serves --proto %s and %s only, not %s", name,
				strings.Join(served[:last], ", "), served[last], protoNames[proto])
		}
		return model(m), nil
	}
	return 0, usagef("--model %q: expected goroutines, sessions, eventloop, poll or gnet", name)
}

// intFlag parses a decimal flag value in [lo, hi].
func intFlag(name, s string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, usagef("--%s %q: expected a whole number from %d to %d", name, s, lo, hi)
	}
	return n, nil
}
