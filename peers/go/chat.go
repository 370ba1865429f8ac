// The chat service: durable rooms, and the two goroutines of a connection.
//
// Each connection has a reader goroutine, which parses commands and runs
// them, and a writer goroutine, which owns the socket's output. Everything a
// connection is sent goes through one ordered queue to its writer: its own
// replies, the MSG lines of other connections, and JOIN replays, which the
// writer streams from the room file itself. One queue keeps the promises that
// depend on order, with no lock held across any I/O on a socket:
//
//   - JOIN subscribes and queues its replay under the room's lock, noting the
//     log's end: the replay is the records before that point, the live MSG
//     lines queued behind it are the ones after, so the seam has no gap and
//     no repeat, and JOINED carries the seq at that point.
//   - MSG lines and the sender's ACK are queued under the room's lock, so a
//     connection sees a room's messages in seq order.
//   - LEAVE unsubscribes under the room's lock before it queues LEFT, so no
//     MSG of the room follows LEFT.
//
// Two limits keep memory bounded. MSG lines from other connections count
// against --max-pending, and the connection is cut the moment they would pass
// it, so a slow subscriber never slows a sender. A connection's own output is
// not cut but flow-controlled: the reader stops taking commands while more
// than ownPendingLimit bytes of its replies wait, and a replay is written with
// blocking writes as it is read from the file, never held in memory.

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// ownPendingLimit is how much of a connection's own output may wait
	// before its reader stops taking commands.
	ownPendingLimit = 64 << 10
	// lingerTime bounds how long a connection cut for a long line is read
	// and discarded, so that the peer sees the ERR line rather than a reset.
	lingerTime = 2 * time.Second
	// keepBufferCap is the largest output buffer kept for reuse.
	keepBufferCap = 64 << 10
)

// chatServer is the set of rooms and the settings every connection shares.
type chatServer struct {
	dir        string
	removeDir  bool // dir is a temporary directory of our own
	fsync      bool
	maxPending int

	mu    sync.RWMutex
	rooms map[string]*room
}

// room is one chat room: its log and its live subscribers.
type room struct {
	name string
	// mu serialises appends, so seqs are given in file order, and guards subs;
	// MSG lines are queued to subscribers under it, so every subscriber gets
	// them in seq order.
	mu   sync.Mutex
	log  *roomLog
	subs map[subscriber]struct{}
	line []byte // scratch for the MSG line of an append
	// commit is the room file's group commit (--fsync always).
	commit groupCommit
}

// openChat prepares the room directory and recovers every room in it.
func openChat(cfg config) (*chatServer, error) {
	s := &chatServer{dir: cfg.data, fsync: cfg.fsync, maxPending: cfg.maxPending, rooms: map[string]*room{}}
	if s.dir == "" {
		dir, err := os.MkdirTemp("", "srv-go-rooms-")
		if err != nil {
			return nil, fmt.Errorf("creating a temporary room directory: %w", err)
		}
		s.dir, s.removeDir = dir, true
	} else if err := prepareDataDir(s.dir); err != nil {
		return nil, err
	}
	if err := s.recover(); err != nil {
		s.closeLogs()
		if s.removeDir {
			os.RemoveAll(s.dir)
		}
		return nil, err
	}
	return s, nil
}

// prepareDataDir checks that dir is a directory the server can use, and
// creates it if it is missing but its parent exists.
func prepareDataDir(dir string) error {
	st, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("--data %s: cannot create it: %w", dir, unwrapPath(err))
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("--data %s: %w", dir, unwrapPath(err))
	}
	if !st.IsDir() {
		return fmt.Errorf("--data %s: not a directory", dir)
	}
	if err := syscall.Access(dir, 0x7); err != nil { // R_OK | W_OK | X_OK
		return fmt.Errorf("--data %s: not readable and writable: %w", dir, err)
	}
	return nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// recover opens every DIR/<room>.log and checks it. Files whose name is not
// a room's are none of the server's business. A symlink is followed, as
// opening the room would follow it; a directory named x.log is skipped.
func (s *chatServer) recover() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("--data %s: %w", s.dir, unwrapPath(err))
	}
	warn := func(msg string) { fmt.Fprintf(os.Stderr, "%s: %s\n", progName, msg) }
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || !validName([]byte(name)) {
			continue
		}
		path := filepath.Join(s.dir, e.Name())
		st, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("room log %s: %w", path, unwrapPath(err))
		}
		if !st.Mode().IsRegular() {
			continue
		}
		l, err := openRoomLog(path, warn)
		if err != nil {
			var ce *CorruptError
			if errors.As(err, &ce) {
				return err
			}
			return fmt.Errorf("room log %s: %w", path, unwrapPath(err))
		}
		s.rooms[name] = &room{name: name, log: l, subs: map[subscriber]struct{}{}}
	}
	return nil
}

// room returns the room called name, creating its file if it is new.
func (s *chatServer) room(name []byte) (*room, error) {
	s.mu.RLock()
	r := s.rooms[string(name)]
	s.mu.RUnlock()
	if r != nil {
		return r, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.rooms[string(name)]; r != nil {
		return r, nil
	}
	path := filepath.Join(s.dir, string(name)+".log")
	l, err := openRoomLog(path, func(msg string) { fmt.Fprintf(os.Stderr, "%s: %s\n", progName, msg) })
	if err != nil {
		return nil, err
	}
	if s.fsync {
		// The new file's directory entry must be as durable as its records.
		if err := syncDir(s.dir); err != nil {
			l.close()
			return nil, err
		}
	}
	r = &room{name: string(name), log: l, subs: map[subscriber]struct{}{}}
	s.rooms[r.name] = r
	return r, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// shutdown flushes every room log to disk and removes a temporary directory.
// It keeps the server's and every room's lock, so that no append can follow
// the flush in the moments before the process exits.
func (s *chatServer) shutdown() {
	s.mu.Lock()
	for _, r := range s.rooms {
		r.mu.Lock()
		if err := r.log.sync(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: room %s: flushing the log: %v\n", progName, r.name, err)
		}
	}
	if s.removeDir {
		if err := os.RemoveAll(s.dir); err != nil {
			fmt.Fprintf(os.Stderr, "%s: removing %s: %v\n", progName, s.dir, err)
		}
	}
}

func (s *chatServer) closeLogs() {
	for _, r := range s.rooms {
		r.log.close()
	}
}

// say appends text to the room, queues the MSG line to every other
// subscriber, and the ACK, or ERR storage failure, to the sender.
//
// With --fsync always the append is a write(2) under the room's mutex and the
// sync comes after it, outside the mutex, through the room's group commit:
// appends by other connections meanwhile share the next fdatasync, and this
// connection's reader waits for the sync before it sends the ACK and reads its
// next command.
func (r *room) say(c *client, text []byte, fsync bool) {
	seq, ticket, err := r.publish(c, c.nick, text, fsync)
	if err != nil {
		c.replyErr(reasonStorage)
		return
	}
	if fsync {
		if err := r.commit.wait(ticket, r.log.f); err != nil {
			fmt.Fprintf(os.Stderr, "%s: room %s: syncing a message: %v\n", progName, r.name, err)
			c.replyErr(reasonStorage)
			return
		}
	}
	c.out = append(append(append(c.out[:0], "ACK "...), r.name...), ' ')
	c.out = append(strconv.AppendUint(c.out, seq, 10), '\n')
	c.pushOwn(c.out)
}

// subscriber is a connection that a room queues MSG lines to: a goroutine
// model's client, or a loop model's.
type subscriber interface {
	// pushLive queues another connection's MSG line, or cuts the connection
	// if that would put more than --max-pending bytes in its queue.
	pushLive(b []byte)
}

// publish appends text by nick to the room and queues its MSG line to every
// subscriber but from, under the room's mutex, so every subscriber gets the
// room in seq order. With fsync it returns the group commit's ticket for the
// append, which the caller waits for before the ACK. A failure is reported on
// stderr; the caller answers ERR storage failure.
func (r *room) publish(from subscriber, nick, text []byte, fsync bool) (seq, ticket uint64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	err = r.commit.failed()
	if err == nil {
		seq, err = r.log.append(nick, text, false)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: room %s: appending a message: %v\n", progName, r.name, err)
		return 0, 0, err
	}
	r.line = appendMsg(r.line[:0], r.name, seq, nick, text)
	for other := range r.subs {
		if other != from {
			other.pushLive(r.line)
		}
	}
	if fsync {
		ticket = r.commit.written()
	}
	return seq, ticket, nil
}

func appendMsg(b []byte, room string, seq uint64, name, text []byte) []byte {
	b = append(append(append(b, "MSG "...), room...), ' ')
	b = append(strconv.AppendUint(b, seq, 10), ' ')
	b = append(append(append(b, name...), ' '), text...)
	return append(b, '\n')
}

// segment is a run of queued output: bytes, or a JOIN replay.
type segment struct {
	data []byte
	live int // how many of data's bytes are other connections' MSG lines
	join *joinJob
}

// joinJob is the replay of a JOIN: the records in [off, end) of the room's
// log, then JOINED with next, the seq the first live message will have.
type joinJob struct {
	room     *room
	off, end int64
	next     uint64
}

// client is one connection.
type client struct {
	conn *net.TCPConn
	srv  *chatServer
	// rc counts for the reader goroutine, wc for the writer: each its own.
	rc, wc *counters

	// Owned by the reader goroutine.
	nick   []byte
	joined map[string]*room
	out    []byte // scratch for a reply

	// The output queue, guarded by mu.
	mu      sync.Mutex
	segs    []segment
	live    int    // queued bytes counted against --max-pending
	own     int    // queued bytes of the connection's own replies
	closing bool   // the reader is done: send what is queued, then stop
	dead    bool   // the connection failed or was cut: drop everything
	spare   []byte // a written-out buffer kept for the next segment
	// wake tells the writer there is work; drained tells the reader some
	// output went out. Both hold at most one token, so no signal is lost and
	// no sender blocks.
	wake    chan struct{}
	drained chan struct{}
	// writerDone is closed when the writer goroutine returns.
	writerDone chan struct{}
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// serve runs a connection: this goroutine reads and runs its commands, a
// second one writes its output.
func (s *chatServer) serve(conn *net.TCPConn, st *counters) {
	c := &client{
		conn:       conn,
		srv:        s,
		rc:         st,
		wc:         newCounters(),
		nick:       []byte("anon"),
		joined:     map[string]*room{},
		wake:       make(chan struct{}, 1),
		drained:    make(chan struct{}, 1),
		writerDone: make(chan struct{}),
	}
	go c.writeLoop()

	lr := lineReader{r: conn, buf: make([]byte, readBufSize), st: st}
	for {
		line, err := lr.next()
		if err != nil {
			c.leaveAll()
			switch {
			case errors.Is(err, errLineTooLong):
				c.replyErr(reasonLineTooLong)
				c.finish()
				linger(c.conn, c.rc)
			case errors.Is(err, io.EOF):
				c.finish()
			default:
				c.kill()
			}
			conn.Close()
			return
		}
		st.msgs.Add(1)
		s.run(c, line)
		if !c.waitOwn() {
			c.leaveAll()
			conn.Close()
			return
		}
	}
}

// run carries out one command line.
func (s *chatServer) run(c *client, line []byte) {
	cmd, reason := parseLine(line)
	if reason != "" {
		c.replyErr(reason)
		return
	}
	switch cmd.kind {
	case cmdNick:
		c.nick = append(c.nick[:0], cmd.arg...)
		c.pushOwn([]byte("OK\n"))
	case cmdPing:
		c.out = append(append(append(c.out[:0], "PONG "...), cmd.text...), '\n')
		c.pushOwn(c.out)
	case cmdJoin:
		if c.joined[string(cmd.arg)] != nil {
			c.replyErr(reasonAlreadyJoined)
			return
		}
		r, err := s.room(cmd.arg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: room %s: %v\n", progName, cmd.arg, err)
			c.replyErr(reasonStorage)
			return
		}
		r.mu.Lock()
		r.subs[c] = struct{}{}
		c.pushJoin(&joinJob{room: r, off: r.log.offsetAfter(cmd.since), end: r.log.end, next: r.log.next()})
		r.mu.Unlock()
		c.joined[r.name] = r
	case cmdLeave:
		r := c.joined[string(cmd.arg)]
		if r == nil {
			c.replyErr(reasonNotJoined)
			return
		}
		c.leave(r)
		delete(c.joined, r.name)
		c.out = append(append(append(c.out[:0], "LEFT "...), r.name...), '\n')
		c.pushOwn(c.out)
	case cmdSay:
		r, err := s.room(cmd.arg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: room %s: %v\n", progName, cmd.arg, err)
			c.replyErr(reasonStorage)
			return
		}
		r.say(c, cmd.text, s.fsync)
	}
}

func (c *client) replyErr(reason string) {
	c.out = append(append(append(c.out[:0], "ERR "...), reason...), '\n')
	c.pushOwn(c.out)
}

// leave unsubscribes from the room. Every MSG line of the room queued before
// it is ahead of whatever the caller queues next.
func (c *client) leave(r *room) {
	r.mu.Lock()
	delete(r.subs, c)
	r.mu.Unlock()
}

func (c *client) leaveAll() {
	for name, r := range c.joined {
		c.leave(r)
		delete(c.joined, name)
	}
}

// pushOwn queues a reply of the connection's own.
func (c *client) pushOwn(b []byte) { c.push(b, false) }

// pushLive queues another connection's MSG line, or cuts this connection if
// that would put more than --max-pending bytes in its queue.
func (c *client) pushLive(b []byte) { c.push(b, true) }

func (c *client) push(b []byte, live bool) {
	c.mu.Lock()
	if c.dead || c.closing {
		c.mu.Unlock()
		return
	}
	if live && c.live+len(b) > c.srv.maxPending {
		c.mu.Unlock()
		c.kill()
		return
	}
	if n := len(c.segs); n == 0 || c.segs[n-1].join != nil {
		c.segs = append(c.segs, segment{data: c.spare[:0]})
		c.spare = nil
	}
	seg := &c.segs[len(c.segs)-1]
	seg.data = append(seg.data, b...)
	if live {
		seg.live += len(b)
		c.live += len(b)
	} else {
		c.own += len(b)
	}
	c.mu.Unlock()
	notify(c.wake)
}

func (c *client) pushJoin(j *joinJob) {
	c.mu.Lock()
	if !c.dead && !c.closing {
		c.segs = append(c.segs, segment{join: j})
	}
	c.mu.Unlock()
	notify(c.wake)
}

// waitOwn blocks while too much of the connection's own output waits, and
// reports whether the connection is still alive.
func (c *client) waitOwn() bool {
	for {
		c.mu.Lock()
		dead, over := c.dead, c.own > ownPendingLimit
		c.mu.Unlock()
		if dead {
			return false
		}
		if !over {
			return true
		}
		<-c.drained
	}
}

// finish tells the writer to send what is queued and stop, and waits for it.
func (c *client) finish() {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	notify(c.wake)
	<-c.writerDone
}

// kill cuts the connection at once, dropping its queued output. Safe to call
// from any goroutine, any number of times.
func (c *client) kill() {
	c.mu.Lock()
	c.dead = true
	c.segs = nil
	c.mu.Unlock()
	c.conn.Close()
	notify(c.wake)
	notify(c.drained)
}

// linger half-closes conn, then reads and discards what the peer still
// sends, for a bounded time: closing a socket with unread input resets the
// connection, and the reset could destroy the last line (chat's ERR, kv's
// reply to QUIT) before the peer reads it.
func linger(conn *net.TCPConn, st *counters) {
	if err := conn.CloseWrite(); err != nil {
		return
	}
	if err := conn.SetReadDeadline(time.Now().Add(lingerTime)); err != nil {
		return
	}
	n, _ := io.Copy(io.Discard, conn)
	st.bytesIn.Add(uint64(n))
}

// writeLoop sends the queued output until the reader finishes or the
// connection dies.
func (c *client) writeLoop() {
	defer close(c.writerDone)
	defer c.wc.retire()
	var batch []segment
	for {
		c.mu.Lock()
		batch, c.segs = c.segs, batch[:0]
		dead, closing := c.dead, c.closing
		c.mu.Unlock()
		if dead {
			return
		}
		if len(batch) == 0 {
			if closing {
				return
			}
			<-c.wake
			continue
		}
		for i := range batch {
			seg := &batch[i]
			var err error
			if seg.join != nil {
				err = c.replay(seg.join)
			} else {
				var n int
				n, err = c.conn.Write(seg.data)
				c.wc.bytesOut.Add(uint64(n))
			}
			c.mu.Lock()
			c.live -= seg.live
			c.own -= len(seg.data) - seg.live
			if c.spare == nil && cap(seg.data) <= keepBufferCap {
				c.spare = seg.data[:0]
			}
			c.mu.Unlock()
			*seg = segment{}
			notify(c.drained)
			if err != nil {
				c.kill()
				return
			}
		}
	}
}

// replay streams the records of a JOIN from the room's file, then JOINED.
// It reads with pread outside the room's lock, and writes with blocking
// writes, so a slow reader holds up only itself.
func (c *client) replay(j *joinJob) error {
	r := j.room
	w := bufio.NewWriterSize(countingWriter{c.conn, c.wc}, readBufSize)
	var line []byte
	err := r.log.readRecords(j.off, j.end, func(seq uint64, name, text []byte) error {
		line = appendMsg(line[:0], r.name, seq, name, text)
		_, err := w.Write(line)
		return err
	})
	if err != nil {
		if !isNetError(err) {
			fmt.Fprintf(os.Stderr, "%s: room %s: replay: %v\n", progName, r.name, err)
		}
		return err
	}
	line = append(append(append(line[:0], "JOINED "...), r.name...), ' ')
	line = append(strconv.AppendUint(line, j.next, 10), '\n')
	if _, err := w.Write(line); err != nil {
		return err
	}
	return w.Flush()
}

func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// countingWriter counts the bytes written to a connection.
type countingWriter struct {
	w  io.Writer
	st *counters
}

func (cw countingWriter) Write(p []byte) (int, error) {
	n, err := cw.w.Write(p)
	cw.st.bytesOut.Add(uint64(n))
	return n, err
}

var errLineTooLong = errors.New("line too long")

// lineReader splits a connection's input into lines of at most maxLineLen
// bytes, newline included. It reports a longer line as soon as maxLineLen
// bytes have come without a newline, without waiting for the rest.
type lineReader struct {
	r       io.Reader
	buf     []byte
	start   int   // first byte of the current line
	scanned int   // bytes from start known to hold no newline
	end     int   // end of the data in buf
	err     error // the read error to report once the buffer is used up
	st      *counters
}

// next returns the next line without its newline or a \r before it. The line
// aliases the buffer until the next call. An unterminated line at EOF is dropped.
func (lr *lineReader) next() ([]byte, error) {
	for {
		window := lr.buf[lr.start+lr.scanned : min(lr.end, lr.start+maxLineLen)]
		if i := bytes.IndexByte(window, '\n'); i >= 0 {
			line := lr.buf[lr.start : lr.start+lr.scanned+i]
			lr.start += lr.scanned + i + 1
			lr.scanned = 0
			return bytes.TrimSuffix(line, []byte("\r")), nil
		}
		lr.scanned += len(window)
		if lr.scanned >= maxLineLen {
			return nil, errLineTooLong
		}
		if lr.err != nil {
			return nil, lr.err
		}
		if lr.end == len(lr.buf) {
			// A line is shorter than the buffer, so this always frees room.
			lr.end = copy(lr.buf, lr.buf[lr.start:lr.end])
			lr.start = 0
		}
		n, err := lr.r.Read(lr.buf[lr.end:])
		lr.st.bytesIn.Add(uint64(n))
		lr.end += n
		lr.err = err
	}
}
