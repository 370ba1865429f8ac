// The write queue of a loop connection: the output its socket has not taken
// yet, when a non-blocking write would block.

package main

import "syscall"

// keepQueueCap is the largest queue buffer kept once it has drained.
const keepQueueCap = 256 << 10

// writeQueue holds output; buf[off:] is not written yet.
type writeQueue struct {
	buf []byte
	off int
}

// pending is how many bytes wait.
func (q *writeQueue) pending() int { return len(q.buf) - q.off }

// compact moves the waiting bytes to the front, so more can be appended
// without the buffer growing past what waits.
func (q *writeQueue) compact() {
	if q.off > 0 {
		q.buf = q.buf[:copy(q.buf, q.buf[q.off:])]
		q.off = 0
	}
}

// flush writes with write until everything is written or write would block
// (EAGAIN, which is no error here). It returns the bytes written, and the
// first other error.
func (q *writeQueue) flush(write func([]byte) (int, error)) (int, error) {
	total := 0
	for q.pending() > 0 {
		n, err := write(q.buf[q.off:])
		if n > 0 {
			q.off += n
			total += n
		}
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EAGAIN {
			break
		}
		if err != nil {
			return total, err
		}
		if n <= 0 {
			break
		}
	}
	if q.pending() == 0 {
		q.off = 0
		q.buf = q.buf[:0]
		if cap(q.buf) > keepQueueCap {
			q.buf = nil
		}
	}
	return total, nil
}
