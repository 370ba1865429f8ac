// The --proto http checks of srv-go from a Go client.

package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHTTPPlaintextJSON checks the bodies and headers of --proto http through
// Go's own client; the conformance suite holds srv-go to the rest.
func TestHTTPPlaintextJSON(t *testing.T) {
	s := startServer(t, nil, "--proto", "http")
	client := &http.Client{Timeout: waitLimit}
	for _, c := range []struct{ path, ctype, body string }{
		{"/plaintext", "text/plain", "Hello, World!"},
		{"/json", "application/json", `{"message":"Hello, World!"}`},
	} {
		resp, err := client.Get("http://" + s.addr + c.path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || string(body) != c.body {
			t.Errorf("%s: %d %q", c.path, resp.StatusCode, body)
		}
		h := resp.Header
		if h.Get("Content-Type") != c.ctype || h.Get("Server") != httpServer {
			t.Errorf("%s: headers %v", c.path, h)
		}
		if _, err := time.Parse(http.TimeFormat, h.Get("Date")); err != nil {
			t.Errorf("%s: Date %q: %v", c.path, h.Get("Date"), err)
		}
		if resp.ContentLength != int64(len(c.body)) {
			t.Errorf("%s: Content-Length %d", c.path, resp.ContentLength)
		}
	}
	resp, err := client.Post("http://"+s.addr+"/json", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != httpAllow {
		t.Errorf("POST: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	resp, err = client.Get("http://" + s.addr + "/nothing")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("unknown path: %d", resp.StatusCode)
	}
}
