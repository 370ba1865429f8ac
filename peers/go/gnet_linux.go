// --model gnet: the same sessions on gnet v2, the event-loop engine Go users
// pick, set up as its documentation serves a TCP server: an EventHandler
// embedding gnet.BuiltinEventEngine, gnet.Run with a loop per worker
// (WithNumEventLoop), a listener per loop (WithReusePort) and its loops
// unlocked, as gnet's own examples run them (--lock-os-thread true locks each
// on an OS thread, WithLockOSThread). A locked loop whose poll finds nothing
// yields (runtime.Gosched) and so hands its thread off and back: at 20,000
// echoes/s it cost 24.8 µs of CPU per echo against the unlocked loop's 18.1,
// and in the closed loop 10.5 against 9.9. OnTraffic takes what gnet read
// (Conn.Next), the session answers, Conn.Write queues it (gnet keeps its own
// write queue per connection and flushes it on EPOLLOUT), and Conn.Wake
// brings a connection back to OnTraffic from another goroutine (chat: lines
// queued by a SAY on another loop, a SAY's group commit done).
//
// What gnet does not offer, this model does without. gnet reads every
// readable socket and has no way to stop reading one (gnet issue #722), nor a
// callback when a connection's output has drained, so it cannot pause a peer
// as the other models do. Echo, kv and http answer a read one request at a
// time, as the other models do, and stop once gnet's write queue holds their
// limit (64 KiB, or --max-pending when smaller): the requests left wait in the
// session, and the ticker wakes the connection to answer them as the queue
// drains. Answering a whole read at once let one 64 KiB read of GETs of a
// 300 KB value queue about 540 MB of replies. What a peer that does not read
// still sends, gnet reads on, so memory is bounded the one way gnet leaves: a
// connection whose unsent output or unanswered input passes --max-pending
// (1 MiB by default) is closed, as chat cuts a slow subscriber. Chat keeps its own
// output at 64 KiB in gnet's queue and has the ticker wake it while more
// waits (a JOIN's replay is read from the room file as the socket takes it).
// --cpus pins the process to the set; gnet's loop threads cannot be pinned
// one by one.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// gnetServer is the gnet EventHandler.
type gnetServer struct {
	gnet.BuiltinEventEngine
	maker sessionMaker
	// limit is the output asked of a session at a time, and (chat) how much
	// may wait in gnet's queue before the connection's output is held.
	limit int
	// cutAt, when not zero, is the unsent output, or the input read and not
	// yet answered, at which a connection is closed (echo, kv, http: gnet
	// reads a peer that does not read on).
	cutAt  int
	booted chan gnet.Engine

	mu        sync.Mutex
	lingering map[gnet.Conn]time.Time // half-closed connections and their deadline
	held      map[gnet.Conn]struct{}  // connections with output held back
}

// gnetHeldPoll is how often the ticker wakes connections with output held.
// While none is held it ticks at gnetIdleTick, so a connection whose output
// is newly held waits that long at most for its first wake.
const (
	gnetHeldPoll = 5 * time.Millisecond
	gnetIdleTick = 50 * time.Millisecond
)

// gnetConn is a connection's context.
type gnetConn struct {
	sess session
	st   *counters
	out  []byte
	flow kvFlow
	done bool // the session is finished: drop input until the close
	// lingering: half-closed, input dropped until EOF or the deadline.
	lingering bool
}

func runGnet(cfg config, sigs <-chan os.Signal) int {
	// A port chosen here: gnet's listeners, one per loop, must share one.
	fd, addr, err := reusePortListeners(cfg.addr, 1)
	if err != nil {
		return fail(fmt.Errorf("cannot listen on %s: %w", cfg.addr, err))
	}
	maker, limit, chat, err := loopService(cfg)
	if err != nil {
		unix.Close(fd[0])
		return fail(err)
	}
	s := &gnetServer{maker: maker, limit: limit, booted: make(chan gnet.Engine, 1),
		lingering: map[gnet.Conn]time.Time{}, held: map[gnet.Conn]struct{}{}}
	if chat == nil {
		// Output is held back at limit, one request at a time; gnet reads on,
		// so what piles up instead is cut at --max-pending.
		s.cutAt = cfg.maxPending
	}
	failed := make(chan error, 1)
	go func() {
		failed <- gnet.Run(s, "tcp://"+addr.String(),
			gnet.WithNumEventLoop(cfg.workers),
			gnet.WithReusePort(true),
			gnet.WithLockOSThread(cfg.lockOSThread),
			gnet.WithTCPNoDelay(gnet.TCPNoDelay),
			gnet.WithTicker(true),
			gnet.WithLogger(gnetLogger{}))
	}()
	var eng gnet.Engine
	select {
	case eng = <-s.booted:
	case err = <-failed:
	}
	unix.Close(fd[0]) // gnet's listeners hold the port now
	if err == nil {
		err = ready(addr)
	}
	if err != nil {
		if chat != nil {
			chat.shutdown()
		}
		return fail(fmt.Errorf("gnet: %w", err))
	}
	<-sigs
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = eng.Stop(ctx)
	return stop(chat)
}

func (s *gnetServer) OnBoot(eng gnet.Engine) gnet.Action {
	s.booted <- eng
	return gnet.None
}

func (s *gnetServer) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	gc := &gnetConn{st: newCounters(), flow: flowNeedInput}
	gc.st.conns.Add(1)
	gc.sess = s.maker(gc.st, func() { _ = c.Wake(nil) })
	c.SetContext(gc)
	return nil, gnet.None
}

func (s *gnetServer) OnClose(c gnet.Conn, err error) gnet.Action {
	if gc, ok := c.Context().(*gnetConn); ok {
		if errors.Is(err, io.EOF) && !gc.done {
			// The peer closed its side, and gnet closes at once: what the
			// session still owes (echo: a partial message) goes out now,
			// gnet writing what it can before the close.
			out, _ := gc.sess.eof(gc.out[:0])
			n, _ := c.Write(out)
			gc.st.bytesOut.Add(uint64(n))
		}
		if closer, ok := gc.sess.(interface{ closed() }); ok {
			closer.closed()
		}
		gc.st.retire()
	}
	s.mu.Lock()
	delete(s.lingering, c)
	delete(s.held, c)
	s.mu.Unlock()
	return gnet.None
}

// OnTraffic runs when gnet has read from c, or when c was woken: by its
// session (chat), or by the ticker while its output is held (chat, or a
// finished connection whose last output is not written yet).
func (s *gnetServer) OnTraffic(c gnet.Conn) gnet.Action {
	gc := c.Context().(*gnetConn)
	in, _ := c.Next(-1)
	gc.st.bytesIn.Add(uint64(len(in)))
	if gc.done {
		return s.finish(c, gc) // half-closed: input is dropped
	}
	if a, ok := gc.sess.(interface{ aborted() bool }); ok && a.aborted() {
		return gnet.Close
	}
	if len(in) > 0 {
		gc.sess.input(in)
	}
	if gc.flow != flowClose {
		gc.flow = flowOutputFull
	}
	for gc.flow == flowOutputFull && c.OutboundBuffered() < s.limit {
		gc.out, gc.flow = gc.sess.output(gc.out[:0], s.limit)
		if len(gc.out) > 0 {
			n, err := c.Write(gc.out)
			gc.st.bytesOut.Add(uint64(n))
			if err != nil {
				return gnet.Close
			}
		}
	}
	if s.cutAt > 0 && (c.OutboundBuffered() > s.cutAt || unanswered(gc.sess) > s.cutAt) {
		return gnet.Close // a peer that does not read: cut, as chat does
	}
	switch gc.flow {
	case flowAbort:
		return gnet.Close
	case flowClose:
		gc.done = true
		return s.finish(c, gc)
	case flowOutputFull:
		s.hold(c) // more to produce once gnet's write queue drains
	}
	return gnet.None
}

// unanswered is the input a session holds and has not answered yet (echo,
// kv, http), or 0.
func unanswered(sess session) int {
	if b, ok := sess.(interface{ backlog() int }); ok {
		return b.backlog()
	}
	return 0
}

// hold has the ticker wake c soon: gnet says nothing when a connection's
// write queue drains, so a connection with output held back is polled.
func (s *gnetServer) hold(c gnet.Conn) {
	s.mu.Lock()
	s.held[c] = struct{}{}
	s.mu.Unlock()
}

// finish half-closes a connection whose session is done, once gnet has
// written its output, and drops what the peer still sends for a while (the
// ticker closes it); a close with unread input would reset the connection
// and could destroy the last replies before the peer reads them.
func (s *gnetServer) finish(c gnet.Conn, gc *gnetConn) gnet.Action {
	if gc.lingering {
		return gnet.None
	}
	if err := c.Flush(); err != nil {
		return gnet.Close
	}
	if c.OutboundBuffered() > 0 {
		s.hold(c)
		return gnet.None
	}
	if unix.Shutdown(c.Fd(), unix.SHUT_WR) != nil {
		return gnet.Close
	}
	gc.lingering = true
	s.mu.Lock()
	s.lingering[c] = time.Now().Add(lingerTime)
	s.mu.Unlock()
	return gnet.None
}

// OnTick wakes the connections whose output is held, and closes the
// half-closed ones whose time is up.
func (s *gnetServer) OnTick() (time.Duration, gnet.Action) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for c, until := range s.lingering {
		if now.After(until) {
			_ = c.Close()
			delete(s.lingering, c)
		}
	}
	if len(s.held) == 0 {
		return gnetIdleTick, gnet.None
	}
	for c := range s.held {
		_ = c.Wake(nil)
		delete(s.held, c)
	}
	return gnetHeldPoll, gnet.None
}

// gnetLogger sends gnet's warnings and errors to stderr, one line each, and
// drops its chatter (the banner of each start).
type gnetLogger struct{}

func (gnetLogger) Debugf(string, ...any) {}
func (gnetLogger) Infof(string, ...any)  {}
func (gnetLogger) Warnf(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s: gnet: %s\n", progName, fmt.Sprintf(f, a...))
}
func (l gnetLogger) Errorf(f string, a ...any) { l.Warnf(f, a...) }
func (l gnetLogger) Fatalf(f string, a ...any) { l.Warnf(f, a...) }
