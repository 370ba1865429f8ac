// Sessions: the service of one connection for the loop models (eventloop,
// poll, gnet), free of I/O. A loop hands a session the bytes it reads and
// writes out the bytes the session appends; the models differ only in their
// loop, while the service (the kv store and its RESP parser, the HTTP
// responses, the chat rooms and their log) is the one --model goroutines uses.

package main

import "time"

// session is one connection's service state, owned by one loop.
type session interface {
	// input takes bytes read from the connection.
	input(b []byte)
	// output appends what the connection is owed to out while len(out) is
	// below limit, and says what next: flowNeedInput (read more),
	// flowOutputFull (call again once out has drained), flowBlocked (read
	// nothing and call again when the session wakes its loop) or flowClose
	// (write out, then close).
	output(out []byte, limit int) ([]byte, kvFlow)
	// eof says the peer closed its side: the session appends what it still
	// owes (echo: a partial message) and says what next, as output does;
	// the loop reads no more, and calls output again until it says close.
	eof(out []byte) ([]byte, kvFlow)
}

// flowBlocked: the session waits for something off the loop (a chat SAY's
// group commit); it wakes the loop when it is done.
const flowBlocked kvFlow = flowClose + 1

// newSession makes the session of a new connection for proto; st are the
// loop's counters, wake asks the loop to call output again (chat only).
type sessionMaker func(st *counters, wake func()) session

// echoSession echoes every byte; with --compute-us it cuts the stream into
// --msg-size messages and spins before each, as echoServer does.
type echoSession struct {
	e      *echoServer
	st     *counters
	in     []byte
	echoed int // bytes echoed so far, to count messages
}

func (e *echoServer) session(st *counters, _ func()) session { return &echoSession{e: e, st: st} }

func (s *echoSession) input(b []byte) { s.in = append(s.in, b...) }

func (s *echoSession) output(out []byte, limit int) ([]byte, kvFlow) {
	n := min(len(s.in), max(limit-len(out), 0))
	whole := 1 // bytes that make a unit of echo
	if s.e.computeUs > 0 {
		whole = s.e.msgSize
		n -= n % whole
		for range n / s.e.msgSize {
			spin(time.Duration(s.e.computeUs) * time.Microsecond)
		}
	}
	out = append(out, s.in[:n]...)
	s.st.msgs.Add(uint64((s.echoed+n)/s.e.msgSize - s.echoed/s.e.msgSize))
	s.echoed += n
	s.in = s.in[:copy(s.in, s.in[n:])]
	if len(s.in) >= whole {
		return out, flowOutputFull
	}
	return out, flowNeedInput
}

// backlog is the input not echoed yet.
func (s *echoSession) backlog() int { return len(s.in) }

func (s *echoSession) eof(out []byte) ([]byte, kvFlow) {
	out, _ = s.output(out, int(^uint(0)>>1))
	if len(s.in) > 0 || s.echoed%s.e.msgSize != 0 {
		s.st.msgs.Add(1) // the trailing partial message
	}
	return append(out, s.in...), flowClose
}

// kvSession runs the RESP requests of one connection on the shared store, or
// through its owner goroutine with --kv-owner.
type kvSession struct {
	k    *kvServer
	p    reqParser
	back chan kvDone
}

func (k *kvServer) session(_ *counters, _ func()) session {
	s := &kvSession{k: k}
	if k.owner != nil {
		s.back = make(chan kvDone, 1)
	}
	return s
}

func (s *kvSession) input(b []byte) { s.p.feed(b) }

func (s *kvSession) output(out []byte, limit int) ([]byte, kvFlow) {
	if s.k.owner == nil {
		return s.k.store.execute(&s.p, out, limit)
	}
	// The loop waits for the owner, as the article's connection goroutine does.
	s.k.owner <- kvJob{&s.p, out, s.back}
	done := <-s.back
	return done.out, done.flow
}

// backlog is the input not answered yet.
func (s *kvSession) backlog() int { return len(s.p.buf) - s.p.start }

func (s *kvSession) eof(out []byte) ([]byte, kvFlow) { return out, flowClose }
