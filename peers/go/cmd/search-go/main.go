// Command search-go is ringside's Go peer for the file-content search of the
// io_uring paper (its Figure 9): goroutines walk the tree, read every regular
// file in --chunk byte reads and count the needle, with the command line and
// the JSON line of the Rust programs (crates/search):
//
//	search-go --needle STR [--workers N] [--cpus LIST] [--chunk BYTES] DIR...
//
// A goroutine per directory lists it (unsorted, types from the listing, so no
// symbolic link is followed) and sends its regular files to 64 reader
// goroutines per worker; --workers sets GOMAXPROCS. Files are opened with
// O_NOFOLLOW|O_NONBLOCK so that an entry swapped for a link or a FIFO after
// the listing is not followed and does not block.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"ringside/srv-go/internal/affinity"
)

// filesInFlightPerWorker is search::walk::FILES_IN_FLIGHT_PER_WORKER.
const filesInFlightPerWorker = 64

type summary struct {
	Files        uint64  `json:"files"`
	Bytes        uint64  `json:"bytes"`
	FilesMatched uint64  `json:"files_matched"`
	Matches      uint64  `json:"matches"`
	Errors       uint64  `json:"errors"`
	Seconds      float64 `json:"seconds"`
}

type tally struct {
	files, bytes, filesMatched, matches, errors atomic.Uint64
}

func (t *tally) fail(path, what string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %s: %v\n", path, what, err)
	t.errors.Add(1)
}

// scan counts needle in r read in chunk-byte reads. The carry, the tail of
// the stream after the last match that is shorter than the needle, is kept
// at the front of buf and the next read lands right after it, so that a match
// across a read boundary is found by one search of carry+chunk.
func scan(r io.Reader, needle, buf []byte, chunk int) (nbytes, matches uint64, err error) {
	keep := len(needle) - 1
	carry := 0
	for {
		n, rerr := r.Read(buf[carry : carry+chunk])
		if n > 0 {
			nbytes += uint64(n)
			region := buf[:carry+n]
			end := 0
			for {
				i := bytes.Index(region[end:], needle)
				if i < 0 {
					break
				}
				matches++
				end += i + len(needle)
			}
			start := max(end, len(region)-keep)
			carry = copy(buf, region[start:])
		}
		if rerr == io.EOF {
			return nbytes, matches, nil
		}
		if rerr != nil {
			return nbytes, matches, rerr
		}
	}
}

type search struct {
	needle []byte
	chunk  int
	files  chan string
	dirs   sync.WaitGroup
	t      tally
}

func (s *search) walk(dir string) {
	defer s.dirs.Done()
	f, err := os.Open(dir)
	if err != nil {
		s.t.fail(dir, "cannot list", err)
		return
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		s.t.fail(dir, "cannot list", err)
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		switch t := e.Type(); {
		case t.IsDir():
			s.dirs.Add(1)
			go s.walk(path)
		case t.IsRegular():
			s.files <- path
		}
	}
}

func (s *search) read(path string, buf []byte) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		s.t.fail(path, "cannot open", err)
		return
	}
	defer f.Close()
	n, m, err := scan(f, s.needle, buf, s.chunk)
	if err != nil {
		s.t.fail(path, "cannot read", err)
		return
	}
	s.t.files.Add(1)
	s.t.bytes.Add(n)
	if m > 0 {
		s.t.filesMatched.Add(1)
		s.t.matches.Add(m)
	}
}

func usage(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "search-go: "+format+"\n", args...)
	os.Exit(2)
}

func main() {
	fl := flag.NewFlagSet("search-go", flag.ContinueOnError)
	needle := fl.String("needle", "", "the byte string to count (not empty)")
	workers := fl.Int("workers", 0, "GOMAXPROCS [default: one per --cpus entry, else the CPUs available]")
	cpus := fl.String("cpus", "", "CPUs to pin the process to (0,1 or 0-3)")
	chunk := fl.Int("chunk", 4096, "bytes per read")
	if err := fl.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *needle == "" {
		usage("--needle must not be empty")
	}
	if *chunk < 1 || *chunk > 64<<20 {
		usage("--chunk must be 1 to %d bytes", 64<<20)
	}
	if fl.NArg() == 0 {
		usage("give at least one DIR")
	}
	n := runtime.NumCPU()
	if *cpus != "" {
		list, err := affinity.ParseList(*cpus)
		if err != nil {
			usage("--cpus: %v", err)
		}
		if err := affinity.PinProcess(list); err != nil {
			usage("--cpus: %v", err)
		}
		n = len(list)
	}
	if *workers < 0 || *workers > 4096 {
		usage("--workers must be 1 to 4096")
	} else if *workers > 0 {
		n = *workers
	}
	runtime.GOMAXPROCS(n)
	for _, root := range fl.Args() {
		if _, err := os.Stat(root); err != nil {
			usage("%v", err)
		}
	}

	s := &search{needle: []byte(*needle), chunk: *chunk, files: make(chan string, filesInFlightPerWorker*n)}
	start := time.Now()
	var readers sync.WaitGroup
	for i := 0; i < filesInFlightPerWorker*n; i++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			buf := make([]byte, len(s.needle)-1+s.chunk)
			for path := range s.files {
				s.read(path, buf)
			}
		}()
	}
	for _, root := range fl.Args() {
		// A root is followed if it is a link, as ripgrep does.
		info, err := os.Stat(root)
		switch {
		case err != nil:
			s.t.fail(root, "cannot stat", err)
		case info.IsDir():
			s.dirs.Add(1)
			go s.walk(root)
		case info.Mode().IsRegular():
			s.files <- root
		}
	}
	s.dirs.Wait()
	close(s.files)
	readers.Wait()
	out, _ := json.Marshal(summary{
		Files:        s.t.files.Load(),
		Bytes:        s.t.bytes.Load(),
		FilesMatched: s.t.filesMatched.Load(),
		Matches:      s.t.matches.Load(),
		Errors:       s.t.errors.Load(),
		Seconds:      time.Since(start).Seconds(),
	})
	fmt.Println(string(out))
}
