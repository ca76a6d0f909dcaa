package l4

// A reader of the TLS ClientHello, enough of it to learn the server name,
// written for this one purpose rather than borrowed from crypto/tls: the
// bytes must go to the backend as they came, the size and time a client
// may take are ours to bound, and nothing but the record layer, the
// handshake header and the extension list is looked at (RFC 8446 sections
// 4.1.2, 5.1; RFC 6066 section 3).

import (
	"errors"
	"io"
	"strings"
)

// Limits of a ClientHello. Real ones are a few hundred bytes, up to about
// 2 KiB with post-quantum key shares; the protocol allows 16 MiB.
const (
	// MaxHelloSize bounds the handshake message, and so the records
	// read before a route is chosen.
	MaxHelloSize = 16 << 10
	// maxRecord is a TLS plaintext record's largest fragment.
	maxRecord = 16 << 10
	// maxHelloBytes bounds the bytes read for a ClientHello, record
	// headers included.
	maxHelloBytes = 2 * MaxHelloSize
)

const (
	recordHandshake  = 22
	handshakeHello   = 1
	extServerName    = 0
	serverNameHost   = 0
	recordHeaderSize = 5
)

var (
	// errMalformed is a ClientHello that does not parse: decode_error.
	errMalformed = errors.New("malformed ClientHello")
	// errNotTLS is a first record that is no handshake record.
	errNotTLS = errors.New("not a TLS handshake")
	// errTooLarge is a ClientHello past MaxHelloSize.
	errTooLarge = errors.New("ClientHello too large")
)

// readHello reads from r the records that hold the first handshake
// message, which must be a ClientHello, and returns every byte read (to
// be sent on unchanged) and the server name it asks for, lower case
// without a trailing dot ("" when it names none). It reads no byte past
// the record that completes the message.
func readHello(r io.Reader) (raw []byte, serverName string, err error) {
	var p helloParser
	raw = make([]byte, 0, 1024)
	for {
		need, serverName, err := p.parse(raw)
		if need == 0 {
			return raw, serverName, err
		}
		if raw, err = readFull(r, raw, need); err != nil {
			return raw, "", err
		}
	}
}

// helloParser finds the ClientHello in a connection's first bytes as
// they come, on a goroutine (readHello) or a relay loop, which gives it
// whatever each read brought: each record is looked at once.
type helloParser struct {
	// next is where the first record not yet taken starts, and msg the
	// handshake message reassembled from those taken.
	next int
	msg  []byte
}

// parse takes the records of raw, every byte read so far, past those it
// took before. need > 0 is how many bytes at least it needs before it can
// say more; otherwise it returns the server name, or why there is none.
// Bytes past the record that completes the message are not looked at.
func (p *helloParser) parse(raw []byte) (need int, serverName string, err error) {
	for {
		rec := raw[p.next:]
		if len(rec) < recordHeaderSize {
			return recordHeaderSize - len(rec), "", nil
		}
		if rec[0] != recordHandshake {
			return 0, "", errNotTLS
		}
		n := int(rec[3])<<8 | int(rec[4])
		if n == 0 || n > maxRecord {
			// An empty handshake fragment is not allowed (RFC 8446
			// section 5.1).
			return 0, "", errMalformed
		}
		// The second bound is on the record headers of a hello sent in
		// tiny fragments, which cost a read each.
		if len(p.msg)+n > MaxHelloSize+4 || p.next+recordHeaderSize+n > maxHelloBytes {
			return 0, "", errTooLarge
		}
		if len(rec) < recordHeaderSize+n {
			return recordHeaderSize + n - len(rec), "", nil
		}
		p.msg = append(p.msg, rec[recordHeaderSize:recordHeaderSize+n]...)
		p.next += recordHeaderSize + n
		if len(p.msg) < 4 {
			continue
		}
		if p.msg[0] != handshakeHello {
			return 0, "", errMalformed
		}
		size := int(p.msg[1])<<16 | int(p.msg[2])<<8 | int(p.msg[3])
		if size > MaxHelloSize {
			return 0, "", errTooLarge
		}
		if len(p.msg)-4 < size {
			continue
		}
		if len(p.msg)-4 > size {
			// Another message after the ClientHello before the server
			// answered: no client does that.
			return 0, "", errMalformed
		}
		serverName, err = helloServerName(p.msg[4:])
		return 0, serverName, err
	}
}

// readFull appends exactly n bytes of r to buf.
func readFull(r io.Reader, buf []byte, n int) ([]byte, error) {
	start := len(buf)
	buf = append(buf, make([]byte, n)...)
	got, err := io.ReadFull(r, buf[start:])
	buf = buf[:start+got]
	if errors.Is(err, io.ErrUnexpectedEOF) || (err == io.EOF && got == 0 && start > 0) {
		err = errMalformed
	}
	return buf, err
}

// cursor reads the fields of a ClientHello; a read past the end sets bad.
type cursor struct {
	b   []byte
	bad bool
}

func (c *cursor) bytes(n int) []byte {
	if c.bad || n > len(c.b) {
		c.bad = true
		return nil
	}
	v := c.b[:n]
	c.b = c.b[n:]
	return v
}

func (c *cursor) u8() int {
	b := c.bytes(1)
	if b == nil {
		return 0
	}
	return int(b[0])
}

func (c *cursor) u16() int {
	b := c.bytes(2)
	if b == nil {
		return 0
	}
	return int(b[0])<<8 | int(b[1])
}

// vector reads a field whose length is a prefix of lenBytes bytes.
func (c *cursor) vector(lenBytes int) cursor {
	n := c.u8()
	if lenBytes == 2 {
		n = n<<8 | c.u8()
	}
	return cursor{b: c.bytes(n), bad: c.bad}
}

// helloServerName finds the host_name of the server_name extension of a
// ClientHello body.
func helloServerName(body []byte) (string, error) {
	c := cursor{b: body}
	c.bytes(2 + 32) // legacy_version, random
	if sid := c.vector(1); len(sid.b) > 32 {
		return "", errMalformed
	}
	if suites := c.vector(2); len(suites.b) < 2 || len(suites.b)%2 != 0 {
		return "", errMalformed
	}
	if comp := c.vector(1); len(comp.b) < 1 {
		return "", errMalformed
	}
	if c.bad {
		return "", errMalformed
	}
	if len(c.b) == 0 {
		return "", nil // no extensions
	}
	exts := c.vector(2)
	if c.bad || len(c.b) != 0 {
		return "", errMalformed
	}
	name, seen := "", false
	for len(exts.b) > 0 {
		typ := exts.u16()
		data := exts.vector(2)
		if exts.bad {
			return "", errMalformed
		}
		if typ != extServerName {
			continue
		}
		if seen {
			// RFC 8446 section 4.2: one extension of a type.
			return "", errMalformed
		}
		seen = true
		list := data.vector(2)
		if data.bad || len(data.b) != 0 || len(list.b) == 0 {
			return "", errMalformed
		}
		for len(list.b) > 0 {
			typ := list.u8()
			host := list.vector(2)
			if list.bad {
				return "", errMalformed
			}
			if typ == serverNameHost && name == "" {
				var err error
				if name, err = hostName(host.b); err != nil {
					return "", err
				}
			}
		}
	}
	return name, nil
}

// hostName checks a server name as RFC 6066 sends it (ASCII, no IP
// literal is required to be refused, but no byte outside a DNS name is
// accepted) and returns it lower case without a trailing dot.
func hostName(b []byte) (string, error) {
	if len(b) == 0 || len(b) > 255 {
		return "", errMalformed
	}
	for _, ch := range b {
		switch {
		case 'a' <= ch && ch <= 'z', 'A' <= ch && ch <= 'Z', '0' <= ch && ch <= '9', ch == '-', ch == '.', ch == '_':
		default:
			return "", errMalformed
		}
	}
	return strings.TrimSuffix(strings.ToLower(string(b)), "."), nil
}
