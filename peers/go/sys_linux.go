// Linux system calls the standard library does not wrap: CPU affinity for
// --cpus, and fdatasync(2) for --fsync always.

package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// maxCPU bounds the CPU numbers --cpus accepts: the kernel's default CPU_SETSIZE.
const maxCPU = 1024

// cpuMask is the kernel's cpu_set_t.
type cpuMask [maxCPU / 64]uint64

func (m *cpuMask) set(cpu int)      { m[cpu/64] |= 1 << (cpu % 64) }
func (m *cpuMask) has(cpu int) bool { return m[cpu/64]&(1<<(cpu%64)) != 0 }

// allowedCPUs returns the CPUs the process may run on now.
func allowedCPUs() (cpuMask, error) {
	var m cpuMask
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, unsafe.Sizeof(m), uintptr(unsafe.Pointer(&m)))
	if e != 0 {
		return m, e
	}
	return m, nil
}

// pinProcess restricts every thread of the process to cpus.
//
// Go multiplexes goroutines over threads it creates and retires itself, so a
// Go program cannot pin its workers one by one as the Rust servers do: the
// process as a whole is pinned to the set instead, and GOMAXPROCS (--workers)
// says how many threads run Go code at once. sched_setaffinity(2) acts on one
// thread, so this walks /proc/self/task until a pass finds no thread it has
// not pinned; threads created later inherit the mask of their creator.
func pinProcess(cpus []int) error {
	allowed, err := allowedCPUs()
	if err != nil {
		return fmt.Errorf("sched_getaffinity: %w", err)
	}
	var m cpuMask
	for _, c := range cpus {
		if !allowed.has(c) {
			return fmt.Errorf("CPU %d is not available to this process", c)
		}
		m.set(c)
	}
	pinned := map[int]bool{}
	for pass := 0; pass < 16; pass++ {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		found := false
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || pinned[tid] {
				continue
			}
			found = true
			pinned[tid] = true
			_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, uintptr(tid), unsafe.Sizeof(m), uintptr(unsafe.Pointer(&m)))
			// ESRCH: the thread exited since the listing, nothing to pin.
			if e != 0 && e != syscall.ESRCH {
				return fmt.Errorf("sched_setaffinity: %w", e)
			}
		}
		if !found {
			return nil
		}
	}
	return errors.New("threads kept appearing while pinning them")
}

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
