package redistest

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
)

// maxRESPLen bounds array and bulk lengths, as redis-server does (512 MB), so
// a corrupt length cannot make the parser wait forever for a huge command.
const maxRESPLen = 512 << 20

var errRESP = errors.New("not a RESP command stream")

// cmdParser splits the client->server byte stream of one connection into
// commands. TCP delivers bytes, not messages: a read may end in the middle of
// a command, so the parser keeps the bytes of an incomplete command until the
// rest arrives. It is used by one goroutine only.
type cmdParser struct {
	pending []byte // start of a command not yet complete
	broken  bool   // the stream is not RESP; the proxy only forwards from now on
}

// parsedCmd is one complete command found by feed.
type parsedCmd struct {
	end  int      // offset in feed's chunk just past the command's last byte
	args []string // args[0] is the command name, upper-cased
}

// feed parses chunk, the next bytes of the stream, and returns the commands
// that are complete with it, in order. A command that began in an earlier
// chunk ends in this one, so every end is in 1..len(chunk).
func (cp *cmdParser) feed(chunk []byte) []parsedCmd {
	if cp.broken {
		return nil
	}
	base := len(cp.pending) // where chunk starts in buf
	buf := append(cp.pending, chunk...)
	var out []parsedCmd
	off := 0
	for off < len(buf) {
		args, n, err := parseCommand(buf[off:])
		if err != nil {
			// Guessing where the next command starts could mis-count and
			// mis-fire CutAfter; giving up parsing is the honest choice.
			cp.broken, cp.pending = true, nil
			return out
		}
		if n == 0 {
			break // incomplete: wait for more bytes
		}
		off += n
		if len(args) > 0 {
			args[0] = strings.ToUpper(args[0]) // command names are case-insensitive
			out = append(out, parsedCmd{end: off - base, args: args})
		}
	}
	// buf may share cp.pending's array; append copies with memmove, which
	// handles the overlap.
	cp.pending = append(cp.pending[:0], buf[off:]...)
	return out
}

// parseCommand parses the command at the start of b. It returns n == 0 if b
// holds only part of it. A command is either an array of bulk strings
// ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"), which is what go-redis sends, or an
// inline command ("PING\r\n"), which redis-cli and telnet users send.
func parseCommand(b []byte) (args []string, n int, err error) {
	if b[0] != '*' {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return nil, 0, nil
		}
		return strings.Fields(string(b[:i])), i + 1, nil
	}
	count, off, err := parseLen(b, '*')
	if err != nil || off == 0 {
		return nil, 0, err
	}
	args = make([]string, 0, min(count, 64))
	for range count {
		size, m, err := parseLen(b[off:], '$')
		if err != nil || m == 0 {
			return nil, 0, err
		}
		off += m
		if len(b) < off+size+2 {
			return nil, 0, nil
		}
		if b[off+size] != '\r' || b[off+size+1] != '\n' {
			return nil, 0, errRESP
		}
		args = append(args, string(b[off:off+size]))
		off += size + 2
	}
	return args, off, nil
}

// parseLen parses a "<prefix><decimal>\r\n" header at the start of b and
// returns the number and the header's length, or a length of 0 if the
// header is not complete yet.
func parseLen(b []byte, prefix byte) (v, n int, err error) {
	if len(b) > 0 && b[0] != prefix {
		return 0, 0, errRESP
	}
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return 0, 0, nil
	}
	if i < 2 || b[i-1] != '\r' {
		return 0, 0, errRESP
	}
	v, err = strconv.Atoi(string(b[1 : i-1]))
	if err != nil || v < 0 || v > maxRESPLen {
		return 0, 0, errRESP
	}
	return v, i + 1, nil
}

// isSubscribe reports whether name (upper-cased) puts a connection into
// pub/sub mode.
func isSubscribe(name string) bool {
	return name == "SUBSCRIBE" || name == "SSUBSCRIBE" || name == "PSUBSCRIBE"
}
