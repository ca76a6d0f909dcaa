package proxy

// Message bodies for the HTTP/1.1 engine, streamed in both directions
// through one pooled buffer without holding a whole body.

import (
	"bufio"
	"errors"
	"io"
	"strconv"
)

// bodyMode is how a body's end is known.
type bodyMode uint8

const (
	bodyNone bodyMode = iota
	bodyLength
	bodyChunked
	// bodyUntilClose is a response that ends when the backend closes.
	bodyUntilClose
)

var errChunk = errors.New("malformed chunked encoding")

// bodyReader reads a body off a connection's reader. It lives in the
// engine's connection state, so that reading a body allocates nothing.
type bodyReader struct {
	br   *bufio.Reader
	mode bodyMode
	// left is what remains of the body (bodyLength) or of the chunk.
	left int64
	done bool
	// trailer holds a chunked body's trailer section as it came, kept
	// only when keepTrailer is set.
	trailer     []byte
	keepTrailer bool
}

func (b *bodyReader) start(br *bufio.Reader, mode bodyMode, length int64) {
	*b = bodyReader{br: br, mode: mode, left: length, trailer: b.trailer[:0]}
	if mode == bodyNone || mode == bodyLength && length == 0 {
		b.done = true
	}
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	switch b.mode {
	case bodyUntilClose:
		n, err := b.br.Read(p)
		if err == io.EOF {
			b.done = true
		}
		return n, err
	case bodyChunked:
		if b.left == 0 {
			if err := b.nextChunk(); err != nil || b.done {
				return 0, err
			}
		}
	}
	n, err := b.br.Read(p[:min(int64(len(p)), b.left)])
	b.left -= int64(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if b.left == 0 && err == nil {
		switch b.mode {
		case bodyLength:
			b.done = true
		case bodyChunked:
			err = b.chunkEnd()
		}
	}
	return n, err
}

// nextChunk reads a chunk line, and after the last chunk the trailer
// section.
func (b *bodyReader) nextChunk() error {
	line, err := b.line()
	if err != nil {
		return err
	}
	size, n := int64(0), 0
	for ; n < len(line); n++ {
		d, ok := hexDigit(line[n])
		if !ok {
			break
		}
		if n == 15 {
			return errChunk
		}
		size = size<<4 | int64(d)
	}
	if n == 0 || n < len(line) && line[n] != ';' && line[n] != ' ' && line[n] != '\t' {
		return errChunk
	}
	if size > 0 {
		b.left = size
		return nil
	}
	for {
		line, err := b.line()
		if err != nil {
			return err
		}
		if len(line) == 0 {
			b.done = true
			return nil
		}
		if b.keepTrailer {
			b.trailer = append(append(b.trailer, line...), "\r\n"...)
		}
	}
}

// chunkEnd reads the line end after chunk data.
func (b *bodyReader) chunkEnd() error {
	line, err := b.line()
	if err == nil && len(line) != 0 {
		err = errChunk
	}
	return err
}

// line reads a line without its end; chunk lines are short, so a longer
// one is refused.
func (b *bodyReader) line() ([]byte, error) {
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

// relay copies a body from src to dst through buf, writing it chunked when
// chunked is set (the last chunk included, and the trailer section of a
// body read off a connection) and flushing after
// each piece when flush is set, for streams such as server-sent events.
// The end stays in dst's buffer for the caller to flush. It tells a failed
// read from a failed write, as they are answered differently.
func relay(dst *bufio.Writer, src io.Reader, buf []byte, chunked, flush bool) (written int64, readErr, writeErr error) {
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if chunked {
				writeChunkSize(dst, n)
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
		if b, ok := src.(*bodyReader); ok {
			dst.Write(b.trailer)
		}
		dst.WriteString("\r\n")
	}
	return written, nil, nil
}

func writeChunkSize(w *bufio.Writer, n int) {
	var b [16]byte
	w.Write(strconv.AppendInt(b[:0], int64(n), 16))
	w.WriteString("\r\n")
}
