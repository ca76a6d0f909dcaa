package h1wire

// Message bodies, streamed in both directions
// through one pooled buffer without holding a whole body.

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/hostgate/hostgate/proxy/guard"
)

// BodyMode is how a body's end is known.
type BodyMode uint8

const (
	BodyNone BodyMode = iota
	BodyLength
	BodyChunked
	// bodyUntilClose is a response that ends when the backend closes.
	BodyUntilClose
)

var errChunk = errors.New("malformed chunked encoding")

// BodyReader reads a body off a connection's reader. It lives in the
// engine's connection state, so that reading a body allocates nothing.
type BodyReader struct {
	br   *bufio.Reader
	Mode BodyMode
	// left is what remains of the body (bodyLength) or of the chunk.
	Left int64
	Done bool
	// trailer holds a chunked body's trailer section as it came, kept
	// only when keepTrailer is set.
	Trailer     []byte
	KeepTrailer bool
}

func (b *BodyReader) Start(br *bufio.Reader, mode BodyMode, length int64) {
	*b = BodyReader{br: br, Mode: mode, Left: length, Trailer: b.Trailer[:0]}
	if mode == BodyNone || mode == BodyLength && length == 0 {
		b.Done = true
	}
}

func (b *BodyReader) Read(p []byte) (int, error) {
	if b.Done {
		return 0, io.EOF
	}
	switch b.Mode {
	case BodyUntilClose:
		n, err := b.br.Read(p)
		if err == io.EOF {
			b.Done = true
		}
		return n, err
	case BodyChunked:
		if b.Left == 0 {
			if err := b.nextChunk(); err != nil || b.Done {
				return 0, err
			}
		}
	}
	n, err := b.br.Read(p[:min(int64(len(p)), b.Left)])
	b.Left -= int64(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if b.Left == 0 && err == nil {
		switch b.Mode {
		case BodyLength:
			b.Done = true
		case BodyChunked:
			err = b.chunkEnd()
		}
	}
	return n, err
}

// nextChunk reads a chunk line, and after the last chunk the trailer
// section.
func (b *BodyReader) nextChunk() error {
	line, err := b.line()
	if err != nil {
		return err
	}
	size, ok := ChunkSize(line)
	if !ok {
		return errChunk
	}
	if size > 0 {
		b.Left = size
		return nil
	}
	for {
		line, err := b.line()
		if err != nil {
			return err
		}
		if len(line) == 0 {
			b.Done = true
			return nil
		}
		if !TrailerField(line) {
			return errChunk
		}
		if b.KeepTrailer {
			b.Trailer = append(append(b.Trailer, line...), "\r\n"...)
		}
	}
}

// ChunkSize reads a chunk's size off its line, which ends there or goes on
// with extensions after ';'. It takes what net/http's chunked reader takes
// (blanks at the end of the line, none before the ';') and no more: a size
// that one reader takes and another does not is how bodies are smuggled.
func ChunkSize(line []byte) (int64, bool) {
	line = bytes.TrimRight(line, " \t")
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	if len(line) == 0 || len(line) > 15 {
		return 0, false
	}
	var size int64
	for _, c := range line {
		d, ok := guard.HexDigit(c)
		if !ok {
			return 0, false
		}
		size = size<<4 | int64(d)
	}
	return size, true
}

// chunkEnd reads the line end after chunk data.
func (b *BodyReader) chunkEnd() error {
	line, err := b.line()
	if err == nil && len(line) != 0 {
		err = errChunk
	}
	return err
}

// line reads a line without its end; chunk lines are short, so a longer
// one is refused.
func (b *BodyReader) line() ([]byte, error) {
	line, err := b.br.ReadSlice('\n')
	switch {
	case err == bufio.ErrBufferFull:
		return nil, errChunk
	case err == io.EOF:
		return nil, io.ErrUnexpectedEOF
	case err != nil:
		return nil, err
	}
	if line, ok := ChunkLine(line); ok {
		return line, nil
	}
	return nil, errChunk
}

// ChunkLine is a line of chunked framing, through its LF, without its
// end; ok is false for one that ends in a bare LF, which net/http refuses
// too: the framing of a chunked body is where readers that disagree let
// requests be smuggled.
func ChunkLine(line []byte) (_ []byte, ok bool) {
	n := len(line)
	if n < 2 || line[n-2] != '\r' || line[n-1] != '\n' {
		return nil, false
	}
	return line[:n-2], true
}

// TrailerField reports whether line, of a chunked body's trailer section,
// is a field, which may be relayed as it came.
func TrailerField(line []byte) bool {
	name, value, ok := strings.Cut(string(line), ":")
	return ok && IsToken(name) && ValidValue(trimOWS(value))
}

// Relay copies a body from src to dst through buf, writing it chunked when
// chunked is set (the last chunk included, and the trailer section of a
// body read off a connection) and flushing after
// each piece when flush is set, for streams such as server-sent events.
// The end stays in dst's buffer for the caller to flush. It tells a failed
// read from a failed write, as they are answered differently.
func Relay(dst *bufio.Writer, src io.Reader, buf []byte, chunked, flush bool) (written int64, readErr, writeErr error) {
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if chunked {
				WriteChunkSize(dst, n)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return written, nil, werr
			}
			if chunked {
				dst.WriteString("\r\n")
			}
			written += int64(n)
			if flush {
				if werr := dst.Flush(); werr != nil {
					return written, nil, werr
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return written, err, nil
		}
	}
	if chunked {
		dst.WriteString("0\r\n")
		if b, ok := src.(*BodyReader); ok {
			dst.Write(b.Trailer)
		}
		dst.WriteString("\r\n")
	}
	return written, nil, nil
}

// WriteChunkSize writes the size line of a chunk of n bytes.
func WriteChunkSize(w *bufio.Writer, n int) {
	w.Write(strconv.AppendInt(w.AvailableBuffer(), int64(n), 16))
	w.WriteString("\r\n")
}
