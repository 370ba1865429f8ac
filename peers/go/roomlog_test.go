// Tests of the room-log format: the golden record, recovery of a torn tail at
// every cut point, refusal of mid-file corruption, and seq continuity, and the crafted logs shared with the Rust tests.

package main

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// goldenHex is the record (seq 1, nick "anon", text "hello"), laid out by hand
// from docs/room-log.md; the CRC is zlib.crc32 of the body, 0xb0e9fd05. The
// Rust log (crates/service/src/log.rs) must produce the same bytes.
//
//	12000000          body_len 18
//	05fde9b0          crc 0xb0e9fd05
//	0100000000000000  seq 1
//	04                name_len 4
//	616e6f6e          "anon"
//	68656c6c6f        "hello"
const goldenHex = "12000000" + "05fde9b0" + "0100000000000000" + "04" + "616e6f6e" + "68656c6c6f"

func TestGoldenRecordEncode(t *testing.T) {
	got := appendRecord(nil, 1, []byte("anon"), []byte("hello"))
	if h := hex.EncodeToString(got); h != goldenHex {
		t.Fatalf("encoded\n got %s\nwant %s", h, goldenHex)
	}
}

func TestGoldenRecordDecode(t *testing.T) {
	rec, err := hex.DecodeString(goldenHex)
	if err != nil {
		t.Fatal(err)
	}
	if n := binary.LittleEndian.Uint32(rec); int(n) != len(rec)-recHeaderLen {
		t.Fatalf("body_len %d, record of %d bytes", n, len(rec))
	}
	seq, name, text, err := decodeBody(binary.LittleEndian.Uint32(rec[4:]), rec[recHeaderLen:])
	if err != nil {
		t.Fatal(err)
	}
	if seq != 1 || string(name) != "anon" || string(text) != "hello" {
		t.Fatalf("decoded seq %d name %q text %q", seq, name, text)
	}
}

// The CRC must be the IEEE one every implementation uses, not another
// polynomial that would also pass a round trip.
func TestGoldenCRCIsIEEE(t *testing.T) {
	rec, _ := hex.DecodeString(goldenHex)
	if got := crc32.Checksum(rec[recHeaderLen:], crc32.MakeTable(crc32.IEEE)); got != 0xb0e9fd05 {
		t.Fatalf("crc %08x", got)
	}
}

func TestDecodeRejectsBadFields(t *testing.T) {
	body := func(seq uint64, name, text string) []byte {
		return appendRecord(nil, seq, []byte(name), []byte(text))[recHeaderLen:]
	}
	cases := map[string][]byte{
		"short":        body(1, "a", "")[:9],
		"empty name":   append(binary.LittleEndian.AppendUint64(nil, 1), 0, 'x'),
		"long name":    body(1, strings.Repeat("a", 65), ""),
		"bad name":     body(1, "a b", "x"),
		"invalid utf8": body(1, "anon", "\xff"),
	}
	for what, b := range cases {
		if _, _, _, err := decodeBody(crc32.ChecksumIEEE(b), b); err == nil {
			t.Errorf("%s: accepted", what)
		}
	}
	good := body(7, "anon", "hi")
	if _, _, _, err := decodeBody(crc32.ChecksumIEEE(good)^1, good); err == nil {
		t.Error("bad checksum accepted")
	}
}

// writeLog writes messages 1..n to a new log in dir and returns its bytes and
// the offset of each record.
func writeLog(t *testing.T, path string, texts ...string) ([]byte, []int64) {
	t.Helper()
	l, err := openRoomLog(path, func(msg string) { t.Fatalf("unexpected warning: %s", msg) })
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	for i, text := range texts {
		seq, err := l.append([]byte("anon"), []byte(text), i%2 == 0)
		if err != nil {
			t.Fatal(err)
		}
		if seq != uint64(i+1) {
			t.Fatalf("append %d got seq %d", i, seq)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data, append([]int64(nil), l.offsets...)
}

func readAll(t *testing.T, l *roomLog) []string {
	t.Helper()
	var got []string
	err := l.readRecords(0, l.end, func(seq uint64, name, text []byte) error {
		got = append(got, fmt.Sprintf("%d %s %s", seq, name, text))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestTornTailIsCutAtEveryCutPoint(t *testing.T) {
	dir := t.TempDir()
	full, offsets := writeLog(t, filepath.Join(dir, "src.log"), "one", "", "three")
	boundaries := append(offsets, int64(len(full)))
	for cut := 0; cut <= len(full); cut++ {
		path := filepath.Join(dir, fmt.Sprintf("cut%d.log", cut))
		if err := os.WriteFile(path, full[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		// The last whole record at or before the cut survives.
		whole := 0
		for whole+1 < len(boundaries) && boundaries[whole+1] <= int64(cut) {
			whole++
		}
		var warnings []string
		l, err := openRoomLog(path, func(msg string) { warnings = append(warnings, msg) })
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		atBoundary := boundaries[whole] == int64(cut)
		if atBoundary != (len(warnings) == 0) {
			t.Errorf("cut at %d: warnings %q", cut, warnings)
		}
		if len(warnings) == 1 && !strings.Contains(warnings[0], fmt.Sprintf("offset %d", boundaries[whole])) {
			t.Errorf("cut at %d: warning %q does not name offset %d", cut, warnings[0], boundaries[whole])
		}
		if l.next() != uint64(whole)+1 || l.end != boundaries[whole] {
			t.Errorf("cut at %d: next %d end %d, want %d %d", cut, l.next(), l.end, whole+1, boundaries[whole])
		}
		if st, err := os.Stat(path); err != nil || st.Size() != boundaries[whole] {
			t.Errorf("cut at %d: file not truncated to %d (%v, %v)", cut, boundaries[whole], st.Size(), err)
		}
		// The next message continues the seq right after the cut.
		if seq, err := l.append([]byte("anon"), []byte("again"), false); err != nil || seq != uint64(whole)+1 {
			t.Errorf("cut at %d: append after recovery: seq %d, %v", cut, seq, err)
		}
		l.close()
	}
}

// A last record whose length arrived but whose body is wrong is a torn tail too.
func TestTornTailWithBadLastBodyIsCut(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.log")
	full, offsets := writeLog(t, path, "one", "two")
	full[len(full)-1] ^= 0xff
	if err := os.WriteFile(path, full, 0o644); err != nil {
		t.Fatal(err)
	}
	var warned bool
	l, err := openRoomLog(path, func(string) { warned = true })
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	if !warned || l.end != offsets[1] || l.next() != 2 {
		t.Fatalf("warned %v end %d next %d", warned, l.end, l.next())
	}
}

func TestMidFileCorruptionIsRefused(t *testing.T) {
	dir := t.TempDir()
	full, offsets := writeLog(t, filepath.Join(dir, "src.log"), "one", "two", "three")
	badSeq := appendRecord(nil, 5, []byte("anon"), []byte("two"))
	cases := []struct {
		what   string
		data   []byte
		offset int64
	}{
		{"flipped body byte", flip(full, int(offsets[1])+recHeaderLen+3), offsets[1]},
		{"flipped crc byte", flip(full, int(offsets[0])+4), offsets[0]},
		{"short body_len", setLen(full, offsets[0], 3), offsets[0]},
		{"seq out of order", splice(full, offsets[1], offsets[2], badSeq), offsets[1]},
		{"seq wrong in the last record", append(append([]byte(nil), full...), appendRecord(nil, 9, []byte("anon"), nil)...), int64(len(full))},
	}
	for i, tc := range cases {
		path := filepath.Join(dir, fmt.Sprintf("bad%d.log", i))
		if err := os.WriteFile(path, tc.data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := openRoomLog(path, func(msg string) { t.Errorf("%s: warned %q", tc.what, msg) })
		var ce *CorruptError
		if !errors.As(err, &ce) {
			t.Errorf("%s: got %v, want a CorruptError", tc.what, err)
			continue
		}
		if ce.Offset != tc.offset || ce.Path != path {
			t.Errorf("%s: corrupt at %s offset %d, want offset %d", tc.what, ce.Path, ce.Offset, tc.offset)
		}
		// Refusing must leave the file as it was.
		if now, _ := os.ReadFile(path); !bytes.Equal(now, tc.data) {
			t.Errorf("%s: the file was changed", tc.what)
		}
	}
}

func flip(b []byte, i int) []byte {
	b = append([]byte(nil), b...)
	b[i] ^= 0x40
	return b
}

func setLen(b []byte, off int64, n uint32) []byte {
	b = append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(b[off:], n)
	return b
}

func splice(b []byte, from, to int64, rec []byte) []byte {
	out := append([]byte(nil), b[:from]...)
	out = append(out, rec...)
	return append(out, b[to:]...)
}

func TestSeqContinuesAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.log")
	writeLog(t, path, "one", "two", "three")
	for round := 0; round < 3; round++ {
		l, err := openRoomLog(path, func(msg string) { t.Fatalf("warned %q", msg) })
		if err != nil {
			t.Fatal(err)
		}
		want := uint64(4 + round)
		if l.next() != want {
			t.Fatalf("round %d: next %d, want %d", round, l.next(), want)
		}
		if seq, err := l.append([]byte("bob"), []byte(fmt.Sprint("r", round)), true); err != nil || seq != want {
			t.Fatalf("round %d: append gave %d, %v", round, seq, err)
		}
		l.close()
	}
	l, err := openRoomLog(path, func(msg string) { t.Fatalf("warned %q", msg) })
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	want := []string{"1 anon one", "2 anon two", "3 anon three", "4 bob r0", "5 bob r1", "6 bob r2"}
	if got := readAll(t, l); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("records %q", got)
	}
	if off := l.offsetAfter(4); off != l.offsets[4] {
		t.Fatalf("offsetAfter(4) = %d", off)
	}
	if off := l.offsetAfter(1 << 63); off != l.end {
		t.Fatalf("offsetAfter(huge) = %d", off)
	}
}

// The crafted logs of testdata/room-log, the same bytes the Rust log's tests
// recover (crates/service/tests/room_log_cases.rs writes them): each must
// recover as cases.txt says, so both implementations follow one rule.
func TestSharedRecoveryCases(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "room-log")
	manifest, err := os.ReadFile(filepath.Join(dir, "cases.txt"))
	if err != nil {
		t.Fatal(err)
	}
	cases := 0
	for _, line := range strings.Split(strings.TrimSpace(string(manifest)), "\n") {
		words := strings.Fields(line)
		name, outcome := words[0], words[1]
		num := func(i int) int64 {
			n, err := strconv.ParseInt(words[2+i], 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return n
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "r.log")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		warned := false
		l, err := openRoomLog(path, func(string) { warned = true })
		after, _ := os.ReadFile(path)
		switch outcome {
		case "clean":
			if err != nil || warned || l.next() != uint64(num(0)) || !bytes.Equal(after, data) {
				t.Errorf("%s: err %v, warned %v, after %d bytes", line, err, warned, len(after))
			}
		case "cut":
			if err != nil || !warned || l.next() != uint64(num(1)) || !bytes.Equal(after, data[:num(0)]) {
				t.Errorf("%s: err %v, warned %v, after %d bytes", line, err, warned, len(after))
			}
		case "corrupt":
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Offset != num(0) || ce.Path != path || !bytes.Equal(after, data) {
				t.Errorf("%s: err %v, after %d bytes", line, err, len(after))
			}
		default:
			t.Fatalf("unknown outcome in %q", line)
		}
		if l != nil {
			l.close()
		}
		cases++
	}
	if cases < 15 {
		t.Fatalf("only %d cases in cases.txt", cases)
	}
}
