package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// The collector's pace, unless the environment sets GOGC.
//
// With many routes most of the heap lives long (the informers' caches and
// the translation: about 80 MB at 10,000 HTTPRoutes), and Go's default of
// 100 lets the heap grow to twice that between collections, where the RSS
// stays: 200 MiB. gcPercent 75 kept it at 183 MiB with the route-change
// p99 as it was (64 ms over 100 changes).
//
// With few routes the live heap is small (about 12 MB under bench/run.sh's
// HTTP/2 load, most of it the requests in flight), and 75 then means a
// collection for every 9 MB allocated: 20 a second, 6% of the core. The
// heap may grow to heapFloor before a collection instead, as long as that
// is no more than maxGCPercent above the live heap: h2-tls served 3-10%
// more requests/s, grpc 5-15% (docs/benchmarks.md, "Tenth round"). The
// manifest's GOMEMLIMIT still caps it.
const (
	gcPercent    = 75
	heapFloor    = 40 << 20
	maxGCPercent = 200
)

// gcPercentFor returns the GOGC that lets a heap of live bytes grow to
// heapFloor, within gcPercent and maxGCPercent.
func gcPercentFor(live uint64) int {
	if live == 0 || live >= heapFloor {
		return gcPercent
	}
	return min(max(int((heapFloor-live)*100/live), gcPercent), maxGCPercent)
}

// paceGC sets GOGC, unless the environment does, and then again after each
// collection from the heap it left live. That happens in a cleanup, which
// may run some way into the next cycle: until it does, a heap that grew
// past the floor has a goal of up to three times (maxGCPercent) what the
// collection left live, instead of 1.75 times.
func paceGC() {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	debug.SetGCPercent(gcPercent)
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var watch func()
	// A cleanup runs after the collection that found its object
	// unreachable; there is no other hook at the end of a collection.
	watch = func() {
		runtime.AddCleanup(new(gcCanary), func(struct{}) {
			metrics.Read(live)
			debug.SetGCPercent(gcPercentFor(live[0].Value.Uint64()))
			watch()
		}, struct{}{})
	}
	watch()
}

// gcCanary is a heap object that dies in the collection after its
// allocation. The pointer keeps it out of the tiny allocator, whose
// batched objects may never be collected alone.
type gcCanary struct{ _ *gcCanary }
