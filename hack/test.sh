#!/usr/bin/env bash
# Runs every test of hostgate, the same way on a laptop and in CI:
# formatting and vet, the race-enabled test suite (including the tests that
# drive a real kube-apiserver, built from source by hack/kube-env.sh), then
# each fuzz target for a bounded time, then (as root) the Gateway API
# conformance suite.
#
#   FUZZTIME=10s hack/test.sh     # shorter fuzzing (default 20s per target)
set -euo pipefail
# gateway-api v1.7 needs Go 1.27; machines whose go command is older (or set
# to GOTOOLCHAIN=local) fetch this toolchain through the module proxy.
export GOTOOLCHAIN=go1.27.3
cd "$(dirname "$0")/.."

fuzztime=${FUZZTIME:-20s}
log() { echo "== $*" >&2; }

# Debian packages the tests use as real peers. Installed only when missing.
need_packages=()
command -v curl >/dev/null || need_packages+=(curl)
command -v ip >/dev/null || need_packages+=(iproute2)
if [ ${#need_packages[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		log "installing ${need_packages[*]}"
		apt-get update -qq >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_packages[@]}" >&2
	else
		log "missing ${need_packages[*]}: tests that need them will skip (CI installs them)"
	fi
fi

log "real control plane (etcd, kube-apiserver)"
eval "$(hack/kube-env.sh --export)"

# h2spec, the HTTP/2 conformance checker proxy.TestH2Spec runs, built with
# the go command from the tools module in hack/h2spec, which pins it and its
# dependencies. Cached by version; GOWORK=off: the tools module stands alone.
h2spec_version=v2.2.1
h2spec_cache=${HOSTGATE_H2SPEC_CACHE:-$HOME/.cache/hostgate/h2spec/$h2spec_version}
if [ ! -x "$h2spec_cache/h2spec" ]; then
	log "building h2spec $h2spec_version"
	mkdir -p "$h2spec_cache"
	(cd hack/h2spec && GOWORK=off CGO_ENABLED=0 go build -trimpath -o "$h2spec_cache/.h2spec.$$" github.com/summerwind/h2spec/cmd/h2spec)
	mv -f "$h2spec_cache/.h2spec.$$" "$h2spec_cache/h2spec"
fi
export HOSTGATE_H2SPEC=$h2spec_cache/h2spec

log "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './hack/kube/*'))
if [ -n "$unformatted" ]; then
	echo "not gofmt-formatted:" >&2
	echo "$unformatted" >&2
	exit 1
fi

log "go vet"
go vet ./...
# The conformance module (the suite's runner and the node agent) is a module
# of its own, outside ./...; its unit tests need no root.
hack/conformance-images.sh
(cd conformance && go vet -tags conformance ./... && go test -race -count=1 ./nodeagent/)

log "go test -race"
go test -race -count=1 -timeout 30m ./...

# The proxy's tests once more on net/http alone, the --http1-engine=stdlib
# and --http2-engine=stdlib escape hatches, which must keep working; then
# on net/http's HTTP/2 server beside hostgate's HTTP/1.1 engine, the
# combination --http2-engine=stdlib gives by itself.
log "go test -race ./proxy/ with the stdlib HTTP/1.1 and HTTP/2 engines"
HOSTGATE_TEST_HTTP1_ENGINE=stdlib HOSTGATE_TEST_HTTP2_ENGINE=stdlib go test -race -count=1 -timeout 10m ./proxy/
log "go test -race ./proxy/ with the stdlib HTTP/2 engine"
HOSTGATE_TEST_HTTP2_ENGINE=stdlib go test -race -count=1 -timeout 10m ./proxy/
# And on the netpoll engine alone (--http1-engine=native), the fallback
# and the default off Linux: the runs above serve plain HTTP on the
# readiness loop, the default on Linux, which hands only part of the
# traffic to it.
log "go test -race ./proxy/ with the native (netpoll) HTTP/1.1 engine"
HOSTGATE_TEST_HTTP1_ENGINE=native go test -race -count=1 -timeout 10m ./proxy/

# Every Fuzz function runs on its own: go test accepts one -fuzz target per
# package per run.
log "fuzzing, $fuzztime per target"
grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r file; do
	pkg=./$(dirname "${file#./}")
	for target in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //'); do
		log "fuzz $pkg $target"
		fuzz_log=$(mktemp)
		# Go minimizes every new interesting input for up to 60 s by
		# default: FuzzReadHello, whose inputs are whole ClientHellos,
		# spent its 20 s minimizing and ran its target 28 times. A
		# second bounds that; a failing input still comes out smaller.
		if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 1s "$pkg" 2>&1 | tee "$fuzz_log"; then
			# Go's fuzz coordinator can report its own -fuzztime deadline
			# as a failure when a loaded machine delays a worker
			# (golang/go#75804, fixed in Go 1.27). That failure writes no
			# input; anything else, or a written input, is a finding.
			if grep -q 'Failing input written to' "$fuzz_log" || ! grep -qx '[[:space:]]*context deadline exceeded' "$fuzz_log"; then
				rm -f "$fuzz_log"
				exit 1
			fi
			log "fuzz $target: the coordinator's deadline race (golang/go#75804), no failing input; replaying the corpus"
			go test -count=1 -run "^${target}\$" "$pkg"
		fi
		rm -f "$fuzz_log"
	done
done

# The Gateway API conformance suite needs root (network namespaces for the
# pods of its backends). CI runs as root and must run it; elsewhere it is
# skipped with a note.
if [ "$(id -u)" = 0 ]; then
	log "Gateway API conformance"
	hack/conformance.sh
elif [ -n "${CI:-}" ]; then
	log "CI must run the conformance suite, which needs root"
	exit 1
else
	log "skipping the Gateway API conformance suite: it needs root (sudo hack/conformance.sh)"
fi
