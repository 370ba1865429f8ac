// The key-value service of --proto kv: a Redis subset whose replies are byte
// for byte those of redis-server 7 and of service::kv in the Rust crates.
//
// By default every connection goroutine executes its own requests on a store
// of 64 mutex-guarded shards. With --kv-owner, the design of the Go article
// the kv experiment comes from: one goroutine owns the map, and connections
// send it their requests over a channel, one read batch at a time.
//
// A request allocates nothing once its key exists: the command name is
// matched in place, ASCII case-insensitively as Redis's strcasecmp does, and
// SET, MSET and INCR rewrite an existing entry's value in its own buffer. An
// entry is held by pointer so that it can be rewritten in place (a map of
// values would make every write store the key again, a new string each time);
// only a new key allocates (its entry, its key and its value).

package main

import (
	"bytes"
	"hash/maphash"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

const kvShards = 64

type kvEntry struct {
	value     []byte
	expiresAt int64 // ms since the epoch; 0: never
}

type kvShard struct {
	mu sync.Mutex
	m  map[string]*kvEntry
}

// put sets key to a copy of value, rewriting the entry in place when the key
// has one (live or expired: either way it is replaced); the caller holds
// sh.mu.
func (sh *kvShard) put(key, value []byte, expiresAt int64) {
	if e := sh.m[string(key)]; e != nil {
		e.value, e.expiresAt = append(e.value[:0], value...), expiresAt
		return
	}
	sh.m[string(key)] = &kvEntry{value: append([]byte(nil), value...), expiresAt: expiresAt}
}

// kvStore is shared by every connection; expiry is lazy (a key past its time
// is removed when a command touches it, or by DBSIZE).
type kvStore struct {
	seed   maphash.Seed
	shards [kvShards]kvShard
}

func newKVStore() *kvStore {
	s := &kvStore{seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].m = make(map[string]*kvEntry)
	}
	return s
}

func nowMs() int64 { return time.Now().UnixMilli() }

func (s *kvStore) shard(key []byte) *kvShard {
	return &s.shards[maphash.Bytes(s.seed, key)>>58%kvShards]
}

// live returns the live entry of key; the caller holds sh.mu.
func (sh *kvShard) live(key []byte) *kvEntry {
	e := sh.m[string(key)]
	if e != nil && e.expiresAt != 0 && e.expiresAt <= nowMs() {
		delete(sh.m, string(key))
		return nil
	}
	return e
}

// kvHeld is the set of shards a multi-key command holds.
type kvHeld [kvShards]bool

// lockMany locks the shards of every step-th of keys (MSET: 2, the keys
// between the values) in index order, so that two multi-key commands cannot
// deadlock, and returns them for unlockMany.
func (s *kvStore) lockMany(keys [][]byte, step int) kvHeld {
	var held kvHeld
	for i := 0; i < len(keys); i += step {
		held[maphash.Bytes(s.seed, keys[i])>>58%kvShards] = true
	}
	for i := range held {
		if held[i] {
			s.shards[i].mu.Lock()
		}
	}
	return held
}

func (s *kvStore) unlockMany(held *kvHeld) {
	for i := range held {
		if held[i] {
			s.shards[i].mu.Unlock()
		}
	}
}

func (s *kvStore) size() int {
	n := 0
	now := nowMs()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			if e.expiresAt != 0 && e.expiresAt <= now {
				delete(sh.m, k)
			}
		}
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

func (s *kvStore) clear() {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.m = make(map[string]*kvEntry)
		sh.mu.Unlock()
	}
}

// Reply encoders.
func simple(out []byte, s string) []byte { return append(append(append(out, '+'), s...), "\r\n"...) }
func errReply(out []byte, s string) []byte {
	return append(append(append(out, '-'), s...), "\r\n"...)
}
func integer(out []byte, n int64) []byte {
	return append(strconv.AppendInt(append(out, ':'), n, 10), "\r\n"...)
}
func bulk(out []byte, b []byte) []byte {
	out = strconv.AppendInt(append(out, '$'), int64(len(b)), 10)
	return append(append(append(out, "\r\n"...), b...), "\r\n"...)
}
func null(out []byte) []byte { return append(out, "$-1\r\n"...) }
func arrayHeader(out []byte, n int) []byte {
	return append(strconv.AppendInt(append(out, '*'), int64(n), 10), "\r\n"...)
}

const (
	errNotInt   = "ERR value is not an integer or out of range"
	errSyntax   = "ERR syntax error"
	errOverflow = "ERR increment or decrement would overflow"
)

var kvArity = map[string]int{
	"get": 2, "set": -3, "ping": -1, "incr": 2, "mset": -3, "mget": -2, "del": -2,
	"exists": -2, "incrby": 3, "decr": 2, "decrby": 3, "echo": 2, "ttl": 2, "pttl": 2,
	"dbsize": 1, "flushall": -1, "flushdb": -1, "select": 2, "config": -2, "command": -1,
}

// kvNames maps every command name exec knows, lowercase, to itself: a
// lookup with the request's name lowercased in place yields the name as a
// string without making one.
var kvNames = func() map[string]string {
	m := map[string]string{"quit": "quit", "post": "post", "host:": "host:"}
	for n := range kvArity {
		m[n] = n
	}
	return m
}()

// commandName is w's name as kvNames holds it, or "" for a name exec does
// not know; it allocates nothing.
func commandName(w []byte) string {
	var low [16]byte // longer than any known name
	if len(w) > len(low) {
		return ""
	}
	for i, c := range w {
		low[i] = lower(c)
	}
	return kvNames[string(low[:len(w)])]
}

// lower is c in lowercase, if it is an ASCII capital.
func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

type kvAfter int

const (
	kvContinue kvAfter = iota
	kvClose            // QUIT: close once the replies are written
	kvDrop             // POST, Host:: close without a reply
)

func wrongArity(out []byte, name string) []byte {
	return errReply(out, "ERR wrong number of arguments for '"+name+"' command")
}

// cStr is an argument as Redis's %s sees it: up to its first NUL.
func cStr(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// oneLine maps CR and LF to spaces, as Redis's error replies do.
func oneLine(b []byte) []byte {
	for i, c := range b {
		if c == '\r' || c == '\n' {
			b[i] = ' '
		}
	}
	return b
}

func unknownCommand(out []byte, words [][]byte) []byte {
	name := cStr(words[0])
	if len(name) > 128 {
		name = name[:128]
	}
	var args []byte
	for _, a := range words[1:] {
		if len(args) >= 128 {
			break
		}
		a = cStr(a)
		if room := 128 - len(args); len(a) > room {
			a = a[:room]
		}
		args = append(append(append(args, '\''), a...), "' "...)
	}
	text := append([]byte("ERR unknown command '"), name...)
	text = append(append(text, "', with args beginning with: "...), args...)
	return append(append(append(out, '-'), oneLine(text)...), "\r\n"...)
}

func unknownSubcommand(out []byte, container string, sub []byte) []byte {
	sub = cStr(sub)
	if len(sub) > 128 {
		sub = sub[:128]
	}
	text := append([]byte("ERR unknown subcommand '"), sub...)
	text = append(text, "'. Try "+strings.ToUpper(container)+" HELP."...)
	return append(append(append(out, '-'), oneLine(text)...), "\r\n"...)
}

// is says whether b is s, a lowercase word, in any case of ASCII letters, as
// Redis's strcasecmp compares (no Unicode folding: the Kelvin sign is no k).
func is(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		if lower(b[i]) != s[i] {
			return false
		}
	}
	return true
}

// exec executes one request, appending its reply.
func (s *kvStore) exec(w [][]byte, out []byte) ([]byte, kvAfter) {
	name := commandName(w[0])
	switch name {
	case "quit":
		return simple(out, "OK"), kvClose
	case "post", "host:":
		return out, kvDrop
	}
	arity, known := kvArity[name]
	if !known {
		return unknownCommand(out, w), kvContinue
	}
	if (arity > 0 && len(w) != arity) || len(w) < -arity {
		return wrongArity(out, name), kvContinue
	}
	switch name {
	case "get":
		sh := s.shard(w[1])
		sh.mu.Lock()
		if e := sh.live(w[1]); e != nil {
			out = bulk(out, e.value)
		} else {
			out = null(out)
		}
		sh.mu.Unlock()
	case "set":
		out = s.set(w, out)
	case "ping":
		switch len(w) {
		case 1:
			out = simple(out, "PONG")
		case 2:
			out = bulk(out, w[1])
		default:
			out = wrongArity(out, "ping")
		}
	case "incr":
		out = s.incrBy(w[1], 1, out)
	case "decr":
		out = s.incrBy(w[1], -1, out)
	case "incrby":
		if by, ok := parseInt(w[2]); ok {
			out = s.incrBy(w[1], by, out)
		} else {
			out = errReply(out, errNotInt)
		}
	case "decrby":
		by, ok := parseInt(w[2])
		switch {
		case !ok:
			out = errReply(out, errNotInt)
		case by == -1<<63:
			out = errReply(out, "ERR decrement would overflow")
		default:
			out = s.incrBy(w[1], -by, out)
		}
	case "mset":
		if len(w)%2 == 0 {
			return wrongArity(out, "mset"), kvContinue
		}
		held := s.lockMany(w[1:], 2)
		for i := 1; i < len(w); i += 2 {
			s.shard(w[i]).put(w[i], w[i+1], 0)
		}
		s.unlockMany(&held)
		out = simple(out, "OK")
	case "mget":
		held := s.lockMany(w[1:], 1)
		out = arrayHeader(out, len(w)-1)
		for _, k := range w[1:] {
			if e := s.shard(k).live(k); e != nil {
				out = bulk(out, e.value)
			} else {
				out = null(out)
			}
		}
		s.unlockMany(&held)
	case "del", "exists":
		held := s.lockMany(w[1:], 1)
		n := int64(0)
		for _, k := range w[1:] {
			sh := s.shard(k)
			if sh.live(k) != nil {
				n++
				if name == "del" {
					delete(sh.m, string(k))
				}
			}
		}
		s.unlockMany(&held)
		out = integer(out, n)
	case "echo":
		out = bulk(out, w[1])
	case "ttl", "pttl":
		sh := s.shard(w[1])
		sh.mu.Lock()
		e := sh.live(w[1])
		var r int64
		switch {
		case e == nil:
			r = -2
		case e.expiresAt == 0:
			r = -1
		default:
			r = max(e.expiresAt-nowMs(), 0)
			if name == "ttl" {
				r = (r + 500) / 1000
			}
		}
		sh.mu.Unlock()
		out = integer(out, r)
	case "dbsize":
		out = integer(out, int64(s.size()))
	case "flushall", "flushdb":
		if len(w) == 1 || (len(w) == 2 && (is(w[1], "sync") || is(w[1], "async"))) {
			s.clear()
			out = simple(out, "OK")
		} else {
			out = errReply(out, errSyntax)
		}
	case "select":
		n, ok := parseInt(w[1])
		switch {
		case !ok || n < -1<<31 || n > 1<<31-1:
			out = errReply(out, errNotInt)
		case n == 0:
			out = simple(out, "OK")
		default:
			out = errReply(out, "ERR DB index is out of range")
		}
	case "config":
		switch {
		case !is(w[1], "get"):
			out = unknownSubcommand(out, "config", w[1])
		case len(w) < 3:
			out = wrongArity(out, "config|get")
		default:
			// Known names in the order the request gives them, each once, as
			// Redis answers.
			var pairs []string
			for _, p := range w[2:] {
				for _, known := range []string{"save", "appendonly"} {
					if is(p, known) && !slices.Contains(pairs, known) {
						pairs = append(pairs, known)
					}
				}
			}
			out = arrayHeader(out, 2*len(pairs))
			for _, p := range pairs {
				v := ""
				if p == "appendonly" {
					v = "no"
				}
				out = bulk(bulk(out, []byte(p)), []byte(v))
			}
		}
	case "command":
		if len(w) == 1 || is(w[1], "docs") {
			out = arrayHeader(out, 0)
		} else {
			out = unknownSubcommand(out, "command", w[1])
		}
	}
	return out, kvContinue
}

func (s *kvStore) set(w [][]byte, out []byte) []byte {
	var nx, xx, get, keepTTL bool
	var expireArg []byte
	expireKind := ""
	for j := 3; j < len(w); j++ {
		opt := "" // the option's name as written below, or none
		for _, o := range [...]string{"nx", "xx", "get", "keepttl", "ex", "px", "exat", "pxat"} {
			if is(w[j], o) {
				opt = o
				break
			}
		}
		hasNext := j+1 < len(w)
		switch {
		case opt == "nx" && !xx:
			nx = true
		case opt == "xx" && !nx:
			xx = true
		case opt == "get":
			get = true
		case opt == "keepttl" && expireKind == "":
			keepTTL = true
		case (opt == "ex" || opt == "px" || opt == "exat" || opt == "pxat") && hasNext:
			// The same kind twice is allowed (the last wins), two kinds are not.
			if keepTTL || (expireKind != "" && expireKind != opt) {
				return errReply(out, errSyntax)
			}
			expireKind, expireArg = opt, w[j+1]
			j++
		default:
			return errReply(out, errSyntax)
		}
	}
	var expiresAt int64
	if expireKind != "" {
		const invalid = "ERR invalid expire time in 'set' command"
		n, ok := parseInt(expireArg)
		if !ok {
			return errReply(out, errNotInt)
		}
		seconds := expireKind == "ex" || expireKind == "exat"
		if n <= 0 || (seconds && n > (1<<63-1)/1000) {
			return errReply(out, invalid)
		}
		if seconds {
			n *= 1000
		}
		if expireKind == "ex" || expireKind == "px" {
			now := nowMs()
			if n > 1<<63-1-now {
				return errReply(out, invalid)
			}
			n += now
		}
		expiresAt = n
	}
	key := w[1]
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	old := sh.live(key)
	if get {
		if old != nil {
			out = bulk(out, old.value)
		} else {
			out = null(out)
		}
	}
	if (nx && old != nil) || (xx && old == nil) {
		if !get {
			out = null(out)
		}
		return out
	}
	if keepTTL && old != nil {
		expiresAt = old.expiresAt
	}
	if expiresAt != 0 && expiresAt <= nowMs() {
		// A time already past (EXAT/PXAT) deletes the key, as in Redis.
		delete(sh.m, string(key))
	} else {
		sh.put(key, w[2], expiresAt)
	}
	if !get {
		out = simple(out, "OK")
	}
	return out
}

func (s *kvStore) incrBy(key []byte, by int64, out []byte) []byte {
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var cur int64
	e := sh.live(key)
	if e != nil {
		n, ok := parseInt(e.value)
		if !ok {
			return errReply(out, errNotInt)
		}
		cur = n
	}
	if (by > 0 && cur > 1<<63-1-by) || (by < 0 && cur < -1<<63-by) {
		return errReply(out, errOverflow)
	}
	next := cur + by
	if e == nil {
		e = &kvEntry{}
		sh.m[string(key)] = e
	}
	// In place; INCR keeps the key's time to live, as in Redis.
	e.value = strconv.AppendInt(e.value[:0], next, 10)
	return integer(out, next)
}

type kvFlow int

const (
	flowNeedInput kvFlow = iota
	flowOutputFull
	flowClose
)

// execute runs the parsed requests until none is complete or out reaches
// limit, as service::kv::Connection::execute does.
func (s *kvStore) execute(p *reqParser, out []byte, limit int) ([]byte, kvFlow) {
	for len(out) < limit {
		words, perr, ok := p.next()
		if perr != nil {
			return append(out, perr...), flowClose
		}
		if !ok {
			if p.failed {
				return out, flowClose
			}
			return out, flowNeedInput
		}
		var after kvAfter
		out, after = s.exec(words, out)
		switch after {
		case kvClose:
			p.failed = true
			return out, flowClose
		case kvDrop:
			p.failed = true
			return out[:0], flowClose
		}
	}
	return out, flowOutputFull
}

// kvJob is one read batch sent to the owner goroutine (--kv-owner).
type kvJob struct {
	p    *reqParser
	out  []byte
	back chan kvDone
}

type kvDone struct {
	out  []byte
	flow kvFlow
}

type kvServer struct {
	store *kvStore
	limit int
	owner chan kvJob // nil without --kv-owner
}

func newKVServer(limit int, owner bool) *kvServer {
	k := &kvServer{store: newKVStore(), limit: limit}
	if owner {
		k.owner = make(chan kvJob, 1024)
		go func() {
			// The only goroutine that touches the store: its locks are never
			// contended.
			for job := range k.owner {
				out, flow := k.store.execute(job.p, job.out, k.limit)
				job.back <- kvDone{out, flow}
			}
		}()
	}
	return k
}

// serve reads, executes every request of the read, and writes the replies in
// one Write before it reads again: a peer that does not read blocks the
// Write, and no more is read, with at most the limit and one reply pending.
func (k *kvServer) serve(c *net.TCPConn, st *counters) {
	defer c.Close()
	var p reqParser
	buf := make([]byte, readBufSize)
	var out []byte
	var back chan kvDone
	if k.owner != nil {
		back = make(chan kvDone, 1)
	}
	for {
		n, err := c.Read(buf)
		if n > 0 {
			st.bytesIn.Add(uint64(n))
			p.feed(buf[:n])
			for {
				var flow kvFlow
				if k.owner != nil {
					k.owner <- kvJob{&p, out[:0], back}
					done := <-back
					out, flow = done.out, done.flow
				} else {
					out, flow = k.store.execute(&p, out[:0], k.limit)
				}
				if len(out) > 0 {
					w, werr := c.Write(out)
					st.bytesOut.Add(uint64(w))
					if werr != nil {
						return
					}
				}
				if flow == flowClose {
					return
				}
				if flow == flowNeedInput {
					break
				}
			}
		}
		if err != nil {
			return
		}
	}
}
