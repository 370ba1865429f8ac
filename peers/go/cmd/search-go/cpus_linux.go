// CPU affinity for --cpus, which the standard library does not wrap.

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// cpuMask is the kernel's cpu_set_t (CPU_SETSIZE 1024).
type cpuMask [1024 / 64]uint64

// parseCPUs reads "0,2,4-7".
func parseCPUs(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(strings.TrimSpace(hi))
		}
		if err != nil || a < 0 || b < a || b >= 1024 {
			return nil, fmt.Errorf("%q is not a CPU number or range (like 0,1 or 0-3)", part)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// pinProcess restricts every thread of the process to cpus. Go starts and
// retires threads itself, so the process is pinned as a whole (as srv-go
// does): every thread listed in /proc/self/task, pass after pass until a pass
// finds none new; threads started later inherit the mask.
func pinProcess(cpus []int) error {
	var m cpuMask
	for _, c := range cpus {
		m[c/64] |= 1 << (c % 64)
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
			_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, uintptr(tid), unsafe.Sizeof(m), uintptr(unsafe.Pointer(&m)))
			if e != 0 && e != syscall.ESRCH {
				return fmt.Errorf("sched_setaffinity: %v", e)
			}
			pinned[tid] = true
		}
		if !found {
			return nil
		}
	}
	return nil
}
