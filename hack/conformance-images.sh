#!/usr/bin/env bash
# Assembles conformance/.images, the module sigs.k8s.io/gateway-api-conformance-images
# that conformance/go.mod replaces. The v1.7 suite imports three of its
# packages (echo-basic/grpcechoserver, udpechoserver, tcpserver: the gRPC
# service the suite calls and the TCP and UDP echo protocols), and the module
# proxy does not serve that module here. The same packages, unchanged, are in
# sigs.k8s.io/gateway-api/conformance v1.6.3, which conformance/echo requires
# to build the echo server: they are copied from the module cache (tests left
# out) instead of committed. Idempotent; run it before any go command in
# conformance/ (hack/conformance.sh does).
set -euo pipefail
# gateway-api v1.7 needs Go 1.27; machines whose go command is older (or set
# to GOTOOLCHAIN=local) fetch this toolchain through the module proxy.
export GOTOOLCHAIN=go1.27.3

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$root/conformance/.images
src_module=sigs.k8s.io/gateway-api/conformance

cd "$root/conformance/echo"
go mod download "$src_module"
read -r src version < <(go list -m -f '{{.Dir}} {{.Version}}' "$src_module")

tmp=$(mktemp -d "$root/conformance/.images.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/go.mod" <<MOD
// Assembled by hack/conformance-images.sh from $src_module@$version: do not edit.
module sigs.k8s.io/gateway-api-conformance-images

go 1.24
MOD
for pkg in grpcechoserver udpechoserver tcpserver; do
	mkdir -p "$tmp/echo-basic/$pkg"
	for f in "$src/echo-basic/$pkg"/*.go; do
		case $f in *_test.go) continue ;; esac
		cp "$f" "$tmp/echo-basic/$pkg/"
	done
done
chmod -R u+w "$tmp"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
