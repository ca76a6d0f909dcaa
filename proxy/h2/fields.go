package h2

import (
	"errors"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Header sections are decoded here rather than by x/net's Framer
// (ReadMetaHeaders), which allocated for every section what a
// connection can keep instead: the frame it returns, the closure it
// decodes into and the variables that closure shares, and a field slice
// grown from nothing. The checks are the Framer's.

// headerBlock is one decoded header section, with the accessors of
// http2.MetaHeadersFrame. Its fields are the reader's, valid until the
// next section is read.
type headerBlock struct {
	StreamID uint32
	Fields   []hpack.HeaderField
	// Truncated says the section was past the header list limit:
	// the fields past it were dropped.
	Truncated   bool
	Priority    http2.PriorityParam
	hasPriority bool
	endStream   bool
}

func (b *headerBlock) StreamEnded() bool { return b.endStream }

func (b *headerBlock) HasPriority() bool { return b.hasPriority }

// PseudoFields are the pseudo-header fields, which come first.
func (b *headerBlock) PseudoFields() []hpack.HeaderField {
	for i, hf := range b.Fields {
		if !hf.IsPseudo() {
			return b.Fields[:i]
		}
	}
	return b.Fields
}

// RegularFields are the fields after the pseudo-header fields.
func (b *headerBlock) RegularFields() []hpack.HeaderField {
	return b.Fields[len(b.PseudoFields()):]
}

// PseudoValue is the value of pseudo-header field ":"+name, "" without.
func (b *headerBlock) PseudoValue(name string) string {
	for _, hf := range b.PseudoFields() {
		if hf.Name[1:] == name {
			return hf.Value
		}
	}
	return ""
}

// headerReader decodes the header sections of one connection.
type headerReader struct {
	dec   *hpack.Decoder
	max   uint32
	block headerBlock
	// State of the section being decoded.
	headersLeft, trailersLeft uint32
	sawRegular                bool
	invalid                   error
	// empty bounds fragments without bytes that do not end their
	// section, which the header limit cannot: the server's, nil on the
	// client side.
	empty *emptyBudget
}

func newHeaderReader(maxHeaderList uint32) *headerReader {
	r := &headerReader{dec: hpack.NewDecoder(4096, nil), max: maxHeaderList}
	r.dec.SetEmitFunc(r.emit)
	r.dec.SetMaxStringLength(int(min(maxHeaderList, 1<<31-1)))
	return r
}

var (
	errPseudoAfterRegular = errors.New("pseudo-header field after a regular one")
	errInvalidField       = errors.New("invalid header field name or value")
	errPseudoFields       = errors.New("invalid, repeated or mixed pseudo-header fields")
)

func (r *headerReader) emit(hf hpack.HeaderField) {
	if !httpguts.ValidHeaderFieldValue(hf.Value) {
		r.invalid = errInvalidField
	}
	if strings.HasPrefix(hf.Name, ":") {
		if r.sawRegular {
			r.invalid = errPseudoAfterRegular
		}
	} else {
		r.sawRegular = true
		if !validWireName(hf.Name) {
			r.invalid = errInvalidField
		}
	}
	if r.invalid != nil {
		r.dec.SetEmitEnabled(false)
		return
	}
	left, size := &r.headersLeft, hf.Size()
	if hf.Name == "trailer" {
		// Each name it announces will take a field of the trailer.
		left = &r.trailersLeft
		n := uint32(strings.Count(hf.Value, ",") + 1)
		size = uint32(len(hf.Value)) - n + 1 + n*hpack.HeaderField{}.Size()
	}
	if size > *left {
		r.dec.SetEmitEnabled(false)
		r.block.Truncated = true
		r.headersLeft, r.trailersLeft = 0, 0
		return
	}
	*left -= size
	r.block.Fields = append(r.block.Fields, hf)
}

// read decodes the header section hf starts, reading its CONTINUATION
// frames from fr (the Framer ensures nothing else comes between them).
func (r *headerReader) read(fr *http2.Framer, hf *http2.HeadersFrame) (*headerBlock, error) {
	b := &r.block
	*b = headerBlock{
		StreamID:    hf.StreamID,
		Fields:      b.Fields[:0],
		Priority:    hf.Priority,
		hasPriority: hf.HasPriority(),
		endStream:   hf.StreamEnded(),
	}
	r.headersLeft, r.trailersLeft = r.max, r.max
	r.sawRegular, r.invalid = false, nil
	r.dec.SetEmitEnabled(true)
	frag, ended := hf.HeaderBlockFragment(), hf.HeadersEnded()
	for {
		// A section far past the limit, or going on after an invalid
		// field, is not decoded: the connection ends.
		if int64(len(frag)) > 2*int64(r.headersLeft+r.trailersLeft) || r.invalid != nil {
			return nil, http2.ConnectionError(http2.ErrCodeProtocol)
		}
		if len(frag) == 0 && !ended && !r.empty.spend() {
			return nil, errEmptyFlood
		}
		if _, err := r.dec.Write(frag); err != nil {
			return nil, http2.ConnectionError(http2.ErrCodeCompression)
		}
		if ended {
			break
		}
		f, err := fr.ReadFrame()
		if err != nil {
			return nil, err
		}
		cf := f.(*http2.ContinuationFrame)
		frag, ended = cf.HeaderBlockFragment(), cf.HeadersEnded()
	}
	if err := r.dec.Close(); err != nil {
		return nil, http2.ConnectionError(http2.ErrCodeCompression)
	}
	if r.invalid == nil && !validPseudoFields(b.PseudoFields()) {
		r.invalid = errPseudoFields
	}
	if r.invalid != nil {
		return nil, http2.StreamError{StreamID: b.StreamID, Code: http2.ErrCodeProtocol, Cause: r.invalid}
	}
	return b, nil
}

// validPseudoFields reports whether pseudo-header fields are known, none
// repeated, and of a request or a response, not both.
func validPseudoFields(pf []hpack.HeaderField) bool {
	var request, response bool
	for i, hf := range pf {
		switch hf.Name {
		case ":method", ":path", ":scheme", ":authority", ":protocol":
			request = true
		case ":status":
			response = true
		default:
			return false
		}
		for _, prior := range pf[:i] {
			if prior.Name == hf.Name {
				return false
			}
		}
	}
	return !(request && response)
}

// validWireName reports whether a field name is a token in lower case, as
// HTTP/2 requires (RFC 9113 section 8.2.1).
func validWireName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if !httpguts.IsTokenRune(r) || 'A' <= r && r <= 'Z' {
			return false
		}
	}
	return true
}
