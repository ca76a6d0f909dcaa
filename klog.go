package main

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"
)

// client-go logs through klog, whose logger is a process-wide variable
// that client-go's goroutines read without synchronisation, some of them
// after their informer stopped (a List outlives its cancelled watch). So
// klog gets one handler, once, and each run points that handler at its own
// logger: setting klog's logger again while another run's goroutines read
// it is a data race.

var (
	klogOnce   sync.Once
	klogTarget atomic.Pointer[slog.Logger]
)

// logClientGoTo sends client-go's logs to log from now on.
func logClientGoTo(log *slog.Logger) {
	klogTarget.Store(log.With("component", "client-go"))
	klogOnce.Do(func() { klog.SetSlogLogger(slog.New(forwardHandler{})) })
}

// forwardHandler hands each record to the logger in klogTarget at the
// time it is logged, with the attributes and groups klog added on the way.
type forwardHandler struct {
	// derive applies klog's WithAttrs and WithGroup calls, in order.
	derive []func(slog.Handler) slog.Handler
}

func (f forwardHandler) target() slog.Handler {
	h := klogTarget.Load().Handler()
	for _, d := range f.derive {
		h = d(h)
	}
	return h
}

func (f forwardHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return klogTarget.Load().Handler().Enabled(ctx, level)
}

func (f forwardHandler) Handle(ctx context.Context, r slog.Record) error {
	return f.target().Handle(ctx, r)
}

func (f forwardHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return f.then(func(h slog.Handler) slog.Handler { return h.WithAttrs(attrs) })
}

func (f forwardHandler) WithGroup(name string) slog.Handler {
	return f.then(func(h slog.Handler) slog.Handler { return h.WithGroup(name) })
}

func (f forwardHandler) then(d func(slog.Handler) slog.Handler) slog.Handler {
	return forwardHandler{derive: append(f.derive[:len(f.derive):len(f.derive)], d)}
}
