package main

import (
	"bufio"
	"io"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// sessionModels are the models that serve the sessions of session.go: all
// but goroutines.
var sessionModels = []string{"sessions", "eventloop", "poll", "gnet"}

func skipOffLinux(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the loop models run on Linux only")
	}
}

// TestModelsServeEchoAndKV: every model echoes, runs kv, and prints the stop
// line with the counts of its loops (or connections) summed.
func TestModelsServeEchoAndKV(t *testing.T) {
	skipOffLinux(t)
	for _, m := range sessionModels {
		s := startServer(t, nil, "--model", m, "--proto", "echo", "--workers", "2")
		c := dialChat(t, s.addr)
		c.send("hello")
		c.expect("hello")
		c.c.CloseWrite()
		c.expectEOF()
		if code := s.stop(syscall.SIGTERM); code != 0 {
			t.Fatalf("%s: exit %d, stderr %q", m, code, s.stderr.String())
		}
		if m := statsLine.FindStringSubmatch(s.stderr.String()); m == nil || m[1] != "1" || m[2] != "6" || m[3] != "6" {
			t.Fatalf("stop line %q", s.stderr.String())
		}

		s = startServer(t, nil, "--model", m, "--proto", "kv", "--workers", "2")
		c = dialChat(t, s.addr)
		io.WriteString(c.c, "SET k v\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\nQUIT\r\n")
		c.expect("+OK\r", "$1\r", "v\r", "+OK\r")
		c.expectEOF()
	}
}

// TestModelsServeHTTPAndChat: sessions, eventloop and gnet serve http with
// the same responses; eventloop and gnet serve chat, which fans out between
// connections that may be on different loops.
func TestModelsServeHTTPAndChat(t *testing.T) {
	skipOffLinux(t)
	for _, m := range []string{"sessions", "eventloop", "gnet"} {
		s := startServer(t, nil, "--model", m, "--proto", "http", "--workers", "2")
		c := dialT(t, s.addr)
		io.WriteString(c, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.0\r\n\r\n")
		all, err := io.ReadAll(bufio.NewReader(c))
		if err != nil && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("%s: %v", m, err)
		}
		got := string(all)
		if !strings.HasPrefix(got, "HTTP/1.1 200 OK\r\nServer: ringside\r\nDate: ") ||
			!strings.Contains(got, "\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!HTTP/1.1 404 Not Found\r\n") ||
			!strings.HasSuffix(got, "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n") {
			t.Fatalf("%s: http responses %q", m, got)
		}
		if m == "sessions" {
			continue // no chat: TestModelsRefuseWhatTheyDoNotServe
		}

		s = startServer(t, nil, "--model", m, "--proto", "chat", "--workers", "2", "--fsync", "always")
		subs := []*chatClient{dialChat(t, s.addr), dialChat(t, s.addr), dialChat(t, s.addr)}
		for _, sub := range subs {
			sub.send("JOIN r 0")
			sub.expect("JOINED r 1")
		}
		subs[0].send("NICK a", "SAY r hi")
		subs[0].expect("OK", "ACK r 1")
		subs[1].expect("MSG r 1 a hi")
		subs[2].expect("MSG r 1 a hi")
		late := dialChat(t, s.addr)
		late.send("JOIN r 0")
		late.expect("MSG r 1 a hi", "JOINED r 2")
	}
}

// TestModelsRefuseWhatTheyDoNotServe: a model that cannot serve a protocol
// (poll chat and http, sessions chat) says so in one line and exits 2.
func TestModelsRefuseWhatTheyDoNotServe(t *testing.T) {
	for _, tc := range []struct{ model, proto, served string }{
		{"poll", "chat", "echo and kv"},
		{"poll", "http", "echo and kv"},
		{"sessions", "chat", "echo, kv and http"},
	} {
		code, stdout, stderr := runToExit(t, nil, "--model", tc.model, "--proto", tc.proto)
		want := "--model " + tc.model + " serves --proto " + tc.served + " only, not " + tc.proto
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) {
			t.Fatalf("%s %s: exit %d, stdout %q, stderr %q", tc.model, tc.proto, code, stdout, stderr)
		}
	}
	code, _, stderr := runToExit(t, nil, "--model", "fibers", "--proto", "echo")
	if code != 2 || !strings.Contains(stderr, `--model "fibers"`) {
		t.Fatalf("unknown model: exit %d, stderr %q", code, stderr)
	}
}

// TestGnetLockOSThreadIsAChoice: gnet serves with its loops locked or not;
// a value other than true or false, or the flag with another model, is exit 2.
func TestGnetLockOSThreadIsAChoice(t *testing.T) {
	skipOffLinux(t)
	for _, lock := range []string{"true", "false"} {
		s := startServer(t, nil, "--model", "gnet", "--proto", "echo", "--workers", "2", "--lock-os-thread", lock)
		c := dialChat(t, s.addr)
		c.send("hello")
		c.expect("hello")
	}
	for _, args := range [][]string{
		{"--model", "gnet", "--lock-os-thread", "yes"},
		{"--model", "eventloop", "--lock-os-thread", "false"},
	} {
		code, stdout, stderr := runToExit(t, nil, append(args, "--proto", "echo")...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "--lock-os-thread") {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}

func TestHTTPHeadParsing(t *testing.T) {
	for _, tc := range []struct {
		req    string
		n      int
		status httpStatus
		keep   bool
	}{
		{"GET / HTTP/1.1\r\n\r\n", 18, 0, true},
		{"\r\nGET / HTTP/1.1\nHost: x\n\n", 26, 0, true},
		{"GET / HTTP/1.0\r\nConnection: foo, Keep-Alive\r\n\r\n", 47, 0, true},
		{"GET / HTTP/1.1\r\nConnection: close\r\n\r\n", 37, 0, false},
		{"GET / HTTP/1.1\r\nHost: x\r\n", 0, 0, true},
		{"GE\x01T / HTTP/1.1\r\n\r\n", 0, 400, false},
		{"GET / HTTP/2.0\r\n\r\n", 0, 400, false},
		{"GET / HTTP/1.1\r\nNo colon\r\n\r\n", 0, 400, false},
		{"GET / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 0, 400, false},
		{"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 0, 400, false},
		{"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 501, false},
		{"POST / HTTP/1.1\r\nContent-Length: 65537\r\n\r\n", 0, 413, false},
		{"GET / HTTP/1.1\r\nX: " + strings.Repeat("a", httpMaxHead), 0, 431, false},
		{"GET / HTTP/1.1\r\n" + strings.Repeat("X: y\r\n", httpMaxHeaders+1) + "\r\n", 0, 431, false},
	} {
		r, n, status := parseHTTPHead([]byte(tc.req))
		if n != tc.n || status != tc.status || (n > 0 && r.keepAlive != tc.keep) {
			t.Errorf("%.40q: n=%d status=%d keep-alive=%v", tc.req, n, status, r.keepAlive)
		}
	}
}

// TestHTTPSessionDropsBodiesAndPipelines: a body is dropped as it comes, in
// any split, and the requests after it are answered in order.
func TestHTTPSessionDropsBodiesAndPipelines(t *testing.T) {
	stream := "POST /json HTTP/1.1\r\nContent-Length: 5\r\n\r\nGET /GET /json HTTP/1.1\r\n\r\nHEAD /plaintext HTTP/1.1\r\n\r\n"
	for split := 1; split < len(stream); split++ {
		s := newHTTPSession(&counters{}, nil)
		var out []byte
		for _, part := range []string{stream[:split], stream[split:]} {
			s.input([]byte(part))
			out, _ = s.output(out, echoMaxPending)
		}
		got := string(out)
		i405 := strings.Index(got, "405 Method Not Allowed")
		iJSON := strings.Index(got, `{"message":"Hello, World!"}`)
		iHead := strings.LastIndex(got, "Content-Length: 13\r\n\r\n")
		if strings.Count(got, "HTTP/1.1 ") != 3 || !(i405 >= 0 && i405 < iJSON && iJSON < iHead) ||
			!strings.HasSuffix(got, "Content-Length: 13\r\n\r\n") {
			t.Fatalf("split at %d: %q", split, got)
		}
	}
}

// TestEchoSessionCutsMessages: with --compute-us only whole messages go back,
// at most limit bytes at a time, and the partial tail at EOF.
func TestEchoSessionCutsMessages(t *testing.T) {
	st := &counters{}
	s := (&echoServer{computeUs: 1, msgSize: 4}).session(st, nil)
	s.input([]byte("abcdefghij"))
	out, flow := s.output(nil, 5)
	if string(out) != "abcd" || flow != flowOutputFull {
		t.Fatalf("first output %q, flow %d", out, flow)
	}
	out, flow = s.output(out[:0], 64)
	if string(out) != "efgh" || flow != flowNeedInput {
		t.Fatalf("second output %q, flow %d", out, flow)
	}
	out, flow = s.eof(out[:0])
	if string(out) != "ij" || flow != flowClose || st.msgs.Load() != 3 {
		t.Fatalf("eof %q, flow %d, msgs %d", out, flow, st.msgs.Load())
	}
}

// TestLoopChatSessionPipelines: the loops' chat session runs every line of
// a pipelined stream split at any byte, in order, once.
func TestLoopChatSessionPipelines(t *testing.T) {
	chat, err := openChat(config{data: t.TempDir(), maxPending: defaultPending})
	if err != nil {
		t.Fatal(err)
	}
	defer chat.shutdown()
	stream := "NICK a\r\nPING x\nPING  y z\nBAD\nPING w\n"
	want := "OK\nPONG x\nPONG  y z\nERR unknown command\nPONG w\n"
	for split := 1; split < len(stream); split++ {
		s := chat.loopSession(&counters{}, func() {})
		var out []byte
		for _, part := range []string{stream[:split], stream[split:]} {
			s.input([]byte(part))
			out, _ = s.output(out, ownPendingLimit)
		}
		if string(out) != want {
			t.Fatalf("split at %d: %q", split, out)
		}
		s.(interface{ closed() }).closed()
	}
}
