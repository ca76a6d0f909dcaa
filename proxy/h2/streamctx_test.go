package h2

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestStreamContext has a stream's context end as context.WithCancel's
// did: its Done closes and Err says Canceled when the stream ends, the
// contexts and AfterFuncs made from it hear of it (but not a stopped
// one), and a connection whose context ends ends its streams' contexts,
// those started afterwards included.
func TestStreamContext(t *testing.T) {
	type key struct{}
	parent, cancelParent := context.WithCancelCause(context.WithValue(context.Background(), key{}, "v"))
	defer cancelParent(nil)
	sn, cn := net.Pipe()
	defer cn.Close()
	defer sn.Close()
	c := newConn(&Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}, sn, ConnOpts{Context: parent})
	st := c.newStream(1)
	ctx := context.Context(&st.ctx)
	if ctx.Value(key{}) != "v" || ctx.Err() != nil {
		t.Fatalf("new stream: value %v, err %v; want the parent's value and no error", ctx.Value(key{}), ctx.Err())
	}
	child, cancelChild := context.WithTimeout(ctx, time.Minute)
	defer cancelChild()
	ran := make(chan struct{})
	context.AfterFunc(ctx, func() { close(ran) })
	stopped := false
	stop := context.AfterFunc(ctx, func() { stopped = true })
	if !stop() {
		t.Fatal("stop of a pending AfterFunc reported false")
	}
	done := ctx.Done()
	st.ctx.cancel(context.Canceled)
	st.ctx.cancel(errors.New("second"))
	for _, ch := range []<-chan struct{}{done, ctx.Done(), child.Done(), ran} {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("not done after the stream's end")
		}
	}
	if ctx.Err() != context.Canceled || context.Cause(ctx) != context.Canceled || child.Err() != context.Canceled || stopped {
		t.Fatalf("ended: err %v, cause %v, child's err %v, stopped AfterFunc ran %v; want Canceled thrice, false", ctx.Err(), context.Cause(ctx), child.Err(), stopped)
	}
	late := make(chan struct{})
	context.AfterFunc(ctx, func() { close(late) })
	<-late

	// The connection's context ends: the streams under way end with it,
	// and so does one that starts after.
	go c.serve(false)
	running := c.newStream(3)
	c.mu.Lock()
	c.streams[3] = running
	c.mu.Unlock()
	cancelParent(errors.New("listener gone"))
	select {
	case <-running.ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a running stream's context outlived its connection's")
	}
	started := c.newStream(5)
	started.req = httptest.NewRequestWithContext(&started.ctx, "GET", "/", nil)
	c.startStream(started)
	if started.ctx.Err() != context.Canceled || running.ctx.Err() != context.Canceled {
		t.Fatalf("after the connection's context ended: %v, %v; want Canceled", running.ctx.Err(), started.ctx.Err())
	}
}
