package h1wire

// Message bodies, streamed in both directions
// through one pooled buffer without holding a whole body.

import (
	"bufio"
	"errors"
	"io"
	"strconv"

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
		if b.KeepTrailer {
			b.Trailer = append(append(b.Trailer, line...), "\r\n"...)
		}
	}
}

// ChunkSize reads a chunk's size off its line, which ends there or goes on
// with extensions.
func ChunkSize(line []byte) (int64, bool) {
	size, n := int64(0), 0
	for ; n < len(line); n++ {
		d, ok := guard.HexDigit(line[n])
		if !ok {
			break
		}
		if n == 15 {
			return 0, false
		}
		size = size<<4 | int64(d)
	}
	if n == 0 || n < len(line) && line[n] != ';' && line[n] != ' ' && line[n] != '\t' {
		return 0, false
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
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
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
