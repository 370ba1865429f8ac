// --model sessions: a goroutine per connection on Go's netpoller, as --model
// goroutines, driving the sessions of the loop models (session.go) instead of
// the goroutine model's own services. The goroutine reads, hands the bytes to
// its session, and writes what the session appends with one blocking Write
// per batch before it reads again: a peer that does not read blocks that
// Write, and nothing more is read, so at most the session's limit waits.
//
// What it is for: in --proto http --model goroutines is Go's net/http, which
// answers pipelined requests one at a time and flushes each response apart;
// the loop models parse with httpwire.go and write all the responses of a
// read together. This model is the goroutine design over the very code the
// loops run, so that between go-sessions, go-eventloop and go-gnet only the
// I/O model differs, in echo and kv as in http. It does not serve chat: a
// chat session is woken by other connections' SAYs, which a goroutine blocked
// in Read cannot hear; --model goroutines serves chat with its reader and
// writer goroutines (chat.go).

package main

import (
	"errors"
	"io"
	"net"
)

// pump asks s for output and writes it while s says there is more; it says
// flowAbort when a write failed.
func pump(s session, flow kvFlow, out *[]byte, limit int, write func() bool) kvFlow {
	for flow == flowOutputFull {
		*out, flow = s.output((*out)[:0], limit)
		if !write() {
			return flowAbort
		}
	}
	return flow
}

// sessionServe serves each connection with a session of maker, at most
// limit bytes of output written at a time.
func sessionServe(maker sessionMaker, limit int) func(*net.TCPConn, *counters) {
	return func(c *net.TCPConn, st *counters) { serveSession(c, st, maker(st, nil), limit) }
}

// serveSession runs one connection's session until it ends: the peer closes
// its side and the session has said all it owes, or the session says close
// (kv QUIT, an HTTP refusal or Connection: close), which half-closes the
// connection once its output is written and drains it for a while (linger).
func serveSession(c *net.TCPConn, st *counters, s session, limit int) {
	defer c.Close()
	buf := make([]byte, readBufSize)
	var out []byte
	write := func() bool {
		if len(out) == 0 {
			return true
		}
		n, err := c.Write(out)
		st.bytesOut.Add(uint64(n))
		return err == nil
	}
	for {
		n, err := c.Read(buf)
		flow := flowNeedInput
		if n > 0 {
			st.bytesIn.Add(uint64(n))
			s.input(buf[:n])
			flow = flowOutputFull
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			// The peer closed its side: what the session owes for the input
			// goes out, then what it owes at the end (echo: a partial
			// message), then the connection closes.
			if flow = pump(s, flow, &out, limit, write); flow == flowNeedInput {
				out, flow = s.eof(out[:0])
				if !write() {
					return
				}
			}
		}
		if flow = pump(s, flow, &out, limit, write); flow == flowAbort {
			return
		}
		switch {
		case flow == flowClose && err == nil:
			linger(c, st)
			return
		case flow != flowNeedInput || err != nil:
			return
		}
	}
}
