#!/usr/bin/env bash
# Runs the Gateway API conformance suite (sigs.k8s.io/gateway-api/conformance,
# the version conformance/go.mod requires) against hostgate, on a cluster of
# local processes and without containers: etcd, kube-apiserver and
# kube-controller-manager from hack/kube-env.sh, the node agent of
# conformance/nodeagent in place of kubelet and container runtime (one
# network namespace per Pod on a bridge with 10.244.0.1/24), and hostgate
# giving each Gateway its own address of 127.0.0.10-250. Profiles
# GATEWAY-HTTP, GATEWAY-GRPC, GATEWAY-TLS, GATEWAY-TCP and GATEWAY-UDP.
#
# Usage:
#   hack/conformance.sh                   # the whole suite; writes conformance/reports/hostgate-report.yaml
#   hack/conformance.sh -run-test NAME -supported-features Gateway,HTTPRoute
#                                         # any of the suite's flags; no report is written then
#   HOSTGATE_BIN=path hack/conformance.sh # test that binary instead of building one
#
# Needs root (network namespaces, veths, a bridge) and the ip command.
# Logs go to conformance/logs/. Everything the run starts is stopped by PID
# and every namespace and link it made is deleted when it ends, also when
# interrupted.
set -euo pipefail
# gateway-api v1.7 needs Go 1.27; machines whose go command is older (or set
# to GOTOOLCHAIN=local) fetch this toolchain through the module proxy.
export GOTOOLCHAIN=go1.27.3

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log() { echo "conformance: $*" >&2; }

# shellcheck source=hack/cluster-run.sh
. "$root/hack/cluster-run.sh"
cluster_run_begin hostgate-conformance hgc

start=$SECONDS
eval "$("$root/hack/kube-env.sh" --export)"

version=$(git -C "$root" describe --always --dirty 2>/dev/null || echo dev)
hostgate=${HOSTGATE_BIN:-}
if [ -z "$hostgate" ]; then
	log "building hostgate $version"
	hostgate=$work/hostgate
	(cd "$root" && go build -ldflags "-X main.version=$version" -o "$hostgate" .)
fi
log "building the echo server and the suite"
(cd "$root/conformance/echo" && go build -o "$work/echo-basic" sigs.k8s.io/gateway-api/conformance/echo-basic)
"$root/hack/conformance-images.sh"
(cd "$root/conformance" && go test -c -tags conformance -o "$work/conformance.test" .)
log "built in $((SECONDS - start))s"

report=()
if [ $# -eq 0 ]; then
	report=(-report "$root/conformance/reports/hostgate-report.yaml")
fi
mkdir -p "$root/conformance/logs" "$work/tmp"
# Run from the module's directory: the control plane harness finds the
# Gateway API CRDs through the go command there. TMPDIR keeps every
# temporary file of the run under $work, which cleanup removes.
# In the background, so that a signal runs the trap at once.
(cd "$root/conformance" && exec env TMPDIR="$work/tmp" "$work/conformance.test" \
	-test.v -test.timeout 80m -test.run '^TestConformance$' \
	-hostgate "$hostgate" -echo-server "$work/echo-basic" \
	-net-prefix "$prefix" -log-dir "$root/conformance/logs" \
	-hostgate-version "$version" "${report[@]}" "$@") \
	> >(
		# tee outlives a Ctrl-C, so that the runner can still report
		# while it stops everything.
		trap '' INT TERM
		exec tee "$root/conformance/logs/suite.log"
	) 2>&1 &
test_pid=$!
status=0
wait "$test_pid" || status=$?
test_pid=
log "finished in $((SECONDS - start))s with status $status; logs in conformance/logs/"
exit "$status"
