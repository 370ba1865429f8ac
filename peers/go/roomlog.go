// The durable room log: one append-only file per room, in the on-disk format of
// docs/room-log.md that every ringside server shares, so a room written by srv-go
// can be recovered and replayed by the Rust servers and the other way round.
//
// A record, all integers little-endian:
//
//	offset  size      field
//	     0     4      body_len  u32, 10 <= body_len <= 1 MiB
//	     4     4      crc       u32, CRC-32 IEEE of the body
//	     8  body_len  body:     seq u64 | name_len u8 (1..=64) | name | text (UTF-8, no newline)
//
// The golden record used by the tests (seq 1, nick "anon", text "hello"), hex:
//
//	12000000 05fde9b0 0100000000000000 04 616e6f6e 68656c6c6f
//
// that is body_len 18, CRC-32 0xb0e9fd05 (zlib.crc32 of the body), then the
// body. The Rust side (crates/service/src/log.rs) checks the same bytes.

package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"unicode/utf8"
)

const (
	recHeaderLen  = 8
	recMinBodyLen = 8 + 1 + 1 // seq, name_len and a name of one byte
	recMaxBodyLen = 1 << 20
	maxNameLen    = 64
)

// errRecord describes why a record failed the field checks (check 2 of the
// recovery rules); the caller decides whether that makes it a torn tail.
type errRecord struct{ reason string }

func (e *errRecord) Error() string { return e.reason }

// appendRecord appends the encoded record (header and body) to dst.
func appendRecord(dst []byte, seq uint64, name, text []byte) []byte {
	bodyLen := 8 + 1 + len(name) + len(text)
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(bodyLen))
	dst = binary.LittleEndian.AppendUint32(dst, 0) // the CRC, filled in below
	dst = binary.LittleEndian.AppendUint64(dst, seq)
	dst = append(dst, byte(len(name)))
	dst = append(dst, name...)
	dst = append(dst, text...)
	crc := crc32.ChecksumIEEE(dst[start+recHeaderLen:])
	binary.LittleEndian.PutUint32(dst[start+4:], crc)
	return dst
}

// decodeBody checks a body against the CRC of its header and returns its
// fields, which alias body.
func decodeBody(crc uint32, body []byte) (seq uint64, name, text []byte, err error) {
	if len(body) < recMinBodyLen || len(body) > recMaxBodyLen {
		return 0, nil, nil, &errRecord{fmt.Sprintf("body length %d out of range", len(body))}
	}
	if got := crc32.ChecksumIEEE(body); got != crc {
		return 0, nil, nil, &errRecord{fmt.Sprintf("checksum mismatch (stored %08x, computed %08x)", crc, got)}
	}
	seq = binary.LittleEndian.Uint64(body)
	nameLen := int(body[8])
	if nameLen < 1 || nameLen > maxNameLen || 9+nameLen > len(body) {
		return 0, nil, nil, &errRecord{fmt.Sprintf("bad name length %d", nameLen)}
	}
	name = body[9 : 9+nameLen]
	text = body[9+nameLen:]
	if !validName(name) {
		return 0, nil, nil, &errRecord{"bad name"}
	}
	// Recovery checks exactly what docs/room-log.md lists, as the Rust log
	// does, so that both accept the same files: a newline is kept out of the
	// text by the line protocol, not by this check.
	if !utf8.Valid(text) {
		return 0, nil, nil, &errRecord{"text is not UTF-8"}
	}
	return seq, name, text, nil
}

// validName reports whether b is a valid nick or room: 1 to 64 bytes of [A-Za-z0-9_-].
func validName(b []byte) bool {
	if len(b) < 1 || len(b) > maxNameLen {
		return false
	}
	for _, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// CorruptError is mid-file corruption: a bad record followed by more bytes.
// Cutting it would lose acknowledged messages, so the server refuses to start.
type CorruptError struct {
	Path   string
	Offset int64
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("room log %s is corrupt at offset %d: %s; refusing to start, since cutting it would lose the messages after it",
		e.Path, e.Offset, e.Reason)
}

// roomLog is one room's file plus an index from seq to file offset, so a replay
// starts with one pread instead of a scan. Its methods are not safe for
// concurrent use, except readRecords over bytes below end; the room's mutex
// serialises the rest.
type roomLog struct {
	f    *os.File
	path string
	// end is the file length: every byte below it belongs to a complete,
	// valid record.
	end int64
	// offsets[i] is the offset of the record with seq i+1.
	offsets []int64
	// broken is set when a failed append could not be rolled back; the file
	// may then hold a partial record, and no further append may follow it.
	broken error
	// scratch is reused for encoding appends.
	scratch []byte
}

// openRoomLog opens (creating it if need be) the log at path and recovers it:
// it checks every record, cuts a torn tail, reporting the cut through warn,
// and returns a *CorruptError for corruption in the middle of the file.
func openRoomLog(path string, warn func(string)) (*roomLog, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	l := &roomLog{f: f, path: path}
	if err := l.recover(warn); err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

func (l *roomLog) recover(warn func(string)) error {
	st, err := l.f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	win := &window{f: l.f, size: size}
	var off int64
	cut := func(reason string) error {
		if err := l.f.Truncate(off); err != nil {
			return fmt.Errorf("room log %s: cutting a torn tail at offset %d: %w", l.path, off, err)
		}
		if err := l.f.Sync(); err != nil {
			return fmt.Errorf("room log %s: syncing after cutting a torn tail: %w", l.path, err)
		}
		l.end = off
		warn(fmt.Sprintf("room log %s: cut a torn tail of %d bytes at offset %d (%s)", l.path, size-off, off, reason))
		return nil
	}
	for off < size {
		want := uint64(len(l.offsets)) + 1
		recLen, seq, ferr, err := checkRecord(win, off, size)
		if err != nil {
			return fmt.Errorf("room log %s: reading at offset %d: %w", l.path, off, err)
		}
		if ferr != nil {
			// A record that fails checks 1 or 2 is a torn tail only when nothing
			// after it could be a message somebody was told was stored.
			later, err := findLaterRecord(l.f, off, size, want)
			if err != nil {
				return fmt.Errorf("room log %s: reading after offset %d: %w", l.path, off, err)
			}
			if later < 0 {
				return cut(ferr.Error())
			}
			return &CorruptError{Path: l.path, Offset: off, Reason: fmt.Sprintf("%s (a valid record follows at offset %d)", ferr.Error(), later)}
		}
		// Check 3: no gap and no repeat. A valid record with the wrong seq is
		// not the trace of a torn write, wherever it is.
		if seq != want {
			return &CorruptError{Path: l.path, Offset: off, Reason: fmt.Sprintf("seq %d where %d was expected", seq, want)}
		}
		l.offsets = append(l.offsets, off)
		off += recLen
	}
	l.end = off
	return nil
}

// checkRecord runs checks 1 and 2 of docs/room-log.md on the record at off of
// a file size bytes long. ferr says why the record is not whole and well
// formed; err is an I/O error.
func checkRecord(r io.ReaderAt, off, size int64) (recLen int64, seq uint64, ferr, err error) {
	// Check 1: the header and the whole body are in the file.
	if size-off < recHeaderLen {
		return 0, 0, &errRecord{"incomplete header"}, nil
	}
	var hdr [recHeaderLen]byte
	if _, err := r.ReadAt(hdr[:], off); err != nil {
		return 0, 0, nil, err
	}
	bodyLen := int64(binary.LittleEndian.Uint32(hdr[0:4]))
	if off+recHeaderLen+bodyLen > size {
		return 0, 0, &errRecord{"body length past the end of the file"}, nil
	}
	// Check 2: length, checksum and fields.
	if bodyLen < recMinBodyLen || bodyLen > recMaxBodyLen {
		return 0, 0, &errRecord{fmt.Sprintf("body length %d out of range", bodyLen)}, nil
	}
	body := make([]byte, bodyLen)
	if _, err := r.ReadAt(body, off+recHeaderLen); err != nil {
		return 0, 0, nil, err
	}
	seq, _, _, ferr = decodeBody(binary.LittleEndian.Uint32(hdr[4:8]), body)
	return recHeaderLen + bodyLen, seq, ferr, nil
}

// window is a read cache over the file for the recovery scan: big
// sequential preads rather than two small ones per record.
type window struct {
	f     io.ReaderAt
	size  int64
	buf   []byte
	start int64
}

// ReadAt fills p from the file at off, which the caller has checked lies
// within size.
func (w *window) ReadAt(p []byte, off int64) (int, error) {
	n := int64(len(p))
	if off < w.start || off+n > w.start+int64(len(w.buf)) {
		want := max(n, 256<<10)
		want = min(want, w.size-off)
		w.buf = grow(w.buf, int(want))
		if _, err := w.f.ReadAt(w.buf, off); err != nil {
			return 0, err
		}
		w.start = off
	}
	return copy(p, w.buf[off-w.start:]), nil
}

// recMinLen is the smallest whole record: a header and the smallest body.
const recMinLen = recHeaderLen + recMinBodyLen

// findLaterRecord looks, after the record at bad failed checks 1 or 2 where
// seq want was expected, at every later byte offset p for a record that could
// have been acknowledged: one that passes checks 1 and 2 and whose seq s could
// follow in this file, want <= s < want + (size-bad)/18. It returns the first
// such offset, or -1: then the bytes from bad on are a torn tail.
func findLaterRecord(f io.ReaderAt, bad, size int64, want uint64) (int64, error) {
	maxSeq := want + uint64((size-bad)/recMinLen)
	r := bufio.NewReaderSize(io.NewSectionReader(f, bad+1, size-bad-1), 64<<10)
	// Peek at the bytes from p on: header, seq and name_len.
	const peek = recHeaderLen + 9
	for p := bad + 1; p+recMinLen <= size; p++ {
		head, err := r.Peek(peek)
		if err != nil {
			return 0, err
		}
		bodyLen := int64(binary.LittleEndian.Uint32(head[0:4]))
		seq := binary.LittleEndian.Uint64(head[8:16])
		nameLen := head[16]
		// Cheap filters first, so a long tail of zeros or garbage costs no
		// checksum at every byte.
		if bodyLen >= recMinBodyLen && bodyLen <= recMaxBodyLen && p+recHeaderLen+bodyLen <= size &&
			seq >= want && seq < maxSeq && nameLen >= 1 && nameLen <= maxNameLen {
			_, _, ferr, err := checkRecord(f, p, size)
			if err != nil {
				return 0, err
			}
			if ferr == nil {
				return p, nil
			}
		}
		if _, err := r.Discard(1); err != nil {
			return 0, err
		}
	}
	return -1, nil
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// next is the seq the next appended message gets.
func (l *roomLog) next() uint64 { return uint64(len(l.offsets)) + 1 }

// append writes one record in a single write(2), then with sync an
// fdatasync(2), and returns its seq. On failure the file is cut back to its
// previous length, so a failed append never leaves a torn record in the middle
// of the log.
func (l *roomLog) append(name, text []byte, sync bool) (uint64, error) {
	if l.broken != nil {
		return 0, l.broken
	}
	seq := l.next()
	l.scratch = appendRecord(l.scratch[:0], seq, name, text)
	if len(l.scratch)-recHeaderLen > recMaxBodyLen {
		return 0, fmt.Errorf("record of %d bytes is over the limit", len(l.scratch))
	}
	_, err := l.f.Write(l.scratch)
	if err == nil && sync {
		err = fdatasync(l.f)
	}
	if err != nil {
		if terr := l.f.Truncate(l.end); terr != nil {
			l.broken = fmt.Errorf("room log %s: append failed (%v) and could not be rolled back: %w", l.path, err, terr)
		}
		return 0, err
	}
	l.offsets = append(l.offsets, l.end)
	l.end += int64(len(l.scratch))
	if cap(l.scratch) > 64<<10 {
		l.scratch = nil
	}
	return seq, nil
}

// offsetAfter is the offset of the first record with seq > since, or end.
func (l *roomLog) offsetAfter(since uint64) int64 {
	if since >= uint64(len(l.offsets)) {
		return l.end
	}
	return l.offsets[since]
}

// readRecords calls fn for each record in [off, end), which must be record
// boundaries below the log's end. It reads with pread, so it may run
// concurrently with append. The slices passed to fn are valid during the call.
func (l *roomLog) readRecords(off, end int64, fn func(seq uint64, name, text []byte) error) error {
	br := bufio.NewReaderSize(io.NewSectionReader(l.f, off, end-off), 16<<10)
	var hdr [recHeaderLen]byte
	var body []byte
	for off < end {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return fmt.Errorf("room log %s: reading at offset %d: %w", l.path, off, err)
		}
		bodyLen := int64(binary.LittleEndian.Uint32(hdr[0:4]))
		if bodyLen > recMaxBodyLen || off+recHeaderLen+bodyLen > end {
			return fmt.Errorf("room log %s: bad record length at offset %d", l.path, off)
		}
		body = grow(body, int(bodyLen))
		if _, err := io.ReadFull(br, body); err != nil {
			return fmt.Errorf("room log %s: reading at offset %d: %w", l.path, off, err)
		}
		seq, name, text, err := decodeBody(binary.LittleEndian.Uint32(hdr[4:8]), body)
		if err != nil {
			return fmt.Errorf("room log %s: record at offset %d changed on disk: %w", l.path, off, err)
		}
		if err := fn(seq, name, text); err != nil {
			return err
		}
		off += recHeaderLen + bodyLen
	}
	return nil
}

// sync flushes the file to stable storage.
func (l *roomLog) sync() error { return l.f.Sync() }

// close closes the file.
func (l *roomLog) close() error { return l.f.Close() }
