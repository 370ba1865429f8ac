// End-to-end tests: the test binary re-executes itself as srv-go (see
// TestMain) and the tests talk to it over loopback, every wait bounded.

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// waitLimit bounds every wait of these tests.
const waitLimit = 20 * time.Second

const asServerEnv = "SRV_GO_TEST_AS_SERVER"

// TestMain runs the server itself when the tests start the test binary with
// asServerEnv set, so the tests need no separate build step.
func TestMain(m *testing.M) {
	if os.Getenv(asServerEnv) == "1" {
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// syncBuffer collects a child's stderr while it runs.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	addr   string
	stdout *bufio.Reader
	stderr *syncBuffer
	done   chan struct{}
	err    error // the result of Wait, once done is closed
}

func serverCmd(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), asServerEnv+"=1"), env...)
	return cmd
}

// startServer starts srv-go and waits for its READY line.
func startServer(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	// A chat server without --data keeps its rooms under TMPDIR and removes them only
	// on a clean stop; the test's own directory goes even when the server is killed.
	env = append([]string{"TMPDIR=" + t.TempDir()}, env...)
	s := &server{t: t, cmd: serverCmd(env, args...), stderr: &syncBuffer{}, done: make(chan struct{})}
	s.cmd.Stderr = s.stderr
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.stdout = bufio.NewReader(out)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		line, _ := s.stdout.ReadString('\n')
		ready <- line
		// Wait may only run once the pipe's reader is done with it.
		io.Copy(io.Discard, s.stdout)
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		<-s.done
		// Under go test -race the server runs with the detector too.
		if e := s.stderr.String(); strings.Contains(e, "DATA RACE") {
			t.Errorf("the server reported a data race:\n%s", e)
		}
	})
	select {
	case line := <-ready:
		addr, ok := strings.CutPrefix(line, "READY ")
		if !ok || !strings.HasSuffix(addr, "\n") {
			t.Fatalf("first line %q, stderr %q", line, s.stderr.String())
		}
		s.addr = strings.TrimSuffix(addr, "\n")
	case <-time.After(waitLimit):
		t.Fatalf("no READY line; stderr %q", s.stderr.String())
	}
	return s
}

// stop signals the server and returns its exit status.
func (s *server) stop(sig os.Signal) int {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
	return s.wait()
}

func (s *server) wait() int {
	s.t.Helper()
	select {
	case <-s.done:
	case <-time.After(waitLimit):
		s.t.Fatalf("the server did not exit; stderr %q", s.stderr.String())
	}
	return s.cmd.ProcessState.ExitCode()
}

// runToExit runs srv-go expecting it to exit by itself.
func runToExit(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := serverCmd(env, args...)
	var out, errb syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(waitLimit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("srv-go %q did not exit; stdout %q", args, out.String())
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

func dialT(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(waitLimit))
	return c.(*net.TCPConn)
}

// ---- echo ----

func TestEchoBulk(t *testing.T) {
	s := startServer(t, nil, "--proto", "echo")
	c := dialT(t, s.addr)
	data := make([]byte, 4<<20)
	rand.New(rand.NewSource(1)).Read(data)
	werr := make(chan error, 1)
	go func() {
		// Writes of uneven sizes, so the server sees every kind of split.
		var err error
		for rest := data; len(rest) > 0 && err == nil; {
			n := min(len(rest), 1+len(rest)%70000)
			_, err = c.Write(rest[:n])
			rest = rest[n:]
		}
		if err == nil {
			err = c.CloseWrite()
		}
		werr <- err
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("echoed %d bytes, not the %d sent", len(got), len(data))
	}
}

func TestEchoHalfClose(t *testing.T) {
	s := startServer(t, nil, "--proto=echo")
	c := dialT(t, s.addr)
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	c.CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "hello" {
		t.Fatalf("got %q, %v", got, err)
	}
}

// With --compute-us the stream is cut into messages; a partial message waits
// for the rest of it, or for EOF.
func TestEchoComputeHoldsPartialMessage(t *testing.T) {
	s := startServer(t, nil, "--proto", "echo", "--compute-us", "50", "--msg-size", "16")
	c := dialT(t, s.addr)
	data := []byte("0123456789abcdefGHIJKLMNOPQRSTUVwxy")
	read := func(n int) string {
		buf := make([]byte, n)
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatalf("reading %d bytes: %v", n, err)
		}
		return string(buf)
	}
	c.Write(data[:20])
	if got := read(16); got != string(data[:16]) {
		t.Fatalf("first message %q", got)
	}
	// The 4 bytes of the next message must not come back on their own.
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c.Read(make([]byte, 16)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a partial message was echoed early: %d bytes, %v", n, err)
	}
	c.SetReadDeadline(time.Now().Add(waitLimit))
	c.Write(data[20:32])
	if got := read(16); got != string(data[16:32]) {
		t.Fatalf("second message %q", got)
	}
	c.Write(data[32:])
	c.CloseWrite()
	rest, err := io.ReadAll(c)
	if err != nil || string(rest) != string(data[32:]) {
		t.Fatalf("tail at EOF %q, %v", rest, err)
	}
}

func TestEchoManyConnections(t *testing.T) {
	s := startServer(t, nil, "--proto", "echo", "--workers", "2")
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", s.addr, waitLimit)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(waitLimit))
			for j := range 100 {
				msg := fmt.Sprintf("conn %02d msg %03d", i, j)
				if _, err := io.WriteString(c, msg); err != nil {
					errs <- err
					return
				}
				buf := make([]byte, len(msg))
				if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
					errs <- fmt.Errorf("got %q, %v; want %q", buf, err, msg)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// ---- chat ----

type chatClient struct {
	t *testing.T
	c *net.TCPConn
	r *bufio.Reader
}

func dialChat(t *testing.T, addr string) *chatClient {
	c := dialT(t, addr)
	return &chatClient{t: t, c: c, r: bufio.NewReaderSize(c, 8192)}
}

func (c *chatClient) send(lines ...string) {
	c.t.Helper()
	if _, err := io.WriteString(c.c, strings.Join(lines, "\n")+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

func (c *chatClient) line() string {
	c.t.Helper()
	l, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("reading a line: %v (got %q)", err, l)
	}
	return strings.TrimSuffix(l, "\n")
}

func (c *chatClient) expect(want ...string) {
	c.t.Helper()
	for _, w := range want {
		if got := c.line(); got != w {
			c.t.Fatalf("got %q, want %q", got, w)
		}
	}
}

func (c *chatClient) expectEOF() {
	c.t.Helper()
	if l, err := c.r.ReadString('\n'); err == nil || (!errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET)) {
		c.t.Fatalf("want the connection closed, got %q, %v", l, err)
	}
}

func TestChatCommands(t *testing.T) {
	s := startServer(t, nil, "--proto", "chat")
	a, b := dialChat(t, s.addr), dialChat(t, s.addr)
	a.send("NICK alice", "JOIN lobby 0")
	a.expect("OK", "JOINED lobby 1")
	b.send("JOIN lobby 0", "SAY lobby hi there", "SAY lobby ", "SAY other x")
	b.expect("JOINED lobby 1", "ACK lobby 1", "ACK lobby 2", "ACK other 1")
	a.expect("MSG lobby 1 anon hi there", "MSG lobby 2 anon ")
	a.send("SAY lobby back", "PING p q")
	a.expect("ACK lobby 3", "PONG p q")
	b.expect("MSG lobby 3 alice back")
	a.send("LEAVE lobby", "LEAVE lobby", "JOIN lobby 2")
	a.expect("LEFT lobby", "ERR not joined", "MSG lobby 3 alice back", "JOINED lobby 4")
	a.send("JOIN lobby 0", "nick x", "", "NICK", "NICK a!", "JOIN a 1 2", "JOIN a x", "JOIN a! 1", "SAY r\xffx", "PING")
	a.expect("ERR already joined", "ERR unknown command", "ERR unknown command", "ERR wrong number of arguments",
		"ERR bad name", "ERR wrong number of arguments", "ERR bad seq", "ERR bad room", "ERR invalid utf-8",
		"ERR wrong number of arguments")
	// The connection is still usable after every ERR.
	a.send("PING still here")
	a.expect("PONG still here")
}

// Pipelined commands run in order: a JOIN's replay and JOINED come before the
// reply to the next command, and the sender never gets its own message.
func TestChatPipelinedJoinSay(t *testing.T) {
	s := startServer(t, nil, "--proto", "chat")
	a := dialChat(t, s.addr)
	a.send("JOIN r 0", "SAY r one", "SAY r two", "LEAVE r", "SAY r three", "JOIN r 1")
	a.expect("JOINED r 1", "ACK r 1", "ACK r 2", "LEFT r", "ACK r 3", "MSG r 2 anon two", "MSG r 3 anon three", "JOINED r 4")
}

// A client that half-closes gets every reply before the server closes.
func TestChatHalfClose(t *testing.T) {
	s := startServer(t, nil, "--proto", "chat")
	a := dialChat(t, s.addr)
	a.send("SAY r x", "JOIN r 0", "PING done")
	a.c.CloseWrite()
	a.expect("ACK r 1", "MSG r 1 anon x", "JOINED r 2", "PONG done")
	a.expectEOF()
}

func TestChatLineTooLong(t *testing.T) {
	s := startServer(t, nil, "--proto", "chat")
	a := dialChat(t, s.addr)
	// 4096 bytes with the newline is allowed...
	a.send("PING " + strings.Repeat("x", maxLineLen-6))
	if got := a.line(); got != "PONG "+strings.Repeat("x", maxLineLen-6) {
		t.Fatalf("reply of %d bytes", len(got))
	}
	// ...one more is not, and closes the connection after the ERR line,
	// even while the client is still sending the rest of the line.
	a.send("PING " + strings.Repeat("x", maxLineLen-5) + strings.Repeat("y", 100000))
	a.expect("ERR line too long")
	a.expectEOF()
}

// Under concurrent senders, a JOIN in the middle of the traffic gets every
// message exactly once, in order, with JOINED at the seam.
func TestChatJoinSeamUnderConcurrentSenders(t *testing.T) {
	s := startServer(t, nil, "--proto", "chat", "--workers", "2")
	const senders, each = 4, 400
	const total = senders * each
	started := make(chan struct{}, senders)
	errs := make(chan error, senders)
	for i := range senders {
		go func() { errs <- sendMany(s.addr, fmt.Sprintf("s%d", i), "r", each, 100, started) }()
	}
	<-started // at least one sender is part way through
	j := dialChat(t, s.addr)
	j.send("JOIN r 0")
	var seqs []uint64
	joinedAt := -1
	for len(seqs) < total {
		l := j.line()
		if next, ok := strings.CutPrefix(l, "JOINED r "); ok {
			if joinedAt >= 0 {
				t.Fatalf("second JOINED: %q", l)
			}
			joinedAt = len(seqs)
			if want := strconv.Itoa(len(seqs) + 1); next != want {
				t.Fatalf("JOINED r %s after %d replayed messages", next, len(seqs))
			}
			continue
		}
		f := strings.SplitN(l, " ", 5)
		if len(f) != 5 || f[0] != "MSG" || f[1] != "r" {
			t.Fatalf("unexpected line %q", l)
		}
		seq, _ := strconv.ParseUint(f[2], 10, 64)
		if seq != uint64(len(seqs)+1) {
			t.Fatalf("got seq %d after %d messages (JOINED after %d)", seq, len(seqs), joinedAt)
		}
		if !strings.HasPrefix(f[4], f[3]+" ") {
			t.Fatalf("message %q does not carry its sender", l)
		}
		seqs = append(seqs, seq)
	}
	if joinedAt < 0 {
		t.Fatal("no JOINED line")
	}
	for range senders {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("JOINED came after %d of %d messages", joinedAt, total)
}

// sendMany says n messages to room as nick, writing them in batches, and
// checks the ACKs. It signals started once its first batch is acknowledged.
func sendMany(addr, nick, room string, n, batch int, started chan<- struct{}) error {
	c, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(waitLimit))
	r := bufio.NewReader(c)
	if _, err := fmt.Fprintf(c, "NICK %s\n", nick); err != nil {
		return err
	}
	if l, err := r.ReadString('\n'); err != nil || l != "OK\n" {
		return fmt.Errorf("NICK: %q, %v", l, err)
	}
	var last uint64
	for i := 0; i < n; i += batch {
		var b strings.Builder
		for k := i; k < min(n, i+batch); k++ {
			fmt.Fprintf(&b, "SAY %s %s %d %s\n", room, nick, k, strings.Repeat("p", k%50))
		}
		if _, err := io.WriteString(c, b.String()); err != nil {
			return err
		}
		for k := i; k < min(n, i+batch); k++ {
			l, err := r.ReadString('\n')
			if err != nil {
				return err
			}
			seq, ok := strings.CutPrefix(strings.TrimSuffix(l, "\n"), "ACK "+room+" ")
			s, perr := strconv.ParseUint(seq, 10, 64)
			if !ok || perr != nil || s <= last {
				return fmt.Errorf("%s: bad ACK %q after seq %d", nick, l, last)
			}
			last = s
		}
		if i == 0 && started != nil {
			started <- struct{}{}
		}
	}
	return nil
}

// A subscriber that stops reading is cut once --max-pending bytes wait for
// it, and neither the sender nor a reading subscriber notice.
func TestChatSlowSubscriberIsCut(t *testing.T) {
	s := startServer(t, nil, "--proto", "chat", "--max-pending", "65536")
	// A small receive buffer, so the kernel holds little for the slow one.
	d := net.Dialer{Timeout: waitLimit, Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	sc, err := d.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	sc.SetDeadline(time.Now().Add(waitLimit))
	slow := &chatClient{t: t, c: sc.(*net.TCPConn), r: bufio.NewReader(sc)}
	slow.send("JOIN r 0")
	slow.expect("JOINED r 1")

	fast := dialChat(t, s.addr)
	fast.send("JOIN r 0")
	fast.expect("JOINED r 1")

	sender := dialChat(t, s.addr)
	const n = 2000
	text := strings.Repeat("t", 4000)
	// One message at a time, each read by the fast subscriber before the
	// next: a burst of more than --max-pending bytes would rightly cut even a
	// subscriber that reads.
	for i := 1; i <= n; i++ {
		sender.send("SAY r " + text)
		sender.expect(fmt.Sprintf("ACK r %d", i))
		if l := fast.line(); l != fmt.Sprintf("MSG r %d anon %s", i, text) {
			t.Fatalf("fast subscriber, message %d: %.40q", i, l)
		}
	}
	got := 0
	for {
		l, err := slow.r.ReadString('\n')
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the slow subscriber was not cut (read %d messages)", got)
			}
			break
		}
		if l != fmt.Sprintf("MSG r %d anon %s\n", got+1, text) {
			t.Fatalf("slow subscriber, message %d: %.40q", got+1, l)
		}
		got++
	}
	if got >= n {
		t.Fatalf("the slow subscriber got all %d messages", got)
	}
	t.Logf("the slow subscriber got %d of %d messages before the cut", got, n)
	// It can come back and catch up.
	back := dialChat(t, s.addr)
	back.send(fmt.Sprintf("JOIN r %d", got))
	for i := got + 1; i <= n; i++ {
		if l := back.line(); !strings.HasPrefix(l, fmt.Sprintf("MSG r %d anon ", i)) {
			t.Fatalf("catching up, message %d: %.40q", i, l)
		}
	}
	back.expect(fmt.Sprintf("JOINED r %d", n+1))
}

// Acknowledged messages survive kill -9; a torn tail is cut at restart and
// the seq goes on from the last whole record.
func TestChatDurableAcrossKillAndTornTail(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, nil, "--proto", "chat", "--data", dir, "--fsync", "always")
	a := dialChat(t, s.addr)
	for i := 1; i <= 5; i++ {
		a.send(fmt.Sprintf("SAY room-1 message %d", i))
		a.expect(fmt.Sprintf("ACK room-1 %d", i))
	}
	s.cmd.Process.Kill()
	s.wait()

	path := filepath.Join(dir, "room-1.log")
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	torn := appendRecord(nil, 6, []byte("anon"), []byte("never acknowledged"))[:20]
	if err := os.WriteFile(path, append(append([]byte(nil), before...), torn...), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a room"), 0o644)

	s = startServer(t, nil, "--proto", "chat", "--data", dir)
	b := dialChat(t, s.addr)
	b.send("JOIN room-1 3")
	b.expect("MSG room-1 4 anon message 4", "MSG room-1 5 anon message 5", "JOINED room-1 6")
	b.send("SAY room-1 after")
	b.expect("ACK room-1 6")
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if e := s.stderr.String(); !strings.Contains(e, "torn tail of 20 bytes at offset "+strconv.Itoa(len(before))) {
		t.Fatalf("stderr does not report the cut: %q", e)
	}
	after, _ := os.ReadFile(path)
	want := append(append([]byte(nil), before...), appendRecord(nil, 6, []byte("anon"), []byte("after"))...)
	if !bytes.Equal(after, want) {
		t.Fatalf("log after restart:\n%x\nwant\n%x", after, want)
	}
}

func TestChatRefusesCorruptLog(t *testing.T) {
	dir := t.TempDir()
	rec := append(appendRecord(nil, 1, []byte("anon"), []byte("one")), appendRecord(nil, 2, []byte("anon"), []byte("two"))...)
	rec[10] ^= 1
	path := filepath.Join(dir, "r.log")
	os.WriteFile(path, rec, 0o644)
	code, stdout, stderr := runToExit(t, nil, "--proto", "chat", "--data", dir)
	if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, path+" is corrupt at offset 0") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, rec) {
		t.Fatal("the corrupt log was changed")
	}
}

// ---- the command line and the process ----

func TestBadArgumentsExit2(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	for _, args := range [][]string{
		{},
		{"--proto", "redis"},
		{"--proto"},
		{"--proto", "echo", "--bogus"},
		{"--proto", "echo", "stray"},
		{"--proto", "echo", "--workers", "0"},
		{"--proto", "echo", "--workers", "two"},
		{"--proto", "echo", "--msg-size", "0"},
		{"--proto", "echo", "--compute-us", "-1"},
		{"--proto", "chat", "--fsync", "sometimes"},
		{"--proto", "chat", "--max-pending", "0"},
		{"--proto", "echo", "--cpus", "x"},
		{"--proto", "echo", "--cpus", "3-1"},
		{"--proto", "echo", "--cpus", "1023"},
		{"--proto", "echo", "--addr", "256.0.0.1:0"},
		{"--proto", "chat", "--data", file},
		{"--proto", "chat", "--data", filepath.Join(dir, "missing", "deeper")},
	} {
		code, stdout, stderr := runToExit(t, nil, args...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "srv-go: ") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("something was written in %s: %v", dir, entries)
	}
}

func TestPortInUseExit2(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	code, stdout, stderr := runToExit(t, nil, "--proto", "chat", "--addr", ln.Addr().String(), "--data", dir)
	if code != 2 || stdout != "" || !strings.Contains(stderr, "address already in use") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

var statsLine = regexp.MustCompile(`^srv-go: stopped: conns=(\d+) bytes_in=(\d+) bytes_out=(\d+) msgs=(\d+)\n$`)

func TestSignalsStopCleanly(t *testing.T) {
	for _, tc := range []struct {
		proto string
		sig   os.Signal
	}{{"chat", syscall.SIGTERM}, {"chat", syscall.SIGINT}, {"echo", syscall.SIGTERM}} {
		tmp := t.TempDir()
		s := startServer(t, []string{"TMPDIR=" + tmp}, "--proto", tc.proto)
		c := dialChat(t, s.addr)
		c.send("PING x")
		if tc.proto == "chat" {
			c.send("SAY r m")
			c.expect("PONG x", "ACK r 1")
		} else {
			c.expect("PING x")
		}
		if code := s.stop(tc.sig); code != 0 {
			t.Fatalf("%s %v: exit %d, stderr %q", tc.proto, tc.sig, code, s.stderr.String())
		}
		m := statsLine.FindStringSubmatch(s.stderr.String())
		if m == nil || m[1] != "1" || (tc.proto == "chat" && m[4] != "2") {
			t.Fatalf("%s %v: stderr %q", tc.proto, tc.sig, s.stderr.String())
		}
		// Without --data the rooms lived in a temporary directory, now gone.
		if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
			t.Fatalf("%s: left behind %v", tc.proto, entries)
		}
	}
}

func TestCPUsPinsEveryThread(t *testing.T) {
	s := startServer(t, nil, "--proto", "echo", "--cpus", "0", "--addr=127.0.0.1:0")
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", s.cmd.Process.Pid))
	if err != nil || len(tasks) == 0 {
		t.Skipf("no /proc task list: %v", err)
	}
	for _, status := range tasks {
		b, err := os.ReadFile(status)
		if err != nil {
			continue // the thread exited
		}
		if !regexp.MustCompile(`(?m)^Cpus_allowed_list:\s+0$`).Match(b) {
			t.Errorf("%s is not pinned to CPU 0:\n%s", status, b)
		}
	}
}
