package affinity

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// cpuMask is the kernel's cpu_set_t.
type cpuMask [MaxCPU / 64]uint64

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

// PinProcess restricts every thread of the process to cpus (numbers below
// MaxCPU, as ParseList returns them).
//
// Go multiplexes goroutines over threads it creates and retires itself, so a
// Go program cannot pin its workers one by one as the Rust servers do: the
// process as a whole is pinned to the set instead, and GOMAXPROCS says how
// many threads run Go code at once. sched_setaffinity(2) acts on one thread,
// so this walks /proc/self/task until a pass finds no thread it has not
// pinned; threads created later inherit the mask of their creator.
func PinProcess(cpus []int) error {
	allowed, err := allowedCPUs()
	if err != nil {
		return fmt.Errorf("sched_getaffinity: %w", err)
	}
	var m cpuMask
	for _, c := range cpus {
		if c < 0 || c >= MaxCPU || !allowed.has(c) {
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
