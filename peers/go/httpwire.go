// HTTP/1.1 on the wire for the loop models, which cannot use net/http: the
// small request parser and the response heads of service::http in the Rust
// crates, byte for byte (docs/protocol-notes.md "Http"). The parser accepts
// what the httparse crate accepts for the requests ringside serves: a request
// line of token, target and HTTP/1.0 or HTTP/1.1, headers of a token, a colon
// and a value, lines ended by CRLF or LF, empty lines before a request skipped.

package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

const httpMaxHeaders = 64

// httpStatus is a status a response carries; 0: none.
type httpStatus int

var httpStatusLines = map[httpStatus]string{
	200: "HTTP/1.1 200 OK",
	400: "HTTP/1.1 400 Bad Request",
	404: "HTTP/1.1 404 Not Found",
	405: "HTTP/1.1 405 Method Not Allowed",
	413: "HTTP/1.1 413 Payload Too Large",
	431: "HTTP/1.1 431 Request Header Fields Too Large",
	501: "HTTP/1.1 501 Not Implemented",
}

// httpHead is a response head: Server, Date, Content-Type if any,
// Content-Length, Allow and Connection if any, in that order.
type httpHead struct {
	status      httpStatus
	contentType string
	length      int
	allow       bool
	connection  string
}

func (h httpHead) encode(out, date []byte) []byte {
	out = append(out, httpStatusLines[h.status]...)
	out = append(append(out, "\r\nServer: "+httpServer+"\r\nDate: "...), date...)
	if h.contentType != "" {
		out = append(append(out, "\r\nContent-Type: "...), h.contentType...)
	}
	out = strconv.AppendInt(append(out, "\r\nContent-Length: "...), int64(h.length), 10)
	if h.allow {
		out = append(out, "\r\nAllow: "+httpAllow...)
	}
	if h.connection != "" {
		out = append(append(out, "\r\nConnection: "...), h.connection...)
	}
	return append(out, "\r\n\r\n"...)
}

// httpRequest is what the service needs of a request.
type httpRequest struct {
	method    string // GET, HEAD, or another
	path      string
	keepAlive bool
	http10    bool
	length    int // of the body
}

func isTchar(c byte) bool {
	if c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
		return true
	}
	return bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0
}

func isToken(b []byte) bool {
	for _, c := range b {
		if !isTchar(c) {
			return false
		}
	}
	return len(b) > 0
}

// cutLine splits off the first line of b, its CRLF or LF removed; ok=false
// when b holds no whole line.
func cutLine(b []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return nil, b, false
	}
	return bytes.TrimSuffix(b[:i], []byte("\r")), b[i+1:], true
}

// parseRequestLine parses "METHOD target HTTP/1.x".
func parseRequestLine(line []byte, r *httpRequest) bool {
	method, rest, ok1 := bytes.Cut(line, []byte(" "))
	target, version, ok2 := bytes.Cut(rest, []byte(" "))
	if !ok1 || !ok2 || !isToken(method) || len(target) == 0 {
		return false
	}
	for _, c := range target {
		if c <= ' ' || c == 0x7f {
			return false
		}
	}
	switch string(version) {
	case "HTTP/1.1":
	case "HTTP/1.0":
		r.http10 = true
	default:
		return false
	}
	r.method, r.path, r.keepAlive = string(method), string(target), !r.http10
	return true
}

// parseHeader applies one header line to r, or returns the refusal.
func parseHeader(line []byte, r *httpRequest, length *int) httpStatus {
	name, value, ok := bytes.Cut(line, []byte(":"))
	if !ok || !isToken(name) {
		return 400
	}
	for _, c := range value {
		if c < ' ' && c != '\t' || c == 0x7f {
			return 400
		}
	}
	value = bytes.Trim(value, " \t")
	switch {
	case bytes.EqualFold(name, []byte("content-length")):
		if len(value) == 0 || bytes.IndexFunc(value, func(c rune) bool { return c < '0' || c > '9' }) >= 0 {
			return 400
		}
		n := 0
		for _, c := range value {
			n = min(n*10+int(c-'0'), 1<<40) // saturates far above the limit
		}
		if *length >= 0 && *length != n {
			return 400
		}
		*length = n
	case bytes.EqualFold(name, []byte("transfer-encoding")):
		return 501
	case bytes.EqualFold(name, []byte("connection")):
		for _, tok := range bytes.Split(value, []byte(",")) {
			tok = bytes.Trim(tok, " \t")
			if bytes.EqualFold(tok, []byte("close")) {
				r.keepAlive = false
			} else if bytes.EqualFold(tok, []byte("keep-alive")) && r.http10 {
				r.keepAlive = true
			}
		}
	}
	return 0
}

// parseHTTPHead parses the request head at the start of b: n is its length
// (0: not complete yet), or status the refusal.
func parseHTTPHead(b []byte) (r httpRequest, n int, status httpStatus) {
	rest := b
	for len(rest) > 0 && (rest[0] == '\r' || rest[0] == '\n') {
		rest = rest[1:]
	}
	line, rest, ok := cutLine(rest)
	if !ok {
		if len(b) > httpMaxHead {
			return r, 0, 431
		}
		return r, 0, 0
	}
	if !parseRequestLine(line, &r) {
		return r, 0, 400
	}
	length := -1
	for headers := 0; ; headers++ {
		line, rest, ok = cutLine(rest)
		if !ok {
			if len(b) > httpMaxHead {
				return r, 0, 431
			}
			return r, 0, 0
		}
		if len(line) == 0 {
			break
		}
		if headers == httpMaxHeaders {
			return r, 0, 431
		}
		if s := parseHeader(line, &r, &length); s != 0 {
			return r, 0, s
		}
	}
	n = len(b) - len(rest)
	switch {
	case n > httpMaxHead:
		return r, 0, 431
	case length > httpMaxBody:
		return r, 0, 413
	}
	r.length = max(length, 0)
	return r, n, 0
}

// httpSession serves one connection's requests, pipelined or split anywhere.
// A request taken moves an offset into the input; the bytes left are moved
// down once per read, not once per request.
type httpSession struct {
	st      *counters
	buf     []byte // input; buf[off:] is not taken yet
	off     int
	skip    int  // body bytes still to drop
	waiting bool // a head is parsed, its body not all dropped yet
	req     httpRequest
	closing bool
	dateSec int64
	date    []byte
}

func newHTTPSession(st *counters, _ func()) session { return &httpSession{st: st} }

func (s *httpSession) input(b []byte) {
	if s.closing {
		return
	}
	s.buf = s.buf[:copy(s.buf, s.buf[s.off:])]
	s.off = 0
	if len(s.buf) == 0 {
		d := min(s.skip, len(b))
		s.skip -= d
		b = b[d:]
	}
	s.buf = append(s.buf, b...)
}

// backlog is the input not answered yet.
func (s *httpSession) backlog() int { return len(s.buf) - s.off }

func (s *httpSession) eof(out []byte) ([]byte, kvFlow) { return out, flowClose }

// now is the Date value, formatted again when the second changes.
func (s *httpSession) now() []byte {
	t := time.Now()
	if sec := t.Unix(); sec != s.dateSec || s.date == nil {
		s.dateSec = sec
		s.date = t.UTC().AppendFormat(s.date[:0], http.TimeFormat)
	}
	return s.date
}

// next returns the next request whose body is all in, or a refusal.
func (s *httpSession) next() (r httpRequest, status httpStatus, ok bool) {
	if !s.waiting {
		req, n, st := parseHTTPHead(s.buf[s.off:])
		if st != 0 || n == 0 {
			return r, st, false
		}
		s.off += n
		s.req, s.skip, s.waiting = req, req.length, true
	}
	d := min(s.skip, len(s.buf)-s.off)
	s.off += d
	s.skip -= d
	if s.skip > 0 {
		return r, 0, false
	}
	s.waiting = false
	return s.req, 0, true
}

func (s *httpSession) output(out []byte, limit int) ([]byte, kvFlow) {
	if s.closing {
		return out, flowClose
	}
	date := s.now()
	for len(out) < limit {
		r, status, ok := s.next()
		if status != 0 {
			s.closing, s.buf, s.off = true, nil, 0
			return httpHead{status: status, connection: "close"}.encode(out, date), flowClose
		}
		if !ok {
			return out, flowNeedInput
		}
		out = s.respond(&r, date, out)
		s.st.msgs.Add(1)
		if !r.keepAlive {
			s.closing, s.buf, s.off = true, nil, 0
			return out, flowClose
		}
	}
	return out, flowOutputFull
}

// respond appends the response to r, as service::http's respond does.
func (s *httpSession) respond(r *httpRequest, date, out []byte) []byte {
	path, _, _ := bytes.Cut([]byte(r.path), []byte("?"))
	h := httpHead{status: 200}
	switch {
	case !r.keepAlive:
		h.connection = "close"
	case r.http10:
		h.connection = "keep-alive"
	}
	var body []byte
	switch string(path) {
	case "/plaintext":
		h.contentType, body = "text/plain", []byte(plaintext)
	case "/json":
		b, err := json.Marshal(httpMessage{Message: plaintext})
		if err != nil { // a struct of one string always serializes
			b = nil
		}
		h.contentType, body = "application/json", b
	default:
		h.status = 404
		return h.encode(out, date)
	}
	if r.method != http.MethodGet && r.method != http.MethodHead {
		h.status, h.contentType, h.allow = 405, "", true
		return h.encode(out, date)
	}
	h.length = len(body)
	out = h.encode(out, date)
	if r.method == http.MethodGet {
		out = append(out, body...)
	}
	return out
}
