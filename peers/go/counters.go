// The counters of the stop line, kept where they are counted: each connection
// goroutine (--model goroutines) or each loop (the other models) has its own,
// on a cache line of its own, and the stop line sums them. No counter is
// written by two owners, so a message never touches a cache line that another
// CPU writes too (issue 44: at two workers or more a shared counter per
// message taxes some servers and not others).

package main

import (
	"sync"
	"sync/atomic"
)

// counters are one owner's counts. The owner adds with atomic adds, which
// are uncontended (no other goroutine writes the line); the atomics are for
// the stop line, which reads them while the owner may still run.
type counters struct {
	conns    atomic.Uint64
	bytesIn  atomic.Uint64
	bytesOut atomic.Uint64
	msgs     atomic.Uint64
	_        [32]byte // the rest of a 64-byte cache line
}

// tally holds every live owner's counters and what retired owners counted.
var tally struct {
	mu      sync.Mutex
	live    map[*counters]struct{}
	retired [4]uint64
}

// newCounters registers a new owner's counters.
func newCounters() *counters {
	c := &counters{}
	tally.mu.Lock()
	if tally.live == nil {
		tally.live = map[*counters]struct{}{}
	}
	tally.live[c] = struct{}{}
	tally.mu.Unlock()
	return c
}

// retire folds an owner's counts into the retired totals once it is done
// (a connection goroutine that returns), so the live set stays small.
func (c *counters) retire() {
	tally.mu.Lock()
	delete(tally.live, c)
	for i, v := range c.load() {
		tally.retired[i] += v
	}
	tally.mu.Unlock()
}

func (c *counters) load() [4]uint64 {
	return [4]uint64{c.conns.Load(), c.bytesIn.Load(), c.bytesOut.Load(), c.msgs.Load()}
}

// totals sums every owner's counts: conns, bytes in, bytes out, messages.
func totals() [4]uint64 {
	tally.mu.Lock()
	defer tally.mu.Unlock()
	sum := tally.retired
	for c := range tally.live {
		for i, v := range c.load() {
			sum[i] += v
		}
	}
	return sum
}
