// The HTTP service of --proto http: TechEmpower's plaintext and json tests on
// Go's own net/http, as a Go user would serve them, answering with the same
// bodies, statuses and headers as service::http in the Rust crates.
//
// net/http does the parsing, keep-alive, pipelining (one request at a time:
// it answers in order and flushes each response), Date and HTTP/1.0. What the
// handler adds is what the Rust service decides: the Server header, 404, 405
// with Allow, 501 for a Transfer-Encoding and 413 for a body over 64 KiB, both
// closing the connection. Headers over 8 KiB get net/http's 431 (it allows
// MaxHeaderBytes plus 4 KiB of slack). A client that pipelines and never reads
// is not read from once net/http's write blocks; --max-pending has no
// counterpart in net/http.

package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"sync"
)

const (
	httpMaxHead = 8 * 1024
	httpMaxBody = 64 * 1024
	httpServer  = "ringside"
	httpAllow   = "GET, HEAD"
	plaintext   = "Hello, World!"
)

// httpMessage is what /json serializes, per request.
type httpMessage struct {
	Message string `json:"message"`
}

// serveHTTP answers one request.
func serveHTTP(w http.ResponseWriter, r *http.Request) {
	st, _ := r.Context().Value(countersKey{}).(*counters)
	if st == nil {
		st = &counters{} // not a connection of newHTTPServer's: uncounted
	}
	h := w.Header()
	h.Set("Server", httpServer)
	if len(r.TransferEncoding) > 0 || r.ContentLength > httpMaxBody {
		status := http.StatusNotImplemented
		if len(r.TransferEncoding) == 0 {
			status = http.StatusRequestEntityTooLarge
		}
		h.Set("Connection", "close")
		h.Set("Content-Length", "0")
		w.WriteHeader(status)
		return
	}
	var body []byte
	switch r.URL.Path {
	case "/plaintext":
		h.Set("Content-Type", "text/plain")
		body = []byte(plaintext)
	case "/json":
		b, err := json.Marshal(httpMessage{Message: plaintext})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		h.Set("Content-Type", "application/json")
		body = b
	default:
		h.Set("Content-Length", "0")
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Del("Content-Type")
		h.Set("Allow", httpAllow)
		h.Set("Content-Length", "0")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		n, _ := w.Write(body)
		st.bytesOut.Add(uint64(n))
	}
	st.msgs.Add(1)
}

// countersKey keys a connection's counters in its requests' context.
type countersKey struct{}

// newHTTPServer is the net/http server of --proto http. Each connection
// counts into counters of its own, made when it is accepted and retired when
// it closes.
func newHTTPServer() *http.Server {
	var conns sync.Map // net.Conn -> *counters
	return &http.Server{
		Handler:        http.HandlerFunc(serveHTTP),
		MaxHeaderBytes: httpMaxHead,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			st := newCounters()
			st.conns.Add(1)
			conns.Store(c, st)
			return context.WithValue(ctx, countersKey{}, st)
		},
		ConnState: func(c net.Conn, state http.ConnState) {
			if state == http.StateClosed || state == http.StateHijacked {
				if st, ok := conns.LoadAndDelete(c); ok {
					st.(*counters).retire()
				}
			}
		},
	}
}
