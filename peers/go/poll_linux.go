// --model poll: the Go article's non-blocking loop. One loop per worker, on
// an OS thread of its own, walks its listener and every one of its
// connections' non-blocking sockets in turn, trying an accept, a read and a
// write on each, and starts again at once. It asks the kernel nothing about
// readiness, so it keeps its CPU busy whether or not anyone is connected: by
// design, as in the article, and the reason it is not in the default bench.
// It serves echo and kv (the article's subject), not chat or http.

package main

import "runtime"

// startPollLoops starts a polling loop per listener.
func startPollLoops(lfds []int, cpus []int, maker sessionMaker, limit int) error {
	started := make(chan error, len(lfds))
	for i, lfd := range lfds {
		cpu := -1
		if len(cpus) > 0 {
			cpu = cpus[i%len(cpus)]
		}
		go runPollLoop(lfd, cpu, maker, limit, started)
	}
	for range lfds {
		if err := <-started; err != nil {
			return err
		}
	}
	return nil
}

func runPollLoop(lfd, cpu int, maker sessionMaker, limit int, started chan<- error) {
	runtime.LockOSThread()
	if cpu >= 0 {
		if err := pinThread(cpu); err != nil {
			started <- err
			return
		}
	}
	l := newLoopCore(maker, limit)
	started <- nil
	var order []*loopConn // the connections in the order the loop visits them
	l.accepted = func(c *loopConn) { order = append(order, c) }
	for {
		l.accept(lfd)
		live := order[:0]
		for _, c := range order {
			if !c.closed {
				live = append(live, c)
			}
		}
		clear(order[len(live):])
		order = live
		for _, c := range order {
			if c.closed {
				continue
			}
			if c.q.pending() > 0 {
				l.pump(c) // a write the socket refused last time
			}
			l.readable(c) // does nothing unless the connection may read
		}
		if l.lingering > 0 {
			l.expireLingering()
		}
	}
}
