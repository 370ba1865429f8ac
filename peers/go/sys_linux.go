// A Linux system call the standard library does not wrap: fdatasync(2) for
// --fsync always (CPU affinity for --cpus is in internal/affinity).

package main

import (
	"os"
	"syscall"
)

// fdatasync is fdatasync(2) on f, run through the file's raw handle so that f
// keeps its runtime state.
func fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return serr
}
