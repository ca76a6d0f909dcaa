#!/usr/bin/env bash
# Runs the Kubernetes Ingress conformance suite
# (kubernetes-sigs/ingress-controller-conformance) against hostgate on the
# cluster of processes of hack/conformance.sh: etcd, kube-apiserver and
# kube-controller-manager, the node agent standing in for kubelet (it runs
# the suite's echoserver for its echoserver image) and hostgate serving
# Ingresses of class "conformance" on the node address 10.244.0.1, ports
# 80 and 443, which it publishes in their status.
#
# The suite is a public repository, not a module the module proxy serves:
# it cannot run in CI, and hack/test.sh does not run it. Give a checkout:
#   hack/ingress-conformance.sh /path/to/ingress-controller-conformance [-ingress-suite-args=-tags=@sig-network]
#
# Needs root (network namespaces, veths, a bridge) and the ip command; its
# Go dependencies come through the module proxy. Logs go to
# conformance/logs/ (ingress-suite.log: the suite's per-scenario output).
set -euo pipefail
export GOTOOLCHAIN=go1.27.3

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log() { echo "ingress-conformance: $*" >&2; }

if [ $# -lt 1 ] || [ ! -f "$1/go.mod" ]; then
	log "usage: $0 CHECKOUT-OF-ingress-controller-conformance [flags of the harness]"
	exit 2
fi
suite_src=$(cd "$1" && pwd)
shift
# shellcheck source=hack/cluster-run.sh
. "$root/hack/cluster-run.sh"
cluster_run_begin hostgate-ingress-conformance hgi

start=$SECONDS
eval "$("$root/hack/kube-env.sh" --export)"
version=$(git -C "$root" describe --always --dirty 2>/dev/null || echo dev)
log "building hostgate $version, the suite and its echoserver"
(cd "$root" && go build -ldflags "-X main.version=$version" -o "$work/hostgate" .)
# The suite reads features/ from its working directory: the binary goes
# next to them.
mkdir -p "$work/suite"
cp -r "$suite_src/features" "$work/suite/"
(cd "$suite_src" && CGO_ENABLED=0 go test -c -o "$work/suite/ingress-controller-conformance" . &&
	go build -o "$work/echoserver" ./images/echoserver)
"$root/hack/conformance-images.sh"
(cd "$root/conformance" && go test -c -tags conformance -o "$work/conformance.test" .)
log "built in $((SECONDS - start))s"

mkdir -p "$root/conformance/logs" "$work/tmp"
(cd "$root/conformance" && exec env TMPDIR="$work/tmp" "$work/conformance.test" \
	-test.v -test.timeout 60m -test.run '^TestIngressConformance$' \
	-hostgate "$work/hostgate" -ingress-suite "$work/suite/ingress-controller-conformance" \
	-ingress-echo "$work/echoserver" -net-prefix "$prefix" -log-dir "$root/conformance/logs" "$@") \
	> >(
		trap '' INT TERM
		exec tee "$root/conformance/logs/ingress-suite.log"
	) 2>&1 &
test_pid=$!
status=0
wait "$test_pid" || status=$?
test_pid=
log "finished in $((SECONDS - start))s with status $status; logs in conformance/logs/"
exit "$status"
