package main

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"k8s.io/klog/v2"
)

// TestClientGoLogsFollowTheRun sends client-go's (klog's) logs to the
// logger of the latest run, with the values klog adds, while client-go
// goroutines of an earlier run keep logging (the race detector checks
// that no run writes what they read).
func TestClientGoLogsFollowTheRun(t *testing.T) {
	var first, second bytes.Buffer
	logClientGoTo(slog.New(slog.NewTextHandler(&first, nil)))
	klog.Background().WithValues("resource", "endpointslices").Info("listing")
	if got := first.String(); !strings.Contains(got, "msg=listing") || !strings.Contains(got, "component=client-go") || !strings.Contains(got, "resource=endpointslices") {
		t.Errorf("first run's log: %q, want the message with component=client-go and resource=endpointslices", got)
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				klog.Background().Info("from an earlier run's goroutine")
			}
		}
	})
	var secondMu sync.Mutex
	logClientGoTo(slog.New(slog.NewTextHandler(lockedWriter{&secondMu, &second}, nil)))
	klog.Background().Info("watching")
	close(stop)
	wg.Wait()
	secondMu.Lock()
	defer secondMu.Unlock()
	if !strings.Contains(second.String(), "msg=watching") {
		t.Errorf("second run's log %q lacks its message", second.String())
	}
	if strings.Contains(first.String(), "watching") {
		t.Error("a message logged after the second run started went to the first run's log")
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
