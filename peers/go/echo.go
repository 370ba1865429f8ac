// The echo protocol: every byte a connection sends comes back, in order.

package main

import (
	"net"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// echoServer serves the echo protocol, one goroutine per connection.
//
// Backpressure needs no code: each read is written back with a blocking
// write before the next read, so at most one buffer (16 KiB, or one message
// with --compute-us) is pending per connection, under the 64 KiB bound, and a
// peer that does not read stalls only its own goroutine.
type echoServer struct {
	computeUs int
	msgSize   int
}

func (e *echoServer) serve(c *net.TCPConn, st *counters) {
	defer c.Close()
	if e.computeUs == 0 {
		e.echo(c, st)
	} else {
		e.echoMessages(c, st)
	}
}

// echo sends every read back as it is. On EOF everything read has already
// been written, so returning (and closing) is the half-close the protocol asks for.
func (e *echoServer) echo(c *net.TCPConn, st *counters) {
	buf := make([]byte, readBufSize)
	var echoed int
	for {
		n, err := c.Read(buf)
		if n > 0 {
			st.bytesIn.Add(uint64(n))
			w, werr := c.Write(buf[:n])
			st.bytesOut.Add(uint64(w))
			st.msgs.Add(uint64((echoed+w)/e.msgSize - echoed/e.msgSize))
			echoed += w
			if werr != nil {
				return
			}
		}
		if err != nil {
			if echoed%e.msgSize != 0 {
				st.msgs.Add(1) // the trailing partial message
			}
			return
		}
	}
}

// echoMessages cuts the stream into messages of msgSize bytes and spins
// computeUs before echoing each complete one. All the complete messages of a
// read go back in one write; a partial tail stays in the buffer until the
// rest of it arrives, or goes back without a spin at EOF.
func (e *echoServer) echoMessages(c *net.TCPConn, st *counters) {
	buf := make([]byte, max(readBufSize, e.msgSize))
	compute := time.Duration(e.computeUs) * time.Microsecond
	have := 0
	for {
		n, err := c.Read(buf[have:])
		st.bytesIn.Add(uint64(n))
		have += n
		if complete := have / e.msgSize; complete > 0 {
			for range complete {
				spin(compute)
			}
			done := complete * e.msgSize
			w, werr := c.Write(buf[:done])
			st.bytesOut.Add(uint64(w))
			st.msgs.Add(uint64(complete))
			if werr != nil {
				return
			}
			have = copy(buf, buf[done:have])
		}
		if err != nil {
			if have > 0 {
				w, _ := c.Write(buf[:have])
				st.bytesOut.Add(uint64(w))
				st.msgs.Add(1)
			}
			return
		}
	}
}

// spin busy-waits until its thread has used d more of CPU time, on the
// thread's own CPU clock (CLOCK_THREAD_CPUTIME_ID), as the Rust servers'
// service::compute::spin does: the model of request processing asks for CPU
// work, which a sleep would not be, and time spent preempted or throttled
// under a CPU quota must not count as work done. The goroutine is locked to
// its thread meanwhile, so that a preemption cannot move it to another
// thread's clock. Where the clock cannot be read it spins on the monotonic
// clock.
func spin(d time.Duration) {
	if d <= 0 {
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		for start := time.Now(); time.Since(start) < d; {
		}
		return
	}
	end := ts.Nano() + d.Nanoseconds()
	for unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) == nil && ts.Nano() < end {
	}
}
