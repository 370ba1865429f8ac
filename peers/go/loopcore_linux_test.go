package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestListenBacklogIsTheSystems: the loops' listeners ask for
// net.core.somaxconn, as Go's net and gnet do.
func TestListenBacklogIsTheSystems(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/core/somaxconn")
	if err != nil {
		t.Skipf("no somaxconn to compare with: %v", err)
	}
	want, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || listenBacklog() != want {
		t.Fatalf("backlog %d, somaxconn %q", listenBacklog(), b)
	}
}
