package main

import (
	"bytes"
	"testing"
	"testing/iotest"
)

// naive counts non-overlapping occurrences left to right, as a search of the
// whole stream does.
func naive(hay, needle []byte) uint64 {
	var n uint64
	for i := 0; i+len(needle) <= len(hay); {
		if bytes.Equal(hay[i:i+len(needle)], needle) {
			n++
			i += len(needle)
		} else {
			i++
		}
	}
	return n
}

// TestScanEveryChunkSize reads the same stream with every chunk size, one
// byte at a time too, so that the needle is split at every offset.
func TestScanEveryChunkSize(t *testing.T) {
	hays := [][]byte{
		[]byte("xx io_uring yy io_uringio_uring z io_urin"),
		[]byte("aaaaaaa"),
		[]byte("ababababa"),
		[]byte(""),
		[]byte("io_uring"),
	}
	needles := [][]byte{[]byte("io_uring"), []byte("aa"), []byte("aba"), []byte("a")}
	for _, hay := range hays {
		for _, needle := range needles {
			want := naive(hay, needle)
			for chunk := 1; chunk <= len(hay)+1; chunk++ {
				buf := make([]byte, len(needle)-1+chunk)
				n, m, err := scan(iotest.OneByteReader(bytes.NewReader(hay)), needle, buf, chunk)
				if err != nil || m != want || n != uint64(len(hay)) {
					t.Fatalf("%q in %q, chunk %d, one byte reads: %d matches %d bytes %v, want %d", needle, hay, chunk, m, n, err, want)
				}
				n, m, err = scan(bytes.NewReader(hay), needle, buf, chunk)
				if err != nil || m != want || n != uint64(len(hay)) {
					t.Fatalf("%q in %q, chunk %d: %d matches %d bytes %v, want %d", needle, hay, chunk, m, n, err, want)
				}
			}
		}
	}
}
