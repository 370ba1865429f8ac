// Tests of the chat line parser and the line reader: every ERR reason, the
// order of the checks, and the 4096-byte line limit.

package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestParseLine(t *testing.T) {
	long := strings.Repeat("a", 65)
	cases := []struct {
		line string
		want string // the ERR reason, or a rendering of the command
	}{
		{"NICK bob", "nick bob"},
		{"NICK b_o-B9", "nick b_o-B9"},
		{"NICK", reasonArgs},
		{"NICK a b", reasonArgs},
		{"NICK  bob", reasonArgs},
		{"NICK ", reasonBadName},
		{"NICK b!b", reasonBadName},
		{"NICK " + long, reasonBadName},
		{"nick bob", reasonUnknown},
		{"", reasonUnknown},
		{" NICK bob", reasonUnknown},
		{"NICKS bob", reasonUnknown},
		{"JOIN r 0", "join r 0"},
		{"JOIN r 18446744073709551615", "join r 18446744073709551615"},
		{"JOIN r 00000000000000000001", "join r 1"},
		{"JOIN r", reasonArgs},
		{"JOIN r 1 x", reasonArgs},
		{"JOIN", reasonArgs},
		{"JOIN bad! x", reasonBadRoom}, // arguments are checked left to right
		{"JOIN " + long + " 1", reasonBadRoom},
		{"JOIN r 18446744073709551616", reasonBadSeq},
		{"JOIN r 000000000000000000001", reasonBadSeq},
		{"JOIN r -1", reasonBadSeq},
		{"JOIN r +1", reasonBadSeq},
		{"JOIN r ", reasonBadSeq},
		{"JOIN r 1a", reasonBadSeq},
		{"LEAVE r", "leave r"},
		{"LEAVE", reasonArgs},
		{"LEAVE r x", reasonArgs},
		{"LEAVE r.x", reasonBadRoom},
		{"SAY r hello world", "say r hello world"},
		{"SAY r ", "say r "},
		{"SAY r  two  spaces ", "say r  two  spaces "},
		{"SAY r", reasonArgs},
		{"SAY", reasonArgs},
		{"SAY ", reasonArgs},
		{"SAY  x", reasonBadRoom},
		{"SAY r/x hi", reasonBadRoom},
		{"SAY r h\xc3\xa9", "say r h\xc3\xa9"},
		{"SAY r \xff", reasonInvalidUTF8},
		{"\xffNICK", reasonInvalidUTF8}, // UTF-8 before the command
		{"PING x", "ping x"},
		{"PING a b  c", "ping a b  c"},
		{"PING", reasonArgs},
		{"PING ", reasonArgs},
	}
	for _, tc := range cases {
		cmd, reason := parseLine([]byte(tc.line))
		got := reason
		if reason == "" {
			got = render(cmd)
		}
		if got != tc.want {
			t.Errorf("parseLine(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

func render(c command) string {
	switch c.kind {
	case cmdNick:
		return "nick " + string(c.arg)
	case cmdJoin:
		return "join " + string(c.arg) + " " + uitoa(c.since)
	case cmdLeave:
		return "leave " + string(c.arg)
	case cmdSay:
		return "say " + string(c.arg) + " " + string(c.text)
	case cmdPing:
		return "ping " + string(c.text)
	}
	return "?"
}

func uitoa(n uint64) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
		if n == 0 {
			return string(b)
		}
	}
}

func TestLineReader(t *testing.T) {
	max := strings.Repeat("x", maxLineLen-1) + "\n" // exactly at the limit
	maxCR := strings.Repeat("y", maxLineLen-2) + "\r\n"
	input := "a\r\nb\n\n\r\n" + max + maxCR + "c c\rd\n" + "tail without newline"
	want := []string{"a", "b", "", "", max[:maxLineLen-1], maxCR[:maxLineLen-2], "c c\rd"}
	// One byte per read, and whole reads, must split the same way.
	for _, r := range []io.Reader{strings.NewReader(input), iotest.OneByteReader(strings.NewReader(input))} {
		lr := lineReader{r: r, buf: make([]byte, readBufSize), st: &counters{}}
		for i, w := range want {
			line, err := lr.next()
			if err != nil || string(line) != w {
				t.Fatalf("line %d: %q, %v; want %q", i, line, err, w)
			}
		}
		if _, err := lr.next(); !errors.Is(err, io.EOF) {
			t.Fatalf("after the last line: %v", err)
		}
	}
}

func TestLineReaderTooLong(t *testing.T) {
	for _, input := range []string{
		strings.Repeat("x", maxLineLen) + "\n",   // 4097 bytes with its newline
		strings.Repeat("x", maxLineLen) + "\r\n", // the \r counts
		strings.Repeat("x", maxLineLen),          // no newline yet: no need to wait for it
		"ok\n" + strings.Repeat("x", 3*maxLineLen),
	} {
		// A reader that never reaches EOF proves the reader does not wait
		// for the end of the line.
		r := io.MultiReader(iotest.HalfReader(strings.NewReader(input)), blockForever{t})
		lr := lineReader{r: r, buf: make([]byte, readBufSize), st: &counters{}}
		var err error
		for i := 0; i < 3 && err == nil; i++ {
			var line []byte
			line, err = lr.next()
			if err == nil && !bytes.Equal(line, []byte("ok")) {
				t.Fatalf("got line %q", line)
			}
		}
		if !errors.Is(err, errLineTooLong) {
			t.Fatalf("input of %d bytes: %v", len(input), err)
		}
	}
}

type blockForever struct{ t *testing.T }

func (b blockForever) Read([]byte) (int, error) {
	b.t.Fatal("the line reader waited for more input")
	return 0, io.EOF
}
