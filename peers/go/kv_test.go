package main

import (
	"bytes"
	"strings"
	"testing"
)

// run feeds input in one read and returns the replies and the flow.
func runKV(s *kvStore, input string) (string, kvFlow) {
	var p reqParser
	p.feed([]byte(input))
	out, flow := s.execute(&p, nil, 1<<30)
	return string(out), flow
}

func req(words ...string) string {
	var b strings.Builder
	b.WriteString("*" + itoa(len(words)) + "\r\n")
	for _, w := range words {
		b.WriteString("$" + itoa(len(w)) + "\r\n" + w + "\r\n")
	}
	return b.String()
}

func itoa(n int) string { return string(integer(nil, int64(n))[1 : len(integer(nil, int64(n)))-2]) }

// The same replies as redis-server 7 and service::kv's unit tests.
func TestKVRepliesAsRedis(t *testing.T) {
	cases := []struct{ in, want string }{
		{req("SET", "k", "v") + req("get", "k") + req("GET", "no"), "+OK\r\n$1\r\nv\r\n$-1\r\n"},
		{req("SET", "i", "abc") + req("INCR", "i"), "+OK\r\n-ERR value is not an integer or out of range\r\n"},
		{req("SET", "i", "9223372036854775807") + req("INCR", "i"), "+OK\r\n-ERR increment or decrement would overflow\r\n"},
		{req("DECRBY", "x", "-9223372036854775808"), "-ERR decrement would overflow\r\n"},
		{req("SET", "k", "v", "NX", "XX"), "-ERR syntax error\r\n"},
		{req("SET", "k", "v", "EX", "x"), "-ERR value is not an integer or out of range\r\n"},
		{req("SET", "k", "v", "EX", "0"), "-ERR invalid expire time in 'set' command\r\n"},
		{req("SET", "k", "v", "EX", "9223372036854776"), "-ERR invalid expire time in 'set' command\r\n"},
		{req("SET", "k", "v", "EX", "10", "EX", "20") + req("TTL", "k"), "+OK\r\n:20\r\n"},
		{req("SET", "k", "1") + req("SET", "k", "v", "GET") + req("SET", "k", "w", "NX", "GET"), "+OK\r\n$1\r\n1\r\n$1\r\nv\r\n"},
		{req("MSET", "a", "1", "b", "2") + req("MGET", "a", "zz", "b") + req("EXISTS", "a", "a", "zz") + req("DEL", "a", "a"), "+OK\r\n*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n2\r\n:2\r\n:1\r\n"},
		{req("MSET", "a", "1", "b"), "-ERR wrong number of arguments for 'mset' command\r\n"},
		{req("PING", "a", "b"), "-ERR wrong number of arguments for 'ping' command\r\n"},
		{req("SELECT", "16") + req("SELECT", "x") + req("SELECT", "0"), "-ERR DB index is out of range\r\n-ERR value is not an integer or out of range\r\n+OK\r\n"},
		{req("CONFIG", "GET"), "-ERR wrong number of arguments for 'config|get' command\r\n"},
		{req("CONFIG", "GET", "save"), "*2\r\n$4\r\nsave\r\n$0\r\n\r\n"},
		{req("CONFIG", "GET", "appendonly", "save", "SAVE"), "*4\r\n$10\r\nappendonly\r\n$2\r\nno\r\n$4\r\nsave\r\n$0\r\n\r\n"},
		{req("FOO", "a", "b\r\nc"), "-ERR unknown command 'FOO', with args beginning with: 'a' 'b  c' \r\n"},
		{req("FOO", "a\x00b", "c"), "-ERR unknown command 'FOO', with args beginning with: 'a' 'c' \r\n"},
		{"SET \"a b\\x41\" 'it\\'s'\r\nGET \"a bA\"\r\n", "+OK\r\n$4\r\nit's\r\n"},
		{"PING\r\n*0\r\n*-1\r\n\r\nPING\r\n", "+PONG\r\n+PONG\r\n"},
	}
	for _, c := range cases {
		got, _ := runKV(newKVStore(), c.in)
		if got != c.want {
			t.Errorf("%q: got %q, want %q", c.in, got, c.want)
		}
	}
}

func TestKVProtocolErrorsClose(t *testing.T) {
	cases := []struct{ in, want string }{
		{"*x\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"*1\r\n:1\r\n", "-ERR Protocol error: expected '$', got ':'\r\n"},
		{"*1\r\n\r\n", "-ERR Protocol error: expected '$', got ' '\r\n"},
		{"*1\r\n$-1\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"ECHO \"abc\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
		{"PING\r\nQUIT\r\nPING\r\n", "+PONG\r\n+OK\r\n"},
		{"PING\r\nPOST / HTTP/1.1\r\nPING\r\n", ""},
		{strings.Repeat("a", respMaxInline+1), "-ERR Protocol error: too big inline request\r\n"},
	}
	for _, c := range cases {
		got, flow := runKV(newKVStore(), c.in)
		if got != c.want || flow != flowClose {
			t.Errorf("%q: got %q (flow %d), want %q and a close", c.in, got, flow, c.want)
		}
	}
}

// Any split of a pipelined stream gives the same replies, and execute stops
// at the output limit.
func TestKVSplitsAndLimit(t *testing.T) {
	stream := req("SET", "k\r\n\x00", "\xff\x00v") + "GET \"k\\r\\n\\x00\"\r\n" + req("ECHO", "xyz")
	want, _ := runKV(newKVStore(), stream)
	for cut := 0; cut <= len(stream); cut++ {
		s := newKVStore()
		var p reqParser
		var out []byte
		for _, part := range []string{stream[:cut], stream[cut:]} {
			p.feed([]byte(part))
			out, _ = s.execute(&p, out, 1<<30)
		}
		if string(out) != want {
			t.Fatalf("cut at %d: got %q, want %q", cut, out, want)
		}
	}
	var p reqParser
	p.feed(bytes.Repeat([]byte("PING\r\n"), 10))
	out, flow := newKVStore().execute(&p, nil, 20)
	if flow != flowOutputFull || string(out) != strings.Repeat("+PONG\r\n", 3) {
		t.Fatalf("limit: got %q, flow %d", out, flow)
	}
}

// TestKVRequestsOfAnExistingKeyAllocateNothing: once a key exists, reading,
// writing and counting it allocate nothing per request (the name is matched
// in place, the entry rewritten in its own buffer).
func TestKVRequestsOfAnExistingKeyAllocateNothing(t *testing.T) {
	s := newKVStore()
	runKV(s, req("SET", "k", "1"))
	in := []byte(req("SET", "k", "22") + req("get", "k") + req("INCR", "k") + req("mset", "k", "5") +
		req("MGET", "k") + req("EXISTS", "k") + req("set", "k", "9", "xx") + req("IncrBy", "k", "2"))
	var p reqParser
	out := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(100, func() {
		p.feed(in)
		out, _ = s.execute(&p, out[:0], 1<<20)
	})
	want := "+OK\r\n$2\r\n22\r\n:23\r\n+OK\r\n*1\r\n$1\r\n5\r\n:1\r\n+OK\r\n:11\r\n"
	if string(out) != want || allocs != 0 {
		t.Fatalf("replies %q, %v allocations per batch", out, allocs)
	}
}

// TestKVNamesFoldASCIIOnly: names and options match in any ASCII case, as
// Redis's strcasecmp does, and no other folding (the Kelvin sign is no K).
func TestKVNamesFoldASCIIOnly(t *testing.T) {
	got, _ := runKV(newKVStore(), req("sEt", "k", "v", "kEePtTl")+req("SET", "k", "v", "\u212aEEPTTL")+req("GE\u212a", "k"))
	want := "+OK\r\n-ERR syntax error\r\n-ERR unknown command 'GE\u212a', with args beginning with: 'k' \r\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
