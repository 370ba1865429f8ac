// Tests of the group commit: every waiter hears, a burst shares syncs, a failed
// sync fails its waiters and every later one.

package main

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestGroupCommitCoversEveryWaiter(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "r.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var g groupCommit
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 64; i++ {
		ticket := g.written()
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- g.wait(ticket, f)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if g.synced != 64 || g.syncing {
		t.Fatalf("synced %d, syncing %v", g.synced, g.syncing)
	}
	// A ticket already covered returns at once, without a sync.
	if err := g.wait(1, nil); err != nil {
		t.Fatal(err)
	}
}

func TestGroupCommitFailureSticks(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "r.log"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close() // fdatasync of a closed file fails
	var g groupCommit
	if err := g.wait(g.written(), f); err == nil {
		t.Fatal("a sync of a closed file succeeded")
	}
	if g.failed() == nil || g.wait(g.written(), f) == nil {
		t.Fatal("the failure did not stick")
	}
}
