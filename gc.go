package main

import (
	"bytes"
	"math"
	"os"
	"path"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"time"
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
// memory limit (limitMemory) still caps it.
//
// With many routes, 75% above the live heap is more room than changes
// need: at 10,000 HTTPRoutes (90 MB live) a route change allocates about
// 1 MB (its two translations, the status write and the API client's
// share), so 40 MiB is a collection every 35 changes or so. The control
// plane bench kept its change latency and start-up, and its RSS went from
// 209 to 177 MiB (docs/benchmarks.md, issue 29, tenth round). Past
// heapFloor*100/gcPercent of live heap the room stays heapFloor, until
// that is less than minGCPercent of the live heap, where collections
// would come so often that marking the heap (100-150 ms of CPU at 10,000
// routes here) took over. Under load, though, the proxy allocates far
// faster than changes do, and each collection marks the whole live heap:
// with 90 MB of it, HTTP/2 requests cost 8% more at 44% than at 75
// (BenchmarkProxyHTTP2, median of three rounds). So the room is heapFloor
// only while collections come less often than busyGCInterval, and back
// to gcPercent of the live heap when they come more often.
const (
	gcPercent      = 75
	heapFloor      = 40 << 20
	maxGCPercent   = 200
	minGCPercent   = 25
	busyGCInterval = time.Second
)

// gcPercentFor returns the GOGC after a collection that left live bytes
// and came since after the one before: below heapFloor, the percent that lets
// it grow to heapFloor (within gcPercent and maxGCPercent); from there,
// the one that lets it grow by heapFloor (within minGCPercent and
// gcPercent), or gcPercent while collections are busy.
func gcPercentFor(live uint64, since time.Duration) int {
	switch {
	case live == 0:
		return gcPercent
	case live < heapFloor:
		return min(max(int((heapFloor-live)*100/live), gcPercent), maxGCPercent)
	case since < busyGCInterval:
		return gcPercent
	default:
		return max(min(int(heapFloor*100/live), gcPercent), minGCPercent)
	}
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
	last := time.Now()
	// A cleanup runs after the collection that found its object
	// unreachable; there is no other hook at the end of a collection.
	watch = func() {
		runtime.AddCleanup(new(gcCanary), func(struct{}) {
			now := time.Now()
			metrics.Read(live)
			debug.SetGCPercent(gcPercentFor(live[0].Value.Uint64(), now.Sub(last)))
			last = now
			watch()
		}, struct{}{})
	}
	watch()
}

// Between collections the heap grows to its goal, and what the next one
// frees stays with the process for the heap to grow into again: once the
// statuses of 10,000 HTTPRoutes are written, about 40 MiB of the RSS is
// heap that nothing uses (the room paceGC leaves), and stays so for as
// long as the cluster is quiet. The runtime's scavenger returns only what
// lies above the goal. So when more than idleFreeMin of the heap is free
// and the process allocates slowly enough that the free part would last
// it idleRefillChecks checks (a minute), that part goes back to the
// system. A process that allocates faster, under load or changes, keeps
// its heap: giving it back would cost a forced collection and faulting
// the pages in again, over and over.
const (
	idleCheckInterval = 10 * time.Second
	idleRefillChecks  = 6
	idleFreeMin       = 16 << 20
)

// trimWhenIdle returns the heap's free memory to the system whenever the
// process allocates slowly (trimIfQuiet); it never returns.
func trimWhenIdle() {
	samples := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(samples)
	allocated := samples[0].Value.Uint64()
	for range time.Tick(idleCheckInterval) {
		allocated, _ = trimIfQuiet(samples, allocated)
	}
}

// trimIfQuiet returns the heap's free memory to the system if more than
// idleFreeMin is free and what was allocated since the last check (when
// the heap had allocated bytes in all) would take idleRefillChecks such
// checks to fill it, and says whether it did. It returns the bytes
// allocated in all now.
func trimIfQuiet(samples []metrics.Sample, allocated uint64) (now uint64, trimmed bool) {
	metrics.Read(samples)
	now, free := samples[0].Value.Uint64(), samples[1].Value.Uint64()
	if free <= idleFreeMin || (now-allocated)*idleRefillChecks >= free {
		return now, false
	}
	debug.FreeOSMemory()
	return now, true
}

// gcCanary is a heap object that dies in the collection after its
// allocation. The pointer keeps it out of the tiny allocator, whose
// batched objects may never be collected alone.
type gcCanary struct{ _ *gcCanary }

// memoryLimitShare is the part of the container's memory limit that the
// Go runtime is held to, unless the environment sets GOMEMLIMIT. The
// kernel counts more than the runtime does against the limit: the
// binary's pages (about 30 MiB) and socket buffers. A GOMEMLIMIT of the
// whole limit (what the manifest set) let the runtime grow to where the
// kernel kills the process before the collector works harder.
const memoryLimitShare = 0.9

// v1Unlimited is where a limit read from cgroup v1 means none: v1 has no
// "max" but the largest page multiple below 2^63, which varies with the
// page size. Nothing is limited to 4 EiB.
const v1Unlimited = 1 << 62

// limitMemory sets the Go runtime's memory limit to memoryLimitShare of
// the cgroup's, unless the environment sets GOMEMLIMIT. Without a limit
// found it sets none.
func limitMemory() {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return
	}
	if limit, ok := cgroupMemoryLimit(self, "/sys/fs/cgroup"); ok {
		debug.SetMemoryLimit(int64(float64(limit) * memoryLimitShare))
	}
}

// memoryLimit is the Go runtime's memory limit, 0 for none.
func memoryLimit() int64 {
	if limit := debug.SetMemoryLimit(-1); limit != math.MaxInt64 {
		return limit
	}
	return 0
}

// cgroupMemoryLimit returns the memory limit of the cgroup that self
// (/proc/self/cgroup) names, under root: memory.max of the unified (v2)
// hierarchy, or else memory.limit_in_bytes of the v1 memory controller,
// which nodes on older distributions still mount. A container that sees
// only its own cgroup finds it at the hierarchy's root. ok is false
// without a limit.
func cgroupMemoryLimit(self []byte, root string) (limit int64, ok bool) {
	type hierarchy struct{ controller, dir, file string }
	for _, h := range []hierarchy{{"", root, "memory.max"}, {"memory", path.Join(root, "memory"), "memory.limit_in_bytes"}} {
		dirs := []string{h.dir}
		if p, found := cgroupPath(self, h.controller); found {
			dirs = []string{path.Join(h.dir, p), h.dir}
		} else if h.controller != "" {
			continue // no v1 memory controller
		}
		for _, dir := range dirs {
			if data, err := os.ReadFile(path.Join(dir, h.file)); err == nil {
				return parseMemoryMax(data)
			}
		}
	}
	return 0, false
}

// cgroupPath is the path in /proc/self/cgroup of the v1 hierarchy of
// controller ("N:controllers:/path"), or of the unified one for ""
// ("0::/path").
func cgroupPath(self []byte, controller string) (string, bool) {
	for line := range bytes.Lines(self) {
		_, rest, ok := bytes.Cut(bytes.TrimRight(line, "\n"), []byte(":"))
		if !ok {
			continue
		}
		controllers, p, ok := bytes.Cut(rest, []byte(":"))
		if !ok || len(p) == 0 || p[0] != '/' {
			continue
		}
		if controller == "" && len(controllers) == 0 || controller != "" && slices.Contains(strings.Split(string(controllers), ","), controller) {
			return string(p), true
		}
	}
	return "", false
}

// parseMemoryMax reads a cgroup memory limit: a number of bytes, or "max"
// for none (v2); v1 says none with the largest multiple of the page size
// (9223372036854771712 on 4 KiB pages).
func parseMemoryMax(data []byte) (int64, bool) {
	n, err := strconv.ParseInt(string(bytes.TrimSpace(data)), 10, 64)
	if err != nil || n <= 0 || n >= v1Unlimited {
		return 0, false
	}
	return n, true
}
