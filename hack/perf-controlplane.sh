#!/usr/bin/env bash
# Measures hostgate's control plane with 1,000 and 10,000 HTTPRoutes and
# 10,000 Ingresses (1,000 with TLS) on a real API server: start-up time,
# RSS, p50/p99 of route-change and EndpointSlice-change latency (API
# write to first correct response through the proxy), and how long after
# a burst of 1,000 new HTTPRoutes every one serves. See
# internal/cpbench. Takes 10-20 minutes; prints the benchmark lines.
#
# Usage:
#   hack/perf-controlplane.sh                 # 100 changes per scenario
#   CPBENCH_CHANGES=200 hack/perf-controlplane.sh
#   hack/perf-controlplane.sh -bench 'ControlPlane/httproutes=10000'   # one scenario
#   CPBENCH_LARGE=1 hack/perf-controlplane.sh -bench 'ControlPlane/httproutes=50000' -timeout 120m   # 50,000 HTTPRoutes (skipped without CPBENCH_LARGE; creating 40,000 more Services took over 25 minutes on a loaded 2-CPU machine)
#   CPBENCH_HEAP_PROFILE=/tmp/heap.pb.gz hack/perf-controlplane.sh    # hostgate's heap once settled, per scenario
#   CPBENCH_CPU_PROFILE=/tmp/cpu.pb.gz hack/perf-controlplane.sh      # hostgate's CPU during each kind of change
#   CPBENCH_LOG_DIR=/tmp GODEBUG=gctrace=1 hack/perf-controlplane.sh    # keep hostgate's log (here with the GC's lines)
#   CPBENCH_ALLOC_PROFILE=/tmp/allocs.pb.gz hack/perf-controlplane.sh # what hostgate allocates during each kind of change
#   CPBENCH_TRACE=/tmp/trace.out hack/perf-controlplane.sh             # hostgate's execution trace during each kind of change (go tool trace)
set -euo pipefail
# gateway-api v1.7 needs Go 1.27; machines whose go command is older (or set
# to GOTOOLCHAIN=local) fetch this toolchain through the module proxy.
export GOTOOLCHAIN=go1.27.3
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
eval "$("$root/hack/kube-env.sh" --export)"
cd "$root"
exec go test ./internal/cpbench/ -run '^$' -bench BenchmarkControlPlane -benchtime 1x -timeout 60m -v "$@"
