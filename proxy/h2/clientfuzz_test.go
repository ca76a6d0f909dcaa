package h2

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// FuzzClientConn has the Transport send three requests to a backend whose
// frames are decoded from the fuzzer's bytes: answers to the streams the
// client opened, or to others, well-formed or not, with settings, window
// updates, resets, GOAWAY and pings mixed in. A backend is trusted less
// than it seems: a broken or hostile one must cost its requests, never
// the process.
//
// Besides panics, the target fails when a request or the read of its body
// does not end once the backend closes, or goroutines outlive the
// connection.
func FuzzClientConn(f *testing.F) {
	ok := func(id byte) []byte {
		// HEADERS :status 200 on the client's stream id, then DATA
		// with END_STREAM.
		return []byte{backendHeaders, id, 200 - 100, 0, backendData, id, 5, 1}
	}
	f.Add(join(ok(0), ok(1), ok(2)))
	f.Add(join([]byte{backendSettings, 3, 0, 0, 0, 1}, ok(0), ok(1), ok(2)))
	f.Add(join([]byte{backendGoAway, 1, 0}, ok(0)))
	f.Add(join([]byte{backendReset, 1, 7}, ok(0), ok(2)))
	f.Add(join([]byte{backendHeaders, 0, 3, 2}, []byte{backendContinuation, 0, 1}, []byte{backendTrailer, 0}))
	f.Add(join([]byte{backendWindow, 0, 0xff}, []byte{backendRaw, 0, 4, 0xde, 0xad, 0xbe, 0xef}))
	f.Fuzz(func(t *testing.T, program []byte) {
		if len(program) > 4<<10 {
			return
		}
		runBackendProgram(t, program)
	})
}

func join(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// The backend program's operations: a byte modulo numBackendOps, then the
// bytes the operation reads. A stream byte picks one of the streams the
// client opened, modulo their number, or stream 0 if none yet.
const (
	backendHeaders      = iota // stream, status-100, flags (1 end stream, 2 no end headers), field count
	backendData                // stream, length, end stream
	backendTrailer             // stream
	backendContinuation        // stream, end headers
	backendReset               // stream, code
	backendGoAway              // last stream byte, code
	backendSettings            // id, value (4 bytes)
	backendWindow              // stream (0xff: connection), increment byte
	backendPing                // ack
	backendPush                // stream
	backendRaw                 // type, length, bytes
	backendWait                // lets the client catch up
	numBackendOps
)

func runBackendProgram(t *testing.T, program []byte) {
	before := runtime.NumGoroutine()
	clientEnd, backendEnd := net.Pipe()
	tr := &Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return clientEnd, nil }}

	var (
		mu      sync.Mutex
		streams []uint32
	)
	backendDone := make(chan struct{})
	go func() {
		// The backend's reader: takes the client's frames, noting the
		// streams its requests open.
		defer close(backendDone)
		preface := make([]byte, len(clientPreface))
		if _, err := io.ReadFull(backendEnd, preface); err != nil {
			return
		}
		fr := http2.NewFramer(nil, backendEnd)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if h, ok := f.(*http2.HeadersFrame); ok {
				mu.Lock()
				streams = append(streams, h.StreamID)
				mu.Unlock()
			}
		}
	}()

	var requests sync.WaitGroup
	for i, method := range []string{"GET", "POST", "GET"} {
		requests.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var body io.Reader
			if method == "POST" {
				body = strings.NewReader(strings.Repeat("b", 100))
			}
			req, _ := http.NewRequestWithContext(ctx, method, "http://backend/"+string(rune('a'+i)), body)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}

	// The backend's writer runs the program.
	var out bytes.Buffer
	wfr := http2.NewFramer(&out, nil)
	wfr.AllowIllegalWrites = true
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	wfr.WriteSettings()
	pick := func(b byte) uint32 {
		mu.Lock()
		defer mu.Unlock()
		if len(streams) == 0 {
			return uint32(b)
		}
		return streams[int(b)%len(streams)]
	}
	at := 0
	next := func() byte {
		if at >= len(program) {
			at++
			return 0
		}
		at++
		return program[at-1]
	}
	fields := func(n byte, status byte) []byte {
		block.Reset()
		if status != 0xff {
			enc.WriteField(hpack.HeaderField{Name: ":status", Value: statusText(100 + int(status))})
		}
		for i := range int(n % 8) {
			enc.WriteField(hpack.HeaderField{Name: []string{"content-length", "trailer", "x-a", "content-type", "grpc-status", ":path", "Bad Name", "te"}[i], Value: "5"})
		}
		return block.Bytes()
	}
	// A program costs a bounded time: the client may be waiting for
	// what never comes, and each op may wait for its reads.
	backendEnd.SetWriteDeadline(time.Now().Add(2 * time.Second))
	for at < len(program) {
		switch next() % numBackendOps {
		case backendHeaders:
			id, status, flags, n := pick(next()), next(), next(), next()
			wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: fields(n, status), EndStream: flags&1 != 0, EndHeaders: flags&2 == 0})
		case backendData:
			id, n, end := pick(next()), next(), next()
			wfr.WriteData(id, end&1 != 0, bytes.Repeat([]byte("d"), int(n)))
		case backendTrailer:
			id := pick(next())
			wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: fields(5, 0xff), EndStream: true, EndHeaders: true})
		case backendContinuation:
			id, end := pick(next()), next()
			wfr.WriteContinuation(id, end&1 != 0, fields(2, 0xff))
		case backendReset:
			id, code := pick(next()), next()
			wfr.WriteRSTStream(id, http2.ErrCode(code%14))
		case backendGoAway:
			last, code := next(), next()
			wfr.WriteGoAway(uint32(last), http2.ErrCode(code%14), nil)
		case backendSettings:
			id := next()
			v := binary.BigEndian.Uint32([]byte{next(), next(), next(), next()})
			wfr.WriteSettings(http2.Setting{ID: http2.SettingID(id % 8), Val: v})
		case backendWindow:
			b := next()
			id := uint32(0)
			if b != 0xff {
				id = pick(b)
			}
			wfr.WriteWindowUpdate(id, uint32(next()))
		case backendPing:
			wfr.WritePing(next()&1 != 0, [8]byte{})
		case backendPush:
			id := pick(next())
			wfr.WritePushPromise(http2.PushPromiseParam{StreamID: id, PromiseID: 2, BlockFragment: fields(1, 0xff), EndHeaders: true})
		case backendRaw:
			typ, n := next(), int(next()%32)
			payload := make([]byte, n)
			for i := range payload {
				payload[i] = next()
			}
			wfr.WriteRawFrame(http2.FrameType(typ), 0, pick(next()), payload)
		case backendWait:
			time.Sleep(time.Millisecond)
		}
		if _, err := backendEnd.Write(out.Bytes()); err != nil {
			break
		}
		out.Reset()
	}
	backendEnd.Close()

	waited := make(chan struct{})
	go func() {
		requests.Wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("requests did not end after the backend closed")
	}
	<-backendDone
	tr.CloseIdleConnections()
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines outlive the connection (%d before):\n%s", n-before, before, buf[:runtime.Stack(buf, true)])
	}
}
