#!/usr/bin/env bash
# Prepares the real control plane that hostgate's tests run against
# (internal/kubetest): etcd, kube-apiserver and kube-controller-manager built
# from source with the go command through the tools module in hack/kube.
# Prebuilt downloads are deliberately not used: they are unreachable on the
# machines this project is built on, and a source build needs only Go.
#
# Idempotent: binaries already in the cache at the pinned versions are reused.
#
# Usage:
#   HOSTGATE_KUBE_BIN=$(hack/kube-env.sh)   # the last line of stdout is the directory
#   eval "$(hack/kube-env.sh --export)"      # or: export HOSTGATE_KUBE_BIN=...
#
# The directory holds etcd, kube-apiserver and kube-controller-manager.
# Progress goes to stderr. The cache is
# ${HOSTGATE_KUBE_CACHE:-$HOME/.cache/hostgate/kube/v1.36.3}.
set -euo pipefail
# gateway-api v1.7 needs Go 1.27; machines whose go command is older (or set
# to GOTOOLCHAIN=local) fetch this toolchain through the module proxy.
export GOTOOLCHAIN=go1.27.3

kube_version=v1.36.3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${HOSTGATE_KUBE_CACHE:-$HOME/.cache/hostgate/kube/$kube_version}

export_mode=false
case "${1:-}" in
"") ;;
--export) export_mode=true ;;
*)
	echo "usage: $0 [--export]" >&2
	exit 2
	;;
esac

log() { echo "kube-env: $*" >&2; }

# etcd_version is the etcd the tools module pins: the release of the etcd
# client Kubernetes v1.36.3 is built with. Kubernetes v1.36 needs etcd 3.5 or
# newer; with 3.4 the API server also turns off the streaming lists
# (WatchList) that client-go's informers use on a real cluster.
etcd_version=3.6.8

# build_etcd builds etcd's server command (package main of
# go.etcd.io/etcd/server/v3) unless the cache holds that version.
build_etcd() {
	if [ -x "$cache/etcd" ] && "$cache/etcd" --version 2>/dev/null | grep -qxF "etcd Version: $etcd_version"; then
		log "etcd $etcd_version already built in $cache"
		return
	fi
	log "building etcd $etcd_version"
	local start=$SECONDS tmp="$cache/.etcd.$$"
	(cd "$here/kube" && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" \
		-o "$tmp" go.etcd.io/etcd/server/v3)
	# A link to Debian's etcd, which the cache held before, is replaced.
	mv -f -T "$tmp" "$cache/etcd"
	log "built etcd in $((SECONDS - start))s"
}

# built reports whether $1 is a binary of the pinned version, so that a
# binary left from another version or a broken build is rebuilt.
built() {
	[ -x "$1" ] && "$1" --version 2>/dev/null | grep -qF "Kubernetes $kube_version"
}

# build_kube builds one command of k8s.io/kubernetes with the version stamped
# the way Kubernetes' own build does, so that /version reports v1.36.3.
# CGO is off as in Kubernetes' release builds: no C toolchain is needed.
build_kube() {
	local cmd=$1
	if built "$cache/$cmd"; then
		log "$cmd $kube_version already built in $cache"
		return
	fi
	local ldflags="-s -w" pkg
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X $pkg.gitMajor=1 -X $pkg.gitMinor=36"
		ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitTreeState=clean"
	done
	log "building $cmd $kube_version (a few minutes on a cold cache)"
	local start=$SECONDS
	# Build next to the target and rename, so that an interrupted build never
	# leaves a binary that looks complete and concurrent runs do not write
	# the same file. GOWORK=off: the tools module stands alone.
	local tmp="$cache/.$cmd.$$"
	(cd "$here/kube" && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" \
		-o "$tmp" "k8s.io/kubernetes/cmd/$cmd")
	mv -f "$tmp" "$cache/$cmd"
	log "built $cmd in $((SECONDS - start))s"
}

mkdir -p "$cache"
build_etcd
# kube-apiserver first: most of kube-controller-manager's packages are shared
# with it, so the second build is mostly linking.
build_kube kube-apiserver
build_kube kube-controller-manager

if $export_mode; then
	printf 'export HOSTGATE_KUBE_BIN=%q\n' "$cache"
else
	echo "$cache"
fi
