//go:build !linux

package affinity

import "errors"

// PinProcess is refused where ringside does not run its benchmarks.
func PinProcess([]int) error {
	return errors.New("pinning to CPUs is only supported on Linux")
}
