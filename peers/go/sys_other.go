//go:build !linux

// Fallbacks for systems other than Linux, where ringside does not run its
// benchmarks: --fsync always uses fsync.

package main

import "os"

func fdatasync(f *os.File) error { return f.Sync() }
