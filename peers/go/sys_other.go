//go:build !linux

// Fallbacks for systems other than Linux, where ringside does not run its
// benchmarks: --cpus is refused and --fsync always uses fsync.

package main

import (
	"errors"
	"os"
)

const maxCPU = 1024

func pinProcess([]int) error {
	return errors.New("pinning to CPUs is only supported on Linux")
}

func fdatasync(f *os.File) error { return f.Sync() }
