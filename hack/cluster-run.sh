# Sourced by hack/conformance.sh and hack/ingress-conformance.sh, which run
# a suite on the cluster of processes: the checks, the machine-wide lock,
# the work folder and the cleanup they share. The caller defines log and
# sets test_pid to its runner's PID once started.
#
#   cluster_run_begin NAME PREFIX
#
# NAME names the work folder (mktemp); PREFIX starts the names of this
# run's network namespaces and links, so that cleanup finds its own
# leftovers and nothing else. Sets work and prefix.

cluster_run_begin() {
	if [ "$(id -u)" != 0 ]; then
		log "needs root: it creates network namespaces, veth pairs and a bridge"
		exit 1
	fi
	if ! command -v ip >/dev/null; then
		log "needs the ip command (iproute2)"
		exit 1
	fi
	# One run at a time on a machine: runs share the pod range, the
	# address pool and the ports of the suites' Gateways and Ingresses. A
	# second run waits its turn.
	local lock=${TMPDIR:-/tmp}/hostgate-conformance.lock
	exec 9>>"$lock"
	if ! flock -n 9; then
		log "waiting for the other run on this machine ($lock)"
		flock 9
	fi
	if ip -4 addr show | grep -q 'inet 10\.244\.0\.'; then
		log "10.244.0.0/24 is already in use on this host (another run?)"
		exit 1
	fi
	work=$(mktemp -d -t "$1.XXXXXX")
	prefix=$2$(od -An -N2 -tx2 /dev/urandom | tr -d ' ')
	test_pid=
	trap cluster_run_cleanup EXIT
	trap 'exit 130' INT TERM
}

cluster_run_cleanup() {
	local status=$?
	trap - EXIT INT TERM
	if [ -n "$test_pid" ] && kill -0 "$test_pid" 2>/dev/null; then
		# The runner stops hostgate, the pods and the network itself on
		# SIGTERM; the control plane dies with it (Pdeathsig).
		kill -TERM "$test_pid" 2>/dev/null || true
		for _ in $(seq 60); do
			kill -0 "$test_pid" 2>/dev/null || break
			sleep 0.5
		done
		kill -KILL "$test_pid" 2>/dev/null || true
	fi
	# Leftovers of a runner that died before its own cleanup.
	local ns
	for ns in $(ip netns list | awk '{print $1}' | grep "^$prefix-" || true); do
		ip netns del "$ns" || true
	done
	if ip link show "${prefix}br" >/dev/null 2>&1; then
		ip link del "${prefix}br" || true
	fi
	rm -rf "$work"
	exit "$status"
}
