// The chat line protocol: parsing a client line into a command, with the
// exact ERR reasons and check order of docs/protocol-notes.md.

package main

import (
	"bytes"
	"unicode/utf8"
)

type cmdKind int

const (
	cmdNick cmdKind = iota + 1
	cmdJoin
	cmdLeave
	cmdSay
	cmdPing
)

// command is a parsed client line. Its slices alias the line.
type command struct {
	kind cmdKind
	// arg is the name of NICK, or the room of JOIN, LEAVE and SAY.
	arg []byte
	// since is the seq of JOIN.
	since uint64
	// text is the text of SAY or the token of PING.
	text []byte
}

// The ERR reasons, byte for byte as the conformance suite expects them.
const (
	reasonLineTooLong   = "line too long"
	reasonInvalidUTF8   = "invalid utf-8"
	reasonUnknown       = "unknown command"
	reasonArgs          = "wrong number of arguments"
	reasonBadName       = "bad name"
	reasonBadRoom       = "bad room"
	reasonBadSeq        = "bad seq"
	reasonAlreadyJoined = "already joined"
	reasonNotJoined     = "not joined"
	reasonStorage       = "storage failure"
)

// parseLine parses one line, its newline and a \r before it already removed.
// On failure it returns the ERR reason. The checks run in the documented
// order: UTF-8, command, number of arguments, then each argument left to
// right (the line length is the line reader's business).
func parseLine(line []byte) (command, string) {
	if !utf8.Valid(line) {
		return command{}, reasonInvalidUTF8
	}
	verb, rest, hasArgs := bytes.Cut(line, []byte(" "))
	// nargs counts the arguments of the fixed-arity commands: a space opens an
	// argument, even an empty one.
	nargs := 0
	if hasArgs {
		nargs = 1 + bytes.Count(rest, []byte(" "))
	}
	switch string(verb) {
	case "NICK":
		if nargs != 1 {
			return command{}, reasonArgs
		}
		if !validName(rest) {
			return command{}, reasonBadName
		}
		return command{kind: cmdNick, arg: rest}, ""
	case "JOIN":
		if nargs != 2 {
			return command{}, reasonArgs
		}
		room, since, _ := bytes.Cut(rest, []byte(" "))
		if !validName(room) {
			return command{}, reasonBadRoom
		}
		seq, ok := parseSeq(since)
		if !ok {
			return command{}, reasonBadSeq
		}
		return command{kind: cmdJoin, arg: room, since: seq}, ""
	case "LEAVE":
		if nargs != 1 {
			return command{}, reasonArgs
		}
		if !validName(rest) {
			return command{}, reasonBadRoom
		}
		return command{kind: cmdLeave, arg: rest}, ""
	case "SAY":
		// The text is the rest of the line after the room and may hold
		// spaces, or nothing at all: "SAY r " says an empty text.
		room, text, hasText := bytes.Cut(rest, []byte(" "))
		if !hasArgs || !hasText {
			return command{}, reasonArgs
		}
		if !validName(room) {
			return command{}, reasonBadRoom
		}
		return command{kind: cmdSay, arg: room, text: text}, ""
	case "PING":
		// The token is the rest of the line, at least one byte.
		if len(rest) == 0 {
			return command{}, reasonArgs
		}
		return command{kind: cmdPing, text: rest}, ""
	}
	return command{}, reasonUnknown
}

// parseSeq parses 1 to 20 ASCII digits that fit in a u64.
func parseSeq(b []byte) (uint64, bool) {
	if len(b) < 1 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (^uint64(0)-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}
