//go:build !linux

// The loop models are written for Linux (epoll, eventfd, SO_REUSEPORT).

package main

import (
	"fmt"
	"os"
)

func runLoops(cfg config, _ <-chan os.Signal) int {
	return fail(fmt.Errorf("--model %s runs on Linux only", modelNames[cfg.model]))
}
