// The RESP2 request parser of --proto kv: the same cuts, limits, quirks and
// "Protocol error" texts as redis-server 7 and as proto::resp::RequestBuffer
// in the Rust crates (docs/protocol-notes.md, the kv section).

package main

import (
	"bytes"
	"strconv"
)

// RESP2 limits, as Redis's defaults.
const (
	respMaxBulk      = 512 << 20 // proto-max-bulk-len
	respMaxInline    = 64 << 10  // PROTO_INLINE_MAX_SIZE
	respMaxMultibulk = 1<<31 - 1 // INT_MAX
	respMaxQueryBuf  = 1 << 30   // client-query-buffer-limit: closed without a reply
)

// errQueryLimit is the one protocol error with no reply.
var errQueryLimit = []byte{}

// reqParser holds the bytes a connection received and not yet executed, and
// where the parser is inside the request in progress.
type reqParser struct {
	buf    []byte
	start  int // start of the request in progress
	cursor int // where parsing resumes
	// Inside an array: elements to go, and the next one's length (-1 unknown).
	remaining int
	bulk      int
	inArray   bool
	// Offset from start and length of each word of the array in progress.
	spans  [][2]int
	words  [][]byte
	failed bool
}

func (p *reqParser) feed(b []byte) {
	if p.failed {
		return
	}
	if p.start > 0 {
		// Offsets of the request in progress move down with its bytes; the
		// words already cut are re-sliced when the request completes.
		// Word offsets are relative to start, so moving the bytes down keeps
		// them valid.
		n := copy(p.buf, p.buf[p.start:])
		p.buf = p.buf[:n]
		p.cursor -= p.start
		p.start = 0
	}
	p.buf = append(p.buf, b...)
}

// next returns the next complete request's words (valid until the next feed
// or next), a protocol error reply (nil if none; errQueryLimit for a silent
// close), or ok=false when the rest is an unfinished request.
func (p *reqParser) next() (words [][]byte, perr []byte, ok bool) {
	for !p.failed {
		words, perr, ok, again := p.step()
		if perr != nil {
			p.failed = true
			return nil, perr, false
		}
		if ok {
			return words, nil, true
		}
		if !again {
			if len(p.buf)-p.start > respMaxQueryBuf {
				p.failed = true
				return nil, errQueryLimit, false
			}
			return nil, nil, false
		}
	}
	return nil, nil, false
}

func protoErr(text string) []byte {
	return []byte("-ERR Protocol error: " + text + "\r\n")
}

// findEnd finds c as C's strchr would: a NUL before it hides it.
func findEnd(b []byte, c byte) int {
	i := bytes.IndexByte(b, c)
	z := bytes.IndexByte(b, 0)
	if i < 0 || (z >= 0 && z < i) {
		return -1
	}
	return i
}

// step parses one request: again=true when it was a request of no words.
func (p *reqParser) step() (words [][]byte, perr []byte, ok bool, again bool) {
	if !p.inArray {
		if p.start >= len(p.buf) {
			return nil, nil, false, false
		}
		if p.buf[p.start] != '*' {
			return p.inline()
		}
		rest := p.buf[p.start:]
		cr := findEnd(rest, '\r')
		if cr < 0 {
			if len(rest) > respMaxInline {
				return nil, protoErr("too big mbulk count string"), false, false
			}
			return nil, nil, false, false
		}
		if cr+1 >= len(rest) {
			return nil, nil, false, false
		}
		n, good := parseInt(rest[1:cr])
		if !good || n > respMaxMultibulk {
			return nil, protoErr("invalid multibulk length"), false, false
		}
		p.cursor = p.start + cr + 2
		if n <= 0 {
			p.start = p.cursor
			return nil, nil, false, true
		}
		p.spans = p.spans[:0]
		p.inArray, p.remaining, p.bulk = true, int(n), -1
	}
	for p.remaining > 0 {
		if p.bulk < 0 {
			rest := p.buf[p.cursor:]
			cr := findEnd(rest, '\r')
			if cr < 0 {
				if len(rest) > respMaxInline {
					return nil, protoErr("too big bulk count string"), false, false
				}
				return nil, nil, false, false
			}
			if cr+1 >= len(rest) {
				return nil, nil, false, false
			}
			if rest[0] != '$' {
				c := rest[0]
				if c == '\r' || c == '\n' {
					c = ' '
				}
				return nil, []byte("-ERR Protocol error: expected '$', got '" + string([]byte{c}) + "'\r\n"), false, false
			}
			n, good := parseInt(rest[1:cr])
			if !good || n < 0 || n > respMaxBulk {
				return nil, protoErr("invalid bulk length"), false, false
			}
			p.cursor += cr + 2
			p.bulk = int(n)
		}
		if len(p.buf)-p.cursor < p.bulk+2 {
			return nil, nil, false, false
		}
		p.spans = append(p.spans, [2]int{p.cursor - p.start, p.bulk})
		p.cursor += p.bulk + 2
		p.remaining--
		p.bulk = -1
	}
	// The two bytes after each string are Redis's CRLF, skipped unseen.
	p.words = p.words[:0]
	for _, sp := range p.spans {
		p.words = append(p.words, p.buf[p.start+sp[0]:p.start+sp[0]+sp[1]])
	}
	p.inArray = false
	p.start = p.cursor
	return p.words, nil, true, false
}

// inline reads a line of words at start.
func (p *reqParser) inline() (words [][]byte, perr []byte, ok bool, again bool) {
	rest := p.buf[p.start:]
	nl := findEnd(rest, '\n')
	if nl < 0 {
		if len(rest) > respMaxInline {
			return nil, protoErr("too big inline request"), false, false
		}
		return nil, nil, false, false
	}
	end := nl
	if nl > 0 && rest[nl-1] == '\r' {
		end--
	}
	ws, good := splitArgs(rest[:end])
	if !good {
		return nil, protoErr("unbalanced quotes in request"), false, false
	}
	p.start += nl + 1
	p.cursor = p.start
	if len(ws) == 0 {
		return nil, nil, false, true
	}
	p.words = ws
	return ws, nil, true, false
}

// parseInt is Redis's string2ll: an optional '-', digits without a leading
// zero ("0" alone is zero, "-0" is not a number), within int64.
func parseInt(s []byte) (int64, bool) {
	if len(s) == 1 && s[0] == '0' {
		return 0, true
	}
	d := s
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || d[0] < '1' || d[0] > '9' {
		return 0, false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(s), 10, 64)
	return n, err == nil
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func hexVal(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// splitArgs is Redis's sdssplitargs: blank-separated words, "..." with
// \xHH, \n, \r, \t, \b, \a and \<c>, '...' with \', a closing quote followed
// by a blank or the end.
func splitArgs(line []byte) ([][]byte, bool) {
	at := func(i int) byte {
		if i < len(line) {
			return line[i]
		}
		return 0
	}
	var words [][]byte
	p := 0
	for {
		for p < len(line) && isSpace(line[p]) {
			p++
		}
		if p >= len(line) {
			return words, true
		}
		var cur []byte
		inq, insq, done := false, false, false
		for !done {
			c := at(p)
			switch {
			case inq:
				if c == '\\' && at(p+1) == 'x' && isHex(at(p+2)) && isHex(at(p+3)) {
					cur = append(cur, hexVal(at(p+2))*16+hexVal(at(p+3)))
					p += 3
				} else if c == '\\' && at(p+1) != 0 {
					p++
					e := at(p)
					switch e {
					case 'n':
						e = '\n'
					case 'r':
						e = '\r'
					case 't':
						e = '\t'
					case 'b':
						e = '\b'
					case 'a':
						e = '\a'
					}
					cur = append(cur, e)
				} else if c == '"' {
					if at(p+1) != 0 && !isSpace(at(p+1)) {
						return nil, false
					}
					done = true
				} else if c == 0 {
					return nil, false
				} else {
					cur = append(cur, c)
				}
			case insq:
				if c == '\\' && at(p+1) == '\'' {
					p++
					cur = append(cur, '\'')
				} else if c == '\'' {
					if at(p+1) != 0 && !isSpace(at(p+1)) {
						return nil, false
					}
					done = true
				} else if c == 0 {
					return nil, false
				} else {
					cur = append(cur, c)
				}
			default:
				switch c {
				case ' ', '\n', '\r', '\t', 0:
					done = true
				case '"':
					inq = true
				case '\'':
					insq = true
				default:
					cur = append(cur, c)
				}
			}
			if at(p) != 0 {
				p++
			}
		}
		if cur == nil {
			cur = []byte{}
		}
		words = append(words, cur)
	}
}
