// Starting the loop models on Linux.

package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// runLoops serves with cfg's loop model until a signal.
func runLoops(cfg config, sigs <-chan os.Signal) int {
	if cfg.model == modelGnet {
		return runGnet(cfg, sigs)
	}
	// Listen before touching --data, so that a port in use leaves the room
	// logs exactly as they were.
	lfds, addr, err := reusePortListeners(cfg.addr, cfg.workers)
	if err != nil {
		return fail(fmt.Errorf("cannot listen on %s: %w", cfg.addr, err))
	}
	closeAll := func() {
		for _, fd := range lfds {
			unix.Close(fd)
		}
	}
	maker, limit, chat, err := loopService(cfg)
	if err != nil {
		closeAll()
		return fail(err)
	}
	start := startEventLoops
	if cfg.model == modelPoll {
		start = startPollLoops
	}
	if err == nil {
		err = start(lfds, cfg.cpus, maker, limit)
	}
	if err == nil {
		err = ready(addr)
	}
	if err != nil {
		closeAll()
		if chat != nil {
			chat.shutdown()
		}
		return fail(err)
	}
	<-sigs
	// The listeners stay open until the exit: a loop may be in accept.
	return stop(chat)
}
