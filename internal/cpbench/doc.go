// Package cpbench measures hostgate's control plane end to end: start-up
// time, memory and route-change latency with thousands of routes on a real
// API server (internal/kubetest), through a hostgate process built from this
// module and real HTTP requests on loopback. It holds benchmarks only; run
// them with hack/perf-controlplane.sh.
package cpbench
