// What the two hand-written loops (--model eventloop and --model poll) share:
// non-blocking sockets through golang.org/x/sys/unix, SO_REUSEPORT listeners,
// a write queue per connection, and what a connection does when it can read,
// write, or is done. The loops differ in how they learn that a socket is
// ready: epoll_wait, or trying every socket in turn.

package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// lingerCheck is how often a loop with half-closed connections looks at
// their deadlines.
const lingerCheck = 200 * time.Millisecond

// loopConn is one connection of a loop.
type loopConn struct {
	fd     int
	sess   session
	q      writeQueue
	flow   kvFlow // what the session said last
	eof    bool   // the peer closed its side: read no more
	closed bool
	// lingerUntil is set once the connection is half-closed after its last
	// output: input is read and dropped until EOF or then.
	lingerUntil time.Time
	events      uint32 // the epoll interest registered (eventloop)
	registered  bool   // in the loop's epoll set (eventloop)
	wakeQueued  bool   // in the loop's woken list (eventloop; the loop's mutex)
}

// loopCore is one loop's connections and what happens to them on events.
type loopCore struct {
	st    *counters
	maker sessionMaker
	limit int    // pending output at which a connection is not read
	buf   []byte // the loop's read buffer
	// conns holds the loop's connections by descriptor, as evio and gnet
	// keep theirs: the kernel hands out the lowest free descriptor, so the
	// slice is as long as the most descriptors open at once.
	conns []*loopConn
	// interest registers what a connection waits for (nil: poll tries all).
	interest func(c *loopConn)
	// wakeFor is the wake function a session of c gets (nil: none needed).
	wakeFor func(c *loopConn) func()
	// accepted is told of each new connection (nil: nothing to tell).
	accepted       func(c *loopConn)
	lingering      int
	acceptReported time.Time
}

func newLoopCore(maker sessionMaker, limit int) *loopCore {
	st := newCounters()
	return &loopCore{st: st, maker: maker, limit: limit, buf: make([]byte, readBufSize)}
}

// accept takes every connection waiting on the listener lfd.
func (l *loopCore) accept(lfd int) {
	for {
		fd, _, err := unix.Accept4(lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			if err != unix.EAGAIN && err != unix.EINTR && err != unix.ECONNABORTED {
				l.acceptFailed(err)
			}
			if err != unix.EINTR && err != unix.ECONNABORTED {
				return
			}
			continue
		}
		// Go's net sets TCP_NODELAY on every connection; so do the loops.
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		c := &loopConn{fd: fd, flow: flowNeedInput}
		var wake func()
		if l.wakeFor != nil {
			wake = l.wakeFor(c)
		}
		c.sess = l.maker(l.st, wake)
		if fd >= len(l.conns) {
			l.conns = append(l.conns, make([]*loopConn, fd+1-len(l.conns))...)
		}
		l.conns[fd] = c
		l.st.conns.Add(1)
		if l.accepted != nil {
			l.accepted(c)
		}
		l.setInterest(c)
	}
}

// acceptFailed reports a failed accept (out of file descriptors), at most
// once a second: the poll loop retries at once, forever.
func (l *loopCore) acceptFailed(err error) {
	if now := time.Now(); now.Sub(l.acceptReported) >= time.Second {
		l.acceptReported = now
		fmt.Fprintf(os.Stderr, "%s: accept: %v\n", progName, err)
	}
}

func (l *loopCore) setInterest(c *loopConn) {
	if l.interest != nil && !c.closed {
		l.interest(c)
	}
}

// wantsRead says whether the loop should read c now.
func (l *loopCore) wantsRead(c *loopConn) bool {
	return !c.closed && !c.eof && (!c.lingerUntil.IsZero() || (c.flow == flowNeedInput && c.q.pending() < l.limit))
}

// readable reads c once and hands what came to its session.
func (l *loopCore) readable(c *loopConn) {
	if !l.wantsRead(c) {
		return
	}
	n, err := unix.Read(c.fd, l.buf)
	switch {
	case err == unix.EAGAIN || err == unix.EINTR:
		return
	case err != nil:
		l.close(c)
		return
	case n > 0:
		l.st.bytesIn.Add(uint64(n))
		if !c.lingerUntil.IsZero() {
			return // dropped: the connection is done
		}
		c.sess.input(l.buf[:n])
		c.flow = flowOutputFull // ask the session again
	case !c.lingerUntil.IsZero():
		l.close(c) // EOF after our half-close: done
		return
	default:
		c.eof = true
		c.q.compact()
		c.q.buf, c.flow = c.sess.eof(c.q.buf)
		if c.flow == flowAbort {
			l.close(c)
			return
		}
	}
	l.pump(c)
}

// woken is a session's call to be asked again (chat: output queued from
// another loop, or a SAY's sync done).
func (l *loopCore) woken(c *loopConn) {
	if c.closed {
		return
	}
	if a, ok := c.sess.(interface{ aborted() bool }); ok && a.aborted() {
		l.close(c)
		return
	}
	if c.flow != flowClose {
		c.flow = flowOutputFull
	}
	l.pump(c)
}

// pump moves output from the session to the socket until the socket is
// full, the session has nothing more, or the connection ends.
func (l *loopCore) pump(c *loopConn) {
	for {
		if c.flow == flowOutputFull && c.q.pending() < l.limit {
			c.q.compact()
			c.q.buf, c.flow = c.sess.output(c.q.buf, l.limit)
		}
		if c.flow == flowAbort {
			l.close(c)
			return
		}
		n, err := c.q.flush(func(b []byte) (int, error) { return unix.Write(c.fd, b) })
		l.st.bytesOut.Add(uint64(n))
		if err != nil {
			l.close(c)
			return
		}
		if c.q.pending() > 0 {
			break
		}
		if c.flow == flowClose {
			l.finish(c)
			return
		}
		if c.flow != flowOutputFull {
			break
		}
	}
	l.setInterest(c)
}

// finish ends a connection whose output is all written: closed at once if
// the peer has closed its side, else half-closed and drained for a while,
// since closing with unread input would reset the connection and could
// destroy the last replies before the peer reads them.
func (l *loopCore) finish(c *loopConn) {
	if c.eof || unix.Shutdown(c.fd, unix.SHUT_WR) != nil {
		l.close(c)
		return
	}
	c.lingerUntil = time.Now().Add(lingerTime)
	l.lingering++
	l.setInterest(c)
}

// expireLingering closes the half-closed connections whose time is up.
func (l *loopCore) expireLingering() {
	now := time.Now()
	for _, c := range l.conns {
		if c != nil && !c.lingerUntil.IsZero() && now.After(c.lingerUntil) {
			l.close(c)
		}
	}
}

func (l *loopCore) close(c *loopConn) {
	if c.closed {
		return
	}
	c.closed = true
	if !c.lingerUntil.IsZero() {
		l.lingering--
	}
	if closer, ok := c.sess.(interface{ closed() }); ok {
		closer.closed()
	}
	l.conns[c.fd] = nil
	unix.Close(c.fd) // also takes it out of an epoll set
	c.q = writeQueue{}
}

// reusePortListeners opens n non-blocking listeners on addr with
// SO_REUSEPORT, the kernel spreading connections between them; a port of 0
// is chosen by the first and shared by the rest.
func reusePortListeners(addr string, n int) ([]int, net.Addr, error) {
	ta, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	var fds []int
	fail := func(err error) ([]int, net.Addr, error) {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, nil, err
	}
	for range n {
		fd, err := listenReusePort(ta)
		if err != nil {
			return fail(err)
		}
		fds = append(fds, fd)
		if ta.Port == 0 {
			sa, err := unix.Getsockname(fd)
			if err != nil {
				return fail(err)
			}
			ta.Port = sockaddrPort(sa)
		}
	}
	return fds, ta, nil
}

func sockaddrPort(sa unix.Sockaddr) int {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return a.Port
	case *unix.SockaddrInet6:
		return a.Port
	}
	return 0
}

func listenReusePort(ta *net.TCPAddr) (int, error) {
	family, sa := unix.AF_INET6, unix.Sockaddr(nil)
	if ip4 := ta.IP.To4(); ip4 != nil || ta.IP == nil {
		a := &unix.SockaddrInet4{Port: ta.Port}
		copy(a.Addr[:], ip4)
		family, sa = unix.AF_INET, a
	} else {
		a := &unix.SockaddrInet6{Port: ta.Port}
		copy(a.Addr[:], ta.IP.To16())
		sa = a
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for _, opt := range []int{unix.SO_REUSEADDR, unix.SO_REUSEPORT} {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, 1); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Listen(fd, listenBacklog()); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// listenBacklog is the system's limit of a listen queue, which Go's net and
// gnet ask for: net.core.somaxconn, read once, or SOMAXCONN if it cannot be
// read; the kernel caps what listen asks at somaxconn itself.
var listenBacklog = sync.OnceValue(func() int {
	b, err := os.ReadFile("/proc/sys/net/core/somaxconn")
	if err != nil {
		return unix.SOMAXCONN
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n <= 0 {
		return unix.SOMAXCONN
	}
	return n
})

// pinThread pins the calling OS thread to cpu, as the Rust servers pin each
// worker; the caller has locked its goroutine to the thread.
func pinThread(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pinning a loop to CPU %d: %w", cpu, err)
	}
	return nil
}
