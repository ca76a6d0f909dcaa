package upstream

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestStaleAfterCheckPassed: a watched exchange leaves its client check
// armed in the pool; once it passes, Stale() (raw.Read with an expired
// read deadline) says the healthy, idle connection is closed.
func TestStaleAfterCheckPassed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 1)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	p := NewPool(time.Second, 1, time.Minute)
	defer p.Close()
	addr := ln.Addr().String()
	uc, _, err := p.Get(addr, time.Time{}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	uc.WatchClient(stayingClient{}, time.Time{})
	if _, err := uc.Write([]byte{'x'}); err != nil {
		t.Fatal(err)
	}
	if _, err := uc.Reader.ReadByte(); err != nil {
		t.Fatal(err)
	}
	p.Put(addr, uc)
	time.Sleep(clientCheckInterval + 100*time.Millisecond)
	uc, reused, err := p.Get(addr, time.Time{}, 0, false)
	if err != nil || !reused {
		t.Fatal(err, reused)
	}
	defer uc.Close()
	if uc.Stale() {
		t.Fatalf("healthy pooled connection reported stale (SocketState %v) once the kept client check passed", SocketState(uc.Conn))
	}
}
