// Chat for the loop models (eventloop, gnet): the rooms, their log and their
// rules are chat.go's; what changes is the connection, which is a session
// its loop calls instead of two goroutines.
//
// Everything a connection is sent goes through one mutex-guarded queue of
// segments, as in chat.go: its own replies, MSG lines that SAYs on any loop
// queue under the room's lock, and JOIN replays. The loop moves the queue
// into the connection's write queue, reading a replay from the room file a
// chunk at a time as the socket takes it. A push from another goroutine wakes
// the connection's loop (the eventloop's eventfd, gnet's Conn.Wake) when the
// loop is not already at work on it.
//
// Durability is chat.go's: a SAY's record is written (one write(2)) before
// its ACK is queued; with --fsync always the ACK waits for the room's group
// commit, which a goroutine off the loop waits for, the connection running no
// command meanwhile while the loop serves the others.

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
)

// flowAbort: the connection was cut; close it at once, dropping its output.
const flowAbort = flowBlocked + 1

// replayChunk is how much of a replay is read from the file at a time.
const replayChunk = 16 << 10

// errChunkFull stops a replay read once a chunk is full.
var errChunkFull = errors.New("replay chunk full")

// loopClient is a chat connection of a loop model.
type loopClient struct {
	srv  *chatServer
	st   *counters
	wake func()

	// Owned by the loop. A command run moves off past its line; the input
	// left is moved down once per read, not once per command.
	in        []byte // input; in[off:] is not run yet
	off       int
	scanned   int // bytes of in[off:] known to hold no newline
	nick      []byte
	joined    map[string]*room
	scratch   []byte
	finishing bool // the peer closed its side, or a line was too long

	// Shared with the goroutines that push to the connection, guarded by mu.
	mu     sync.Mutex
	segs   []segment
	live   int  // queued bytes of other connections' MSG lines
	own    int  // queued bytes of the connection's own replies
	acking bool // a SAY waits for its group commit: run no command
	dead   bool // cut: drop everything
	asleep bool // the loop has nothing to do for it until a push
}

func (s *chatServer) loopSession(st *counters, wake func()) session {
	return &loopClient{srv: s, st: st, wake: wake, nick: []byte("anon"), joined: map[string]*room{}}
}

func (c *loopClient) input(b []byte) {
	if !c.finishing {
		c.in = append(c.in[:copy(c.in, c.in[c.off:])], b...)
		c.off = 0
	}
}

// push queues b; live bytes count against --max-pending.
func (c *loopClient) push(b []byte, live bool) {
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return
	}
	if live && c.live+len(b) > c.srv.maxPending {
		// Cut: the loop must learn it even while the socket is full.
		c.dead, c.segs, c.asleep = true, nil, true
	} else {
		if n := len(c.segs); n == 0 || c.segs[n-1].join != nil {
			c.segs = append(c.segs, segment{})
		}
		seg := &c.segs[len(c.segs)-1]
		seg.data = append(seg.data, b...)
		if live {
			seg.live += len(b)
			c.live += len(b)
		} else {
			c.own += len(b)
		}
	}
	c.wakeLocked()
}

// wakeLocked wakes the loop if it sleeps on this connection, and unlocks.
func (c *loopClient) wakeLocked() {
	wake := c.asleep
	c.asleep = false
	c.mu.Unlock()
	if wake {
		c.wake()
	}
}

func (c *loopClient) pushLive(b []byte) { c.push(b, true) }
func (c *loopClient) pushOwn(b []byte)  { c.push(b, false) }

func (c *loopClient) replyErr(reason string) {
	c.scratch = append(append(append(c.scratch[:0], "ERR "...), reason...), '\n')
	c.pushOwn(c.scratch)
}

// output runs commands and moves the queue into out, until out reaches
// limit or nothing more can be done now.
func (c *loopClient) output(out []byte, limit int) ([]byte, kvFlow) {
	for {
		var err error
		out, err = c.drain(out, limit)
		if err != nil {
			c.kill()
			return out, flowAbort
		}
		if len(out) >= limit {
			return out, flowOutputFull
		}
		if !c.step() {
			break
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.dead:
		return out, flowAbort
	case len(c.segs) > 0:
		return out, flowOutputFull // pushed since the drain
	case c.acking:
		c.asleep = true
		return out, flowBlocked
	case c.finishing:
		return out, flowClose
	}
	c.asleep = true
	return out, flowNeedInput
}

// step runs the next command line if one is complete and the connection may
// run one, and says whether it did something.
func (c *loopClient) step() bool {
	c.mu.Lock()
	blocked := c.acking || c.own > ownPendingLimit || c.dead
	c.mu.Unlock()
	if blocked || c.finishing {
		return false
	}
	rest := c.in[c.off:]
	window := rest[c.scanned:min(len(rest), maxLineLen)]
	i := bytes.IndexByte(window, '\n')
	if i < 0 {
		c.scanned += len(window)
		if c.scanned < maxLineLen {
			return false
		}
		c.leaveAll()
		c.replyErr(reasonLineTooLong)
		c.finishing, c.in, c.off = true, nil, 0
		return true
	}
	end := c.scanned + i
	line := bytes.TrimSuffix(rest[:end], []byte("\r"))
	c.st.msgs.Add(1)
	c.run(line)
	c.off += end + 1
	c.scanned = 0
	return true
}

// run carries out one command line, as chatServer.run does.
func (c *loopClient) run(line []byte) {
	cmd, reason := parseLine(line)
	if reason != "" {
		c.replyErr(reason)
		return
	}
	out := c.scratch[:0]
	switch cmd.kind {
	case cmdNick:
		c.nick = append(c.nick[:0], cmd.arg...)
		out = append(out, "OK\n"...)
	case cmdPing:
		out = append(append(append(out, "PONG "...), cmd.text...), '\n')
	case cmdJoin:
		c.join(cmd)
		return
	case cmdLeave:
		r := c.joined[string(cmd.arg)]
		if r == nil {
			c.replyErr(reasonNotJoined)
			return
		}
		c.leave(r)
		out = append(append(append(out, "LEFT "...), r.name...), '\n')
	case cmdSay:
		c.say(cmd)
		return
	}
	c.scratch = out
	c.pushOwn(out)
}

func (c *loopClient) join(cmd command) {
	if c.joined[string(cmd.arg)] != nil {
		c.replyErr(reasonAlreadyJoined)
		return
	}
	r, err := c.srv.room(cmd.arg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: room %s: %v\n", progName, cmd.arg, err)
		c.replyErr(reasonStorage)
		return
	}
	r.mu.Lock()
	r.subs[c] = struct{}{}
	j := &joinJob{room: r, off: r.log.offsetAfter(cmd.since), end: r.log.end, next: r.log.next()}
	c.mu.Lock()
	if !c.dead {
		c.segs = append(c.segs, segment{join: j})
	}
	c.wakeLocked()
	r.mu.Unlock()
	c.joined[r.name] = r
}

// say appends the message; the ACK is queued once the record is written,
// and with --fsync always once the group commit covers it, waited for by a
// goroutine off the loop.
func (c *loopClient) say(cmd command) {
	r, err := c.srv.room(cmd.arg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: room %s: %v\n", progName, cmd.arg, err)
		c.replyErr(reasonStorage)
		return
	}
	fsync := c.srv.fsync
	seq, ticket, err := r.publish(c, c.nick, cmd.text, fsync)
	if err != nil {
		c.replyErr(reasonStorage)
		return
	}
	ack := append(append(append([]byte(nil), "ACK "...), r.name...), ' ')
	ack = append(strconv.AppendUint(ack, seq, 10), '\n')
	if !fsync {
		c.pushOwn(ack)
		return
	}
	c.mu.Lock()
	c.acking = true
	c.mu.Unlock()
	go func() {
		if err := r.commit.wait(ticket, r.log.f); err != nil {
			fmt.Fprintf(os.Stderr, "%s: room %s: syncing a message: %v\n", progName, r.name, err)
			ack = []byte("ERR " + reasonStorage + "\n")
		}
		c.mu.Lock()
		c.acking = false
		c.mu.Unlock()
		c.pushOwn(ack)
	}()
}

func (c *loopClient) leave(r *room) {
	r.mu.Lock()
	delete(r.subs, c)
	r.mu.Unlock()
	delete(c.joined, r.name)
}

func (c *loopClient) leaveAll() {
	for _, r := range c.joined {
		c.leave(r)
	}
}

func (c *loopClient) kill() {
	c.mu.Lock()
	c.dead, c.segs = true, nil
	c.mu.Unlock()
}

// drain moves queued segments into out until it reaches limit.
func (c *loopClient) drain(out []byte, limit int) ([]byte, error) {
	for len(out) < limit {
		c.mu.Lock()
		if c.dead || len(c.segs) == 0 {
			c.mu.Unlock()
			return out, nil
		}
		seg := c.segs[0]
		if seg.join == nil {
			out = append(out, seg.data...)
			c.live -= seg.live
			c.own -= len(seg.data) - seg.live
			c.segs[0] = segment{}
			c.segs = c.segs[1:]
			c.mu.Unlock()
			continue
		}
		c.mu.Unlock()
		// Only this loop takes segments off the front, so the replay stays
		// at the head while it is read outside the lock.
		var done bool
		var err error
		out, done, err = c.replay(seg.join, out, limit)
		if err != nil {
			return out, err
		}
		if done {
			c.mu.Lock()
			if len(c.segs) > 0 {
				c.segs = c.segs[1:]
			}
			c.mu.Unlock()
		}
	}
	return out, nil
}

// replay appends the next records of a JOIN's replay, up to a chunk past
// limit's start, and JOINED once they are all out.
func (c *loopClient) replay(j *joinJob, out []byte, limit int) ([]byte, bool, error) {
	r := j.room
	stop := min(limit, len(out)+replayChunk)
	err := r.log.readRecords(j.off, j.end, func(seq uint64, name, text []byte) error {
		out = appendMsg(out, r.name, seq, name, text)
		j.off += int64(recHeaderLen + 9 + len(name) + len(text))
		if len(out) >= stop {
			return errChunkFull
		}
		return nil
	})
	if err != nil && err != errChunkFull {
		fmt.Fprintf(os.Stderr, "%s: room %s: replay: %v\n", progName, r.name, err)
		return out, false, err
	}
	if j.off < j.end {
		return out, false, nil
	}
	out = append(append(append(out, "JOINED "...), r.name...), ' ')
	return append(strconv.AppendUint(out, j.next, 10), '\n'), true, nil
}

// eof: the peer closed its side; what is queued still goes out, an
// unterminated line is dropped, as in chat.go.
func (c *loopClient) eof(out []byte) ([]byte, kvFlow) {
	c.leaveAll()
	c.finishing, c.in, c.off = true, nil, 0
	return c.output(out, ownPendingLimit)
}

// aborted says whether the connection was cut, for a loop that would not
// call output now (its socket is full).
func (c *loopClient) aborted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// closed is the loop's word that the connection is gone.
func (c *loopClient) closed() {
	c.leaveAll()
	c.kill()
}
