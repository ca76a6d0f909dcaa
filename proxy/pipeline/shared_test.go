package pipeline

import (
	"log/slog"
	"testing"
)

// newShared is a request path with the zero Config but a silent logger.
func newShared(t testing.TB) *Shared {
	t.Helper()
	s, err := New(Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
