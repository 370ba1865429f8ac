package main

import (
	"bytes"
	"errors"
	"syscall"
	"testing"
)

// fakeSocket takes at most room bytes per write, then says EAGAIN.
type fakeSocket struct {
	got  []byte
	room int
	err  error
}

func (s *fakeSocket) write(b []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.room == 0 {
		return 0, syscall.EAGAIN
	}
	n := min(len(b), s.room)
	s.room -= n
	s.got = append(s.got, b[:n]...)
	return n, nil
}

func TestWriteQueueKeepsWhatTheSocketRefuses(t *testing.T) {
	var q writeQueue
	sock := &fakeSocket{room: 3}
	q.buf = append(q.buf, "hello, "...)
	n, err := q.flush(sock.write)
	if err != nil || n != 3 || q.pending() != 4 {
		t.Fatalf("flush: n=%d err=%v pending=%d", n, err, q.pending())
	}
	// More output queues behind what waits, in order.
	q.compact()
	q.buf = append(q.buf, "world"...)
	if string(q.buf[q.off:]) != "lo, world" {
		t.Fatalf("queue holds %q", q.buf[q.off:])
	}
	sock.room = 100
	if n, err := q.flush(sock.write); err != nil || n != 9 {
		t.Fatalf("second flush: n=%d err=%v", n, err)
	}
	if !bytes.Equal(sock.got, []byte("hello, world")) || q.pending() != 0 || len(q.buf) != 0 {
		t.Fatalf("socket got %q, pending %d", sock.got, q.pending())
	}
}

func TestWriteQueueReportsAFailedWrite(t *testing.T) {
	q := writeQueue{buf: []byte("x")}
	boom := errors.New("broken pipe")
	if _, err := q.flush((&fakeSocket{err: boom}).write); err != boom {
		t.Fatalf("flush returned %v", err)
	}
}

func TestWriteQueueDropsAHugeDrainedBuffer(t *testing.T) {
	q := writeQueue{buf: make([]byte, keepQueueCap+1)}
	if _, err := q.flush((&fakeSocket{room: keepQueueCap + 1}).write); err != nil {
		t.Fatal(err)
	}
	if q.buf != nil {
		t.Fatalf("a drained %d-byte buffer was kept", cap(q.buf))
	}
}
