// Group commit for --fsync always: one fdatasync(2) covers every append to a
// room file since the last one. The first SAY that finds no sync running
// makes one (its goroutine is the leader, blocked in the system call while the
// Go scheduler runs everything else); SAYs that arrive meanwhile wait for the
// next, which covers them all. The rule is the Rust servers' (their
// service::commit), so that srv-go measures the same work.
//
// A failed sync fails every SAY waiting for it with ERR storage failure, and
// the room refuses later appends until a restart: after a failed fdatasync
// what is on the disk is unknown.
//
// Tests can hold a sync: with RINGSIDE_TEST_SYNC_GATE=<path> set, the leader
// creates <path>.pending before it syncs and waits (at most 60 s) for <path>
// to exist.

package main

import (
	"os"
	"sync"
	"time"
)

// syncGateEnv names a test's sync gate; nothing else reads it.
const syncGateEnv = "RINGSIDE_TEST_SYNC_GATE"

// groupCommit is the group commit of one room file. Its zero value is ready.
type groupCommit struct {
	mu   sync.Mutex
	cond sync.Cond
	// appended counts the appends handed out tickets; synced is the ticket
	// the last finished sync covers.
	appended, synced uint64
	syncing          bool
	err              error // sticky: a sync failed
}

// written takes a ticket for an append just written (the room's mutex held,
// so tickets follow file order).
func (g *groupCommit) written() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.appended++
	return g.appended
}

// failed is the error of a failed sync, if there was one.
func (g *groupCommit) failed() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// wait returns once a sync that started after ticket's append covers it.
func (g *groupCommit) wait(ticket uint64, f *os.File) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cond.L == nil {
		g.cond.L = &g.mu
	}
	for {
		switch {
		case g.err != nil:
			return g.err
		case g.synced >= ticket:
			return nil
		case !g.syncing:
			g.syncing = true
			target := g.appended
			g.mu.Unlock()
			waitAtSyncGate()
			err := fdatasync(f)
			g.mu.Lock()
			g.syncing = false
			if err != nil {
				g.err = err
			} else {
				g.synced = target
			}
			g.cond.Broadcast()
		default:
			g.cond.Wait()
		}
	}
}

// waitAtSyncGate is the test hook of the package comment.
func waitAtSyncGate() {
	gate := os.Getenv(syncGateEnv)
	if gate == "" {
		return
	}
	if f, err := os.Create(gate + ".pending"); err == nil {
		f.Close()
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(gate); err == nil {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	os.Remove(gate + ".pending")
}
