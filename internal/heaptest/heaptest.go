// Package heaptest measures the live heap for benchmarks that report what
// a structure keeps (live bytes per route, per object, per set). It is
// for tests only.
package heaptest

import "runtime"

// Live returns the bytes of the heap that a collection, run first, left
// live.
func Live() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
