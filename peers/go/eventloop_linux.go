// --model eventloop: the Go article's kqueue design on Linux's epoll. One
// loop per worker, each on an OS thread of its own (runtime.LockOSThread),
// pinned to its CPU with --cpus, with its own SO_REUSEPORT listener, its own
// epoll set and its own eventfd, which other goroutines write to wake it
// (chat: a SAY on another loop queued lines for one of this loop's
// connections, or a SAY's group commit finished). Level-triggered: a
// connection waits for EPOLLIN only while it may read, for EPOLLOUT only
// while its write queue holds output.

package main

import (
	"fmt"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// epollLoop is one worker's loop.
type epollLoop struct {
	*loopCore
	epfd, lfd, efd int

	mu       sync.Mutex
	wakeups  []*loopConn // connections whose sessions asked to be called again
	signaled bool        // efd has been written since the loop last read it
}

// startEventLoops starts a loop per listener; each reports on started (nil,
// or why it could not start) before it serves.
func startEventLoops(lfds []int, cpus []int, maker sessionMaker, limit int) error {
	started := make(chan error, len(lfds))
	for i, lfd := range lfds {
		cpu := -1
		if len(cpus) > 0 {
			cpu = cpus[i%len(cpus)]
		}
		go runEpollLoop(lfd, cpu, maker, limit, started)
	}
	for range lfds {
		if err := <-started; err != nil {
			return err
		}
	}
	return nil
}

func runEpollLoop(lfd, cpu int, maker sessionMaker, limit int, started chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread is the loop's
	if cpu >= 0 {
		if err := pinThread(cpu); err != nil {
			started <- err
			return
		}
	}
	l, err := newEpollLoop(lfd, maker, limit)
	if err != nil {
		started <- err
		return
	}
	started <- nil
	l.run()
}

func newEpollLoop(lfd int, maker sessionMaker, limit int) (*epollLoop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	l := &epollLoop{loopCore: newLoopCore(maker, limit), epfd: epfd, lfd: lfd, efd: efd}
	l.interest = l.register
	l.wakeFor = func(c *loopConn) func() { return func() { l.wake(c) } }
	for _, fd := range []int{lfd, efd} {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			return nil, fmt.Errorf("epoll_ctl: %w", err)
		}
	}
	return l, nil
}

// register makes c's epoll interest what it waits for now.
func (l *epollLoop) register(c *loopConn) {
	var want uint32
	if l.wantsRead(c) {
		want |= unix.EPOLLIN
	}
	if c.q.pending() > 0 {
		want |= unix.EPOLLOUT
	}
	if want == c.events && c.registered {
		return
	}
	op := unix.EPOLL_CTL_MOD
	if !c.registered {
		op = unix.EPOLL_CTL_ADD
	}
	ev := unix.EpollEvent{Events: want, Fd: int32(c.fd)}
	if err := unix.EpollCtl(l.epfd, op, c.fd, &ev); err != nil {
		fmt.Fprintf(os.Stderr, "%s: epoll_ctl: %v\n", progName, err)
		l.close(c)
		return
	}
	c.events, c.registered = want, true
}

// wake asks the loop, from any goroutine, to call c's session again.
func (l *epollLoop) wake(c *loopConn) {
	l.mu.Lock()
	if !c.wakeQueued {
		c.wakeQueued = true
		l.wakeups = append(l.wakeups, c)
	}
	signal := !l.signaled
	l.signaled = true
	l.mu.Unlock()
	if signal {
		var one = [8]byte{1}
		_, _ = unix.Write(l.efd, one[:])
	}
}

// runWoken serves the wake-ups since the eventfd was last read.
func (l *epollLoop) runWoken() {
	var b [8]byte
	_, _ = unix.Read(l.efd, b[:])
	l.mu.Lock()
	woken := l.wakeups
	l.wakeups = nil
	l.signaled = false
	for _, c := range woken {
		c.wakeQueued = false
	}
	l.mu.Unlock()
	for _, c := range woken {
		l.woken(c)
	}
}

func (l *epollLoop) run() {
	events := make([]unix.EpollEvent, 256)
	for {
		timeout := -1
		if l.lingering > 0 {
			timeout = int(lingerCheck.Milliseconds())
		}
		n, err := unix.EpollWait(l.epfd, events, timeout)
		if err != nil && err != unix.EINTR {
			fmt.Fprintf(os.Stderr, "%s: epoll_wait: %v\n", progName, err)
			return
		}
		for _, ev := range events[:max(n, 0)] {
			l.event(int(ev.Fd), ev.Events)
		}
		if l.lingering > 0 {
			l.expireLingering()
		}
	}
}

func (l *epollLoop) event(fd int, events uint32) {
	switch fd {
	case l.lfd:
		l.accept(fd)
		return
	case l.efd:
		l.runWoken()
		return
	}
	if fd >= len(l.conns) || l.conns[fd] == nil {
		return
	}
	c := l.conns[fd]
	if events&unix.EPOLLERR != 0 || (events&unix.EPOLLHUP != 0 && events&unix.EPOLLIN == 0) {
		l.close(c)
		return
	}
	if events&unix.EPOLLOUT != 0 {
		l.pump(c)
	}
	if events&(unix.EPOLLIN|unix.EPOLLHUP) != 0 {
		l.readable(c)
	}
}
