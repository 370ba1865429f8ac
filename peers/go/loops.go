// What the loop models (eventloop, poll, gnet) serve: the same services as
// --model goroutines, as sessions (session.go).

package main

// loopService makes the sessions of cfg's protocol, and says how much output
// may wait on a connection before it is not read: 64 KiB, or --max-pending
// when smaller for kv and http (docs/protocol-notes.md). For chat it opens
// the rooms, which the caller shuts down.
func loopService(cfg config) (sessionMaker, int, *chatServer, error) {
	limit := min(cfg.maxPending, echoMaxPending)
	switch cfg.proto {
	case protoKV:
		return newKVServer(limit, cfg.kvOwner).session, limit, nil, nil
	case protoHTTP:
		return newHTTPSession, limit, nil, nil
	case protoChat:
		chat, err := openChat(cfg)
		if err != nil {
			return nil, 0, nil, err
		}
		return chat.loopSession, ownPendingLimit, chat, nil
	default:
		e := &echoServer{computeUs: cfg.computeUs, msgSize: cfg.msgSize}
		return e.session, echoMaxPending, nil, nil
	}
}
