//go:build race

package h2

// The race detector's instrumentation changes frame sizes and so what the
// collector does with goroutine stacks.
func init() { raceEnabled = true }
