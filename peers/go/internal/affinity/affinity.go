// Package affinity reads a --cpus list and pins a Go process to it, for
// srv-go and search-go alike.
package affinity

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxCPU bounds the CPU numbers a list may name: the kernel's default
// CPU_SETSIZE.
const MaxCPU = 1024

// ParseList parses "1,3" or "0-3,6" into CPU numbers, in order, each once.
func ParseList(s string) ([]int, error) {
	var cpus []int
	seen := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a || b >= MaxCPU {
			return nil, fmt.Errorf("%q: expected CPU numbers like 1,3 or 0-3 (below %d)", s, MaxCPU)
		}
		for c := a; c <= b; c++ {
			if !seen[c] {
				seen[c] = true
				cpus = append(cpus, c)
			}
		}
	}
	return cpus, nil
}
