#!/usr/bin/env bash
# bench/run.sh: hostgate side by side with nginx, HAProxy and Caddy.
#
# Each proxy runs with one worker pinned to one core (PROXY_CPU); the load
# generators and the shared upstreams run on another (LOAD_CPU). Every
# (scenario, proxy) pair is measured ROUNDS times, interleaved
# (round 1: nginx haproxy caddy hostgate, round 2: the same …), and the
# table gives the median of the rounds with their range and the ratio to
# nginx measured in the same run. The result, the machine, the versions
# and every configuration go to OUT (docs/benchmarks.md).
#
#   bench/run.sh                              # ROUNDS=3 DURATION=10s
#   ROUNDS=1 DURATION=3s OUT=/tmp/b.md bench/run.sh
#   PROXIES="nginx hostgate" SCENARIOS="h1-small h2-tls" bench/run.sh
#   HOSTGATE_FLAGS=--profiling bench/run.sh     # extra flags for hostgate, e.g. to profile it
#   PROXIES="nginx hostgate hostgate-native" …  # hostgate-native: --http1-engine=native beside the default
#   HOSTGATE_BASE=/tmp/hostgate-main PROXIES="nginx hostgate hostgate-base" …  # another build (before a change) beside this tree's
#   PROFILE_DIR=/tmp/p bench/run.sh             # hostgate's CPU profile of each run, SCENARIO.PROXY.ROUND.pprof
#
# Not part of hack/test.sh: a full run takes about 15 minutes.
set -euo pipefail
# gateway-api v1.7 needs Go 1.27; machines whose go command is older (or set
# to GOTOOLCHAIN=local) fetch this toolchain through the module proxy.
export GOTOOLCHAIN=go1.27.3

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
PROXIES=${PROXIES:-nginx haproxy caddy hostgate}
SCENARIOS=${SCENARIOS:-h1-small h1-16k h1-small-200 h1-16k-200 h1-fixed h2-tls h2-streams h2-fixed h2-1m tls-new grpc h3 tcp-new tcp-1m pass-new}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
CADDY_VERSION=${CADDY_VERSION:-v2.11.9}
# h2-fixed's offered load, requests/s over all its connections: below what
# every proxy here serves, so that each serves all of it and the CPU per
# request compares like with like.
H2_FIXED_RPS=${H2_FIXED_RPS:-20000}
# h1-fixed's, HTTP/1.1 over 64 connections: below what the load generator
# (h2load, one thread) offers with the upstream on its core.
H1_FIXED_RPS=${H1_FIXED_RPS:-30000}
BIN=${BIN:-$HOME/.cache/hostgate-bench/bin}

repo=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$repo/docs/benchmarks.md}
secs() { [[ $1 =~ ^([0-9]+)s$ ]] || { echo "run.sh: durations are whole seconds like 10s, not $1" >&2; exit 2; }; echo "${BASH_REMATCH[1]}"; }
secs "$DURATION" >/dev/null
secs "$WARMUP" >/dev/null
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: ROUNDS must be a positive number" >&2; exit 2; }
# The fixed loads are spread over the scenarios' connections (16 and 64),
# each of which must be given at least one request a second.
[[ $H2_FIXED_RPS =~ ^[0-9]+$ && $H2_FIXED_RPS -ge 16 ]] || { echo "run.sh: H2_FIXED_RPS must be a whole number of requests/s, at least 16, not $H2_FIXED_RPS" >&2; exit 2; }
[[ $H1_FIXED_RPS =~ ^[0-9]+$ && $H1_FIXED_RPS -ge 64 ]] || { echo "run.sh: H1_FIXED_RPS must be a whole number of requests/s, at least 64, not $H1_FIXED_RPS" >&2; exit 2; }

# --- tools ------------------------------------------------------------------
missing=()
for tool in nginx:nginx haproxy:haproxy wrk:wrk h2load:nghttp2-client taskset:util-linux openssl:openssl; do
	command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
# nginx's stream module (Layer 4) is a package of its own in Debian.
l4=
[[ " $SCENARIOS " =~ \ (tcp-new|tcp-1m|pass-new)\  ]] && l4=1
stream_module=/usr/lib/nginx/modules/ngx_stream_module.so
[[ -n $l4 && " $PROXIES " == *" nginx "* && ! -f $stream_module ]] && missing+=(libnginx-mod-stream)
if ((${#missing[@]})); then
	echo "run.sh: installing ${missing[*]}" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
caddy=$BIN/caddy
# caddy version says "unknown" when built by go install; the build
# information names the module's version.
caddy_version() { go version -m "$caddy" 2>/dev/null | awk '$1 == "mod" && $2 == "github.com/caddyserver/caddy/v2" {print $3}'; }
if [[ " $PROXIES " == *" caddy "* && $(caddy_version) != "$CADDY_VERSION" ]]; then
	echo "run.sh: building Caddy $CADDY_VERSION into $BIN" >&2
	mkdir -p "$BIN"
	(cd /tmp && GOBIN=$BIN GOFLAGS=-mod=mod go install "github.com/caddyserver/caddy/v2/cmd/caddy@$CADDY_VERSION")
fi

# Each proxy holds two descriptors per proxied connection; HAProxy refuses
# to start when it cannot have what its maxconn needs.
ulimit -n "$(ulimit -Hn)"

work=$(mktemp -d /tmp/hostgate-bench.XXXXXX)
chmod 755 "$work" # nginx's workers run as nobody and read the 16 KiB file
pids=()
declare -A PID=()
cleanup() {
	local pid
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "run.sh: building hostgate and bench/loadgen from $repo" >&2
(cd "$repo" && go build -o "$work/bin/hostgate" . && go build -o "$work/bin/loadgen" ./bench/loadgen)
loadgen=$work/bin/loadgen

# start NAME CPU CMD…: runs CMD pinned to CPU with its output in
# $work/NAME.log and remembers its PID for cleanup.
start() {
	local name=$1 cpu=$2
	shift 2
	taskset -c "$cpu" "$@" >"$work/$name.log" 2>&1 &
	pids+=($!)
	PID[$name]=$!
}

# wait_port PORT NAME: until something listens on 127.0.0.1:PORT.
wait_port() {
	local i
	for ((i = 0; i < 300; i++)); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	echo "run.sh: $2 does not listen on 127.0.0.1:$1; its log:" >&2
	cat "$work/$2.log" >&2
	exit 1
}

# --- certificate and upstreams ----------------------------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 7 \
	-subj /CN=bench.hostgate.test -addext subjectAltName=IP:127.0.0.1,DNS:bench.hostgate.test \
	-keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null

UP_HTTP=18000 UP_GRPC=18001 UP_HTTPS=18002
# hostgate-native is hostgate with --http1-engine=native, its netpoll
# engine, measured in the same run as the readiness loop (the default).
# hostgate-base is the binary HOSTGATE_BASE (a build of another commit),
# run as hostgate is, to compare a change with what it changes in one run.
declare -A HTTP_PORT=([nginx]=18100 [haproxy]=18200 [caddy]=18300 [hostgate]=18400 [hostgate-native]=18500 [hostgate-base]=18600)
declare -A TLS_PORT=([nginx]=18101 [haproxy]=18201 [caddy]=18301 [hostgate]=18401 [hostgate-native]=18501 [hostgate-base]=18601)
declare -A ADMIN_PORT=([hostgate]=18409 [hostgate-native]=18509 [hostgate-base]=18609)
# Layer 4: a TCP port passing bytes to the HTTP upstream, and a TLS port
# passing connections through, by ClientHello, to its HTTPS listener.
# Caddy has none: its Layer 4 proxy is a plugin (caddy-l4).
declare -A TCP_PORT=([nginx]=18102 [haproxy]=18202 [hostgate]=18402 [hostgate-native]=18502 [hostgate-base]=18602)
declare -A PASS_PORT=([nginx]=18103 [haproxy]=18203 [hostgate]=18403 [hostgate-native]=18503 [hostgate-base]=18603)
GRPC_PATH=/grpc.health.v1.Health/

for port in $UP_HTTP $UP_GRPC $UP_HTTPS "${HTTP_PORT[@]}" "${TLS_PORT[@]}" "${TCP_PORT[@]}" "${PASS_PORT[@]}" "${ADMIN_PORT[@]}"; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		echo "run.sh: 127.0.0.1:$port is taken (another run?); it must be free" >&2
		exit 1
	fi
done
mkdir -p "$work/upstream" "$work/nginx" "$work/hostgate" "$work/hostgate-native" "$work/hostgate-base"
# The HTTP upstream is nginx answering from memory: "return 200" for the
# small response, a 16 KiB file held open by open_file_cache (so from the
# page cache) for the large one. It reaches about 100,000 small responses/s
# sharing its core with wrk here, several times what any proxy in front of
# it reaches on a core of its own.
cat >"$work/upstream/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $work/upstream/nginx.pid;
error_log stderr warn;
events { worker_connections 4096; }
http {
    access_log off;
    default_type text/plain;
    keepalive_requests 10000000;
    keepalive_timeout 300s;
    server {
        listen 127.0.0.1:$UP_HTTP backlog=4096;
        listen 127.0.0.1:$UP_HTTPS ssl backlog=4096;
        ssl_certificate $work/cert.pem;
        ssl_certificate_key $work/key.pem;
        location = /16k { root $work/upstream; open_file_cache max=16; sendfile on; }
        location = /1m { root $work/upstream; open_file_cache max=16; sendfile on; }
        location / { return 200 "hello, world\n"; }
    }
}
EOF
head -c 16384 /dev/zero | tr '\0' x >"$work/upstream/16k"
head -c 1048576 /dev/zero | tr '\0' x >"$work/upstream/1m"
start upstream "$LOAD_CPU" nginx -e stderr -p "$work/upstream" -c "$work/upstream/nginx.conf"
# The gRPC upstream is grpc-go's health service over h2c.
start grpc-upstream "$LOAD_CPU" env GOMAXPROCS=1 "$loadgen" grpc-upstream "127.0.0.1:$UP_GRPC"

# --- proxies -----------------------------------------------------------------
# The same for all: one worker or thread (GOMAXPROCS=1 for the Go ones),
# keep-alive to the upstream with a pool of up to 1024 idle connections
# (hostgate's default; HAProxy's pool has no bound), enough for the 512
# streams of the HTTP/2 scenario each to keep one, no access log, X-Forwarded-For sent
# upstream, TLS 1.2–1.3 with the same ECDSA P-256 certificate, HTTP/2 over
# TLS by ALPN, gRPC to the h2c upstream by path prefix.
cat >"$work/nginx/nginx.conf" <<EOF
${l4:+load_module $stream_module;}
worker_processes 1;
daemon off;
pid $work/nginx/nginx.pid;
error_log stderr warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 10000000;
    keepalive_timeout 300s;
    upstream web { server 127.0.0.1:$UP_HTTP; keepalive 1024; keepalive_requests 10000000; }
    upstream grpc { server 127.0.0.1:$UP_GRPC; keepalive 1024; keepalive_requests 10000000; }
    server {
        listen 127.0.0.1:${HTTP_PORT[nginx]} backlog=4096;
        listen 127.0.0.1:${TLS_PORT[nginx]} ssl http2 backlog=4096;
        ssl_certificate $work/cert.pem;
        ssl_certificate_key $work/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        location / {
            proxy_pass http://web;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
        }
        location $GRPC_PATH {
            grpc_pass grpc://grpc;
            grpc_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
        }
    }
}
EOF
if [[ -n $l4 ]]; then
	cat >>"$work/nginx/nginx.conf" <<EOF
stream {
    server {
        listen 127.0.0.1:${TCP_PORT[nginx]} backlog=4096;
        proxy_pass 127.0.0.1:$UP_HTTP;
    }
    server {
        listen 127.0.0.1:${PASS_PORT[nginx]} backlog=4096;
        ssl_preread on;
        proxy_pass 127.0.0.1:$UP_HTTPS;
    }
}
EOF
fi
cat "$work/cert.pem" "$work/key.pem" >"$work/haproxy.pem"
cat >"$work/haproxy.cfg" <<EOF
global
    nbthread 1
    maxconn 4096
    ssl-default-bind-options ssl-min-ver TLSv1.2
defaults
    mode http
    timeout connect 5s
    timeout client 300s
    timeout server 300s
    timeout http-keep-alive 300s
    option http-keep-alive
    http-reuse always
frontend bench
    bind 127.0.0.1:${HTTP_PORT[haproxy]}
    bind 127.0.0.1:${TLS_PORT[haproxy]} ssl crt $work/haproxy.pem alpn h2,http/1.1
    option forwardfor
    use_backend grpc if { path_beg $GRPC_PATH }
    default_backend web
backend web
    server up 127.0.0.1:$UP_HTTP
backend grpc
    server up 127.0.0.1:$UP_GRPC proto h2
frontend tcp
    mode tcp
    bind 127.0.0.1:${TCP_PORT[haproxy]}
    default_backend web-tcp
frontend pass
    mode tcp
    bind 127.0.0.1:${PASS_PORT[haproxy]}
    tcp-request inspect-delay 5s
    tcp-request content accept if { req_ssl_hello_type 1 }
    default_backend web-tls
backend web-tcp
    mode tcp
    server up 127.0.0.1:$UP_HTTP
backend web-tls
    mode tcp
    server up 127.0.0.1:$UP_HTTPS
EOF
cat >"$work/Caddyfile" <<EOF
{
	admin off
	auto_https off
	persist_config off
	servers {
		protocols h1 h2 h3
	}
}
(proxy) {
	reverse_proxy $GRPC_PATH* h2c://127.0.0.1:$UP_GRPC {
		transport http {
			keepalive_idle_conns_per_host 1024
		}
	}
	reverse_proxy 127.0.0.1:$UP_HTTP {
		transport http {
			keepalive_idle_conns_per_host 1024
		}
	}
}
http://:${HTTP_PORT[caddy]} {
	bind 127.0.0.1
	import proxy
}
https://:${TLS_PORT[caddy]} {
	bind 127.0.0.1
	tls $work/cert.pem $work/key.pem {
		protocols tls1.2 tls1.3
	}
	import proxy
}
EOF
indent() { sed 's/^/    /' "$1"; }
# hostgate_config NAME: the configuration of hostgate NAME, on its ports.
hostgate_config() {
	cat <<EOF
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: hostgate}
spec: {controllerName: hostgate.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: bench}
spec:
  gatewayClassName: hostgate
  addresses: [{value: 127.0.0.1}]
  listeners:
  - {name: http, port: ${HTTP_PORT[$1]}, protocol: HTTP}
  - {name: https, port: ${TLS_PORT[$1]}, protocol: HTTPS, tls: {certificateRefs: [{name: bench-tls}]}}
  - {name: tcp, port: ${TCP_PORT[$1]}, protocol: TCP}
  - {name: pass, port: ${PASS_PORT[$1]}, protocol: TLS, tls: {mode: Passthrough}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: bench}
spec:
  parentRefs: [{name: bench, sectionName: tcp}]
  rules:
  - backendRefs: [{name: upstream, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: bench}
spec:
  parentRefs: [{name: bench, sectionName: pass}]
  rules:
  - backendRefs: [{name: upstream-tls, port: 443}]
---
apiVersion: v1
kind: Service
metadata: {name: upstream-tls}
spec: {ports: [{name: https, port: 443, targetPort: $UP_HTTPS}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: upstream-tls, labels: {kubernetes.io/service-name: upstream-tls}}
addressType: IPv4
ports: [{name: https, port: $UP_HTTPS}]
endpoints: [{addresses: [127.0.0.1]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: bench}
spec:
  parentRefs: [{name: bench}]
  rules:
  - matches: [{path: {type: PathPrefix, value: ${GRPC_PATH%/}}}]
    backendRefs: [{name: grpc-upstream, port: 9000}]
  - backendRefs: [{name: upstream, port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: upstream}
spec: {ports: [{name: http, port: 80, targetPort: $UP_HTTP}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: upstream, labels: {kubernetes.io/service-name: upstream}}
addressType: IPv4
ports: [{name: http, port: $UP_HTTP}]
endpoints: [{addresses: [127.0.0.1]}]
---
apiVersion: v1
kind: Service
metadata: {name: grpc-upstream}
spec: {ports: [{name: grpc, port: 9000, targetPort: $UP_GRPC, appProtocol: kubernetes.io/h2c}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: grpc-upstream, labels: {kubernetes.io/service-name: grpc-upstream}}
addressType: IPv4
ports: [{name: grpc, port: $UP_GRPC, appProtocol: kubernetes.io/h2c}]
endpoints: [{addresses: [127.0.0.1]}]
---
apiVersion: v1
kind: Secret
metadata: {name: bench-tls}
type: kubernetes.io/tls
stringData:
  tls.crt: |
$(indent "$work/cert.pem")
  tls.key: |
$(indent "$work/key.pem")
EOF
}
hostgate_config hostgate >"$work/hostgate/bench.yaml"
hostgate_config hostgate-native >"$work/hostgate-native/bench.yaml"
hostgate_config hostgate-base >"$work/hostgate-base/bench.yaml"

# hostgate_command NAME [BINARY]: how hostgate NAME runs.
hostgate_command() {
	echo "env GOMAXPROCS=1 ${2:-$work/bin/hostgate} --config $work/$1 --admin-addr 127.0.0.1:${ADMIN_PORT[$1]} --http-addr= --https-addr= --access-log=false --gateway-class= --shutdown-delay=0s --shutdown-grace=1s ${PROFILE_DIR:+--profiling} ${HOSTGATE_FLAGS:-}"
}
declare -A COMMAND=(
	[nginx]="nginx -e stderr -p $work/nginx -c $work/nginx/nginx.conf"
	[haproxy]="haproxy -db -f $work/haproxy.cfg"
	[caddy]="env GOMAXPROCS=1 $caddy run --config $work/Caddyfile --adapter caddyfile"
	[hostgate]="$(hostgate_command hostgate)"
	[hostgate-native]="$(hostgate_command hostgate-native) --http1-engine=native"
)
[[ -n ${HOSTGATE_BASE:-} ]] && COMMAND[hostgate-base]="$(hostgate_command hostgate-base "$HOSTGATE_BASE")"
wait_port "$UP_HTTP" upstream
wait_port "$UP_GRPC" grpc-upstream
for p in $PROXIES; do
	[[ -v "COMMAND[$p]" ]] || { echo "run.sh: unknown proxy $p (have: ${!COMMAND[*]})" >&2; exit 2; }
	# shellcheck disable=SC2086 # the commands above are word lists
	start "$p" "$PROXY_CPU" ${COMMAND[$p]}
done
for p in $PROXIES; do
	wait_port "${HTTP_PORT[$p]}" "$p"
	wait_port "${TLS_PORT[$p]}" "$p"
	if [[ -n $l4 && -v "TCP_PORT[$p]" ]]; then
		wait_port "${TCP_PORT[$p]}" "$p"
		wait_port "${PASS_PORT[$p]}" "$p"
	fi
done

# --- scenarios ----------------------------------------------------------------
# why_na SCENARIO PROXY: prints why the proxy cannot take part, if so.
why_na() {
	if [[ $1 == tcp-* || $1 == pass-* ]]; then
		if [[ $2 == caddy ]]; then echo "standard Caddy has no Layer 4 proxy (caddy-l4 is a plugin)"; fi
		return 0
	fi
	[[ $1 == h3 ]] || return 0
	case $2 in
	nginx) nginx -V 2>&1 | grep -q http_v3_module &&
		echo "run.sh does not configure HTTP/3 for nginx yet" ||
		echo "this nginx ($(nginx -v 2>&1 | sed 's/.*\///')) is built without HTTP/3 (http_v3_module, nginx ≥ 1.25)" ;;
	haproxy) haproxy -vv | grep -q '+QUIC' &&
		echo "run.sh does not configure HTTP/3 for HAProxy yet" ||
		echo "this HAProxy ($(haproxy -v | awk 'NR==1{print $3}')) is built without QUIC" ;;
	esac
}

# load SCENARIO PROXY DURATION OUTFILE: runs the load generator of the
# scenario against the proxy, its command line kept in OUTFILE.cmd for the
# docs.
load() {
	local s=$1 p=$2 d=$3 out=$4 http=127.0.0.1:${HTTP_PORT[$2]} tls=127.0.0.1:${TLS_PORT[$2]-}
	local -a cmd
	case $s in
	h1-small) cmd=(wrk -t1 -c64 -d"$d" --latency "http://$http/") ;;
	h1-16k) cmd=(wrk -t1 -c64 -d"$d" --latency "http://$http/16k") ;;
	h1-small-200) cmd=(wrk -t1 -c200 -d"$d" --latency "http://$http/") ;;
	h1-16k-200) cmd=(wrk -t1 -c200 -d"$d" --latency "http://$http/16k") ;;
	h1-fixed) cmd=(h2load --h1 -t1 -c64 "--rps=$((H1_FIXED_RPS / 64))" -D "$(secs "$d")" "--log-file=$out.log" "http://$http/") ;;
	h2-tls) cmd=(h2load -t1 -c16 -m32 -D "$(secs "$d")" "--log-file=$out.log" "https://$tls/") ;;
	h2-streams) cmd=(h2load -t1 -c4 -m100 -D "$(secs "$d")" "--log-file=$out.log" "https://$tls/") ;;
	h2-fixed) cmd=(h2load -t1 -c16 -m32 "--rps=$((H2_FIXED_RPS / 16))" -D "$(secs "$d")" "--log-file=$out.log" "https://$tls/") ;;
	h2-1m) cmd=(h2load -t1 -c4 -m4 -D "$(secs "$d")" "--log-file=$out.log" "https://$tls/1m") ;;
	tls-new) cmd=(wrk -t1 -c16 -d"$d" --latency -H "Connection: close" "https://$tls/") ;;
	grpc) cmd=(env GOMAXPROCS=1 "$loadgen" grpc -c 4 -m 16 -d "$d" "$tls") ;;
	h3) cmd=(env GOMAXPROCS=1 "$loadgen" h3 -c 16 -m 8 -d "$d" "https://$tls/") ;;
	tcp-new) cmd=(wrk -t1 -c16 -d"$d" --latency -H "Connection: close" "http://127.0.0.1:${TCP_PORT[$p]}/") ;;
	tcp-1m) cmd=(wrk -t1 -c1 -d"$d" --latency "http://127.0.0.1:${TCP_PORT[$p]}/1m") ;;
	pass-new) cmd=(wrk -t1 -c16 -d"$d" --latency -H "Connection: close" "https://127.0.0.1:${PASS_PORT[$p]}/") ;;
	*) echo "run.sh: unknown scenario $s" >&2; exit 2 ;;
	esac
	printf '%q ' "${cmd[@]}" | sed "s|$work|\$WORK|g; s/ $//" >"$out.cmd"
	taskset -c "$LOAD_CPU" "${cmd[@]}" >"$out" 2>&1
}

# cpu_ticks PID: user+system clock ticks of PID and its children (nginx's
# worker is the master's child).
cpu_ticks() {
	local pid total=0 t
	for pid in "$1" $(pgrep -P "$1" || true); do
		t=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)
		total=$((total + t))
	done
	echo "$total"
}

# measure SCENARIO PROXY ROUND DURATION: one measurement, as a results line.
measure() {
	local s=$1 p=$2 r=$3 d=$4 out=$work/out/$1.$2.$3 pid t0 t1 c0 c1 line
	local profile=
	pid=${PID[$p]}
	if [[ -n ${PROFILE_DIR:-} && -v "ADMIN_PORT[$p]" && $r != 0 ]]; then
		# Past the load's first second, to its last.
		(sleep 1 && curl -sSf --create-dirs -o "$PROFILE_DIR/$s.$p.$r.pprof" "http://127.0.0.1:${ADMIN_PORT[$p]}/debug/pprof/profile?seconds=$(($(secs "$d") - 2))") &
		profile=$!
	fi
	c0=$(cpu_ticks "$pid") t0=$(date +%s%N)
	if ! load "$s" "$p" "$d" "$out"; then
		echo "$s $p n/a the load generator failed: $(tail -1 "$out")"
		return
	fi
	if [[ -n $profile ]] && ! wait "$profile"; then
		echo "run.sh: no CPU profile of $s through hostgate, round $r" >&2
	fi
	t1=$(date +%s%N) c1=$(cpu_ticks "$pid")
	case $s in
	h2-* | h1-fixed) line=$("$loadgen" parse h2load "$out" "$out.log") ;;
	h1-* | tls-new | tcp-* | pass-*) line=$("$loadgen" parse wrk "$out") ;;
	*) line=$(grep '^requests=' "$out") ;;
	esac
	rm -f "$out.log"
	# What failed goes to the log with the run: the table has only counts.
	if [[ $line =~ errors=[1-9] ]]; then
		echo "run.sh: $s through $p, round $r: $(grep -m1 -E '^loadgen:|Socket errors|Non-2xx|failed' "$out")" >&2
	fi
	echo "$s $p $r $line cpu_pct=$(((c1 - c0) * 100 * 1000000000 / $(getconf CLK_TCK) / (t1 - t0)))"
}

mkdir -p "$work/out"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u '+%Y-%m-%d %H:%M UTC')
results=$work/results.txt
notrun=$work/notrun.txt
: >"$results"
: >"$notrun"
declare -A skip=()
for s in $SCENARIOS; do
	for p in $PROXIES; do
		reason=$(why_na "$s" "$p")
		if [[ -n $reason ]]; then
			skip[$s.$p]=1
			echo "$s $p n/a $reason" >>"$notrun"
		fi
	done
done

if [[ $(secs "$WARMUP") -gt 0 ]]; then
	echo "run.sh: warm-up, $WARMUP per scenario and proxy" >&2
	for s in $SCENARIOS; do
		for p in $PROXIES; do
			[[ -v "skip[$s.$p]" ]] && continue
			line=$(measure "$s" "$p" 0 "$WARMUP")
			# A pair that fails or errs while warming up is left out with
			# the reason rather than measured.
			if [[ $line == *" n/a "* ]] || [[ $line =~ errors=([0-9]+) && ${BASH_REMATCH[1]} -gt 0 ]] || [[ $line == *" requests=0 "* ]]; then
				echo "run.sh: $s through $p fails: $line" >&2
				skip[$s.$p]=1
				echo "$s $p n/a failed in warm-up: ${line#* * * }" >>"$notrun"
			fi
		done
	done
fi

# The upstream alone, with wrk on the same core as in every proxied run:
# the ceiling that shows the upstream is not what limits the proxies.
HTTP_PORT[upstream]=$UP_HTTP
direct() { measure "$1" upstream 1 "$DURATION" | sed -E 's/.* rps=([0-9]+)[.0-9]* .* p99_ms=([0-9.]+).*/\1 requests\/s (p99 \2 ms)/'; }
direct_small=$(direct h1-small)
direct_16k=$(direct h1-16k)
echo "run.sh: the upstream alone: $direct_small small, $direct_16k 16 KiB" >&2

for ((r = 1; r <= ROUNDS; r++)); do
	for s in $SCENARIOS; do
		for p in $PROXIES; do
			[[ -v "skip[$s.$p]" ]] && continue
			line=$(measure "$s" "$p" "$r" "$DURATION")
			echo "run.sh: round $r/$ROUNDS: $line" >&2
			echo "$line" >>"$results"
		done
	done
done

cat "$notrun" >>"$results"
table=$("$loadgen" table "$results" nginx)
echo "$table"

# --- docs/benchmarks.md ---------------------------------------------------------
version() { "$@" 2>&1 | head -1; }
# conf FILE LANG: a configuration as it ran, with the run's folder as
# $WORK and the PEM blocks' contents left out.
conf() {
	printf '```%s\n' "$2"
	sed -e "s|$work|\$WORK|g" -e '/-----BEGIN/,/-----END/{/-----BEGIN/!{/-----END/!d}}' "$1"
	printf '```\n\n'
}
# The commit hostgate was built from; edits under bench/ and docs/ do
# not change the binary.
hostgate_rev=$(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
if ! (cd "$repo" && git diff --quiet HEAD -- . ':!bench' ':!docs' 2>/dev/null); then
	hostgate_rev+=" with uncommitted changes"
fi
mkdir -p "$(dirname "$OUT")"
# The "Control plane" section comes from hack/perf-controlplane.sh, not
# from this run: it is carried over as it is.
control_plane=$(awk '/^## Control plane/ { p = 1; print; next } p && /^## / { exit } p' "$OUT" 2>/dev/null || true)
{
	busy=
	if awk -v l="${load_before%% *}" 'BEGIN { exit !(l >= 1) }'; then
		busy="**This run shared the machine with other work** (load average
${load_before%% *} at its start, on $(nproc) CPUs): each proxy got only part of its core
(the proxy CPU column), so the rates are shares of a busy machine, not
what the proxies can do, and their ratios are rough. Run it again on an
idle machine for figures to compare."
	fi
	cat <<EOF
# Benchmarks: hostgate side by side with nginx, HAProxy and Caddy

Written by [\`bench/run.sh\`](../bench/run.sh) on $started (ROUNDS=$ROUNDS,
DURATION=$DURATION, WARMUP=$WARMUP); run it again to replace this file.

## Result

$busy

$table

Each figure is the median over $ROUNDS rounds of $DURATION, the range in
brackets. p50 and p99 are medians of each round's percentiles. The ratios
divide by nginx's median in the same scenario and run: req/s above 1.00×
and p99 below 1.00× are better than nginx. **proxy CPU** is the CPU time
the proxy (all its threads and processes) used during the measurement
divided by its wall time: near 100% the proxy saturated its core and is
what was measured; well below, something else (the load generator's
core, or other work on the machine) set the pace and the row says little
about the proxy. **CPU per request** is that CPU time divided by the
requests served, the median over the rounds. **errors** counts failed requests over all rounds
(for wrk socket errors, among them responses slower than its 2 s
timeout, and non-2xx responses; for h2load failed, errored and timed out
requests; for loadgen failed calls).

$control_plane

## Machine

- $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); kernel $(uname -r); $(sed -n 's/^PRETTY_NAME="\(.*\)"/\1/p' /etc/os-release)
- load average (1, 5, 15 min) when the run started: $load_before; when it ended: $(cut -d' ' -f1-3 /proc/loadavg). Anything above 0 is other work sharing the cores with the benchmark.

## Versions

| what | version |
|---|---|
| hostgate | $hostgate_rev, built with $(go version | cut -d' ' -f3) |
| nginx | $(version nginx -v | sed 's/.*: //') (Debian package) |
| HAProxy | $(version haproxy -v | cut -d' ' -f1-3) (Debian package) |
| Caddy | $(caddy_version) (\`go install github.com/caddyserver/caddy/v2/cmd/caddy@$CADDY_VERSION\`) |
| wrk | $(version wrk -v | cut -d' ' -f1-2) |
| h2load | $(version h2load --version) |
| loadgen | bench/loadgen with $(cd "$repo" && go list -m -f '{{.Path}} {{.Version}}' google.golang.org/grpc github.com/quic-go/quic-go | paste -sd, | sed 's/,/, /') |
| OpenSSL | $(version openssl version) |

## Method

- **Topology.** Each proxy runs pinned to core $PROXY_CPU
  (\`taskset -c $PROXY_CPU\`); the load generator and the upstreams run
  pinned to core $LOAD_CPU. All proxies run for the whole run, each on
  its own loopback ports, and are measured one after the other: every
  round measures every scenario through every proxy (nginx, HAProxy,
  Caddy, hostgate, nginx, …), so slow drifts of the machine fall on all
  of them alike. A warm-up of $WARMUP per scenario and proxy comes first
  and is not counted; a pair that fails in the warm-up is reported as n/a
  with the failure.
- **Upstreams, the same for every proxy.** HTTP: a second nginx with one
  worker that answers \`GET /\` with "hello, world" (13 bytes) by
  \`return 200\` and \`GET /16k\` with a 16 KiB file held open by
  \`open_file_cache\`, so both come from memory. Straight from it, with
  wrk on the same core as in the proxied runs, this run reached
  $direct_small with the small response and $direct_16k with
  the 16 KiB one: while that is well above a proxy's rate in the table,
  the upstream is not what limits the proxy. gRPC: grpc-go's health service
  (\`grpc.health.v1.Health/Check\`) over h2c (\`loadgen grpc-upstream\`).
- **Equivalent configurations** (below, as they ran): one worker or
  thread (nginx \`worker_processes 1\`, HAProxy \`nbthread 1\`, Caddy and
  hostgate \`GOMAXPROCS=1\`); keep-alive to the upstream with up to 1024
  idle connections (hostgate's default; HAProxy's pool has no bound),
  enough for each of the 512 streams of the HTTP/2 scenario to keep one; access logs off
  everywhere (nginx \`access_log off\`, HAProxy without \`log\`, Caddy
  without a \`log\` directive, hostgate \`--access-log=false\`);
  X-Forwarded-For sent upstream (Caddy and hostgate also send
  X-Forwarded-Proto and -Host); nginx's per-connection request limits
  raised so that no proxy closes client or upstream connections after
  1,000 requests; TLS 1.2 and 1.3 with one self-signed ECDSA P-256
  certificate made for the run by openssl (the clients negotiate TLS 1.3);
  HTTP/2 over TLS by ALPN; gRPC by the path prefix \`$GRPC_PATH\` to the
  h2c upstream. hostgate runs in file mode (\`--config\`) with a Gateway,
  an HTTPRoute, Services, EndpointSlices and the Secret.
- **Scenarios** (the load generator's command against hostgate; for the
  others only the port differs):
EOF
	for s in $SCENARIOS; do
		shown=$(cat "$work/out/$s.hostgate.1.cmd" 2>/dev/null || echo "(not run)")
		case $s in
		h1-small) what="HTTP/1.1 keep-alive, small response, 64 connections" ;;
		h1-16k) what="HTTP/1.1 keep-alive, 16 KiB response, 64 connections" ;;
		h1-small-200 | h1-16k-200) what="as ${s%-200}, with 200 connections: more connections than a loop's turn can serve at once" ;;
		h1-fixed) what="HTTP/1.1 keep-alive, small response, at a fixed offered load (H1_FIXED_RPS=$H1_FIXED_RPS requests/s over 64 connections, h2load --h1): every proxy serves the same load, so its CPU per request is the figure to compare, and p99 is latency below saturation, where a saturated load generator cannot hide the proxy's cost" ;;
		h2-tls) what="HTTP/2 over TLS, 16 connections × 32 concurrent streams; the percentiles come from h2load's per-request log" ;;
		h2-streams) what="HTTP/2 over TLS, many streams per connection: 4 connections × 100 concurrent streams, small response" ;;
		h2-fixed) what="HTTP/2 over TLS at a fixed offered load (H2_FIXED_RPS=$H2_FIXED_RPS requests/s over 16 connections × 32 streams): every proxy serves the same load, so its CPU per request is the figure to compare, and p99 is latency below saturation" ;;
		h2-1m) what="HTTP/2 over TLS, 1 MiB responses (flow control at work), 4 connections × 4 concurrent streams; req/s × 1 MiB is the throughput" ;;
		tls-new) what="a new TLS connection for every request (a full handshake: wrk resumes no sessions), HTTP/1.1 with \`Connection: close\`, 16 connections at a time, so req/s is handshakes/s; wrk's latency starts after the handshake" ;;
		grpc) what="gRPC unary over TLS, 4 connections × 16 concurrent calls of grpc-go's generated health client; each call's grpc-status is checked" ;;
		h3) what="HTTP/3, 16 QUIC connections × 8 concurrent requests with quic-go's client (Debian's h2load is built without QUIC)" ;;
		tcp-new) what="Layer 4, short TCP connections: HTTP/1.1 with \`Connection: close\` (wrk, 16 at a time, small response) through a TCP listener passing bytes to the HTTP upstream (a Gateway TCPRoute; nginx \`stream\`, HAProxy \`mode tcp\`), so req/s is connections/s, each a connect to the upstream" ;;
		tcp-1m) what="Layer 4, one long TCP connection: 1 MiB responses one after another over one keep-alive connection through the TCP listener, so req/s × 8.4 Mbit is its throughput" ;;
		pass-new) what="Layer 4, new TLS passthrough connections: HTTPS with \`Connection: close\` (wrk, 16 at a time) through a TLS listener that reads each ClientHello and passes the connection, handshake included, to the upstream's own TLS (a TLSRoute in mode Passthrough; nginx \`ssl_preread\`, HAProxy \`req_ssl_hello_type\`), so req/s is handshakes/s, made by the upstream" ;;
		esac
		# shellcheck disable=SC2016 # the backticks are Markdown's
		printf '  - **%s**: %s.\n    `%s`\n' "$s" "$what" "$shown"
	done
	cat <<EOF
- **Ports**, all on 127.0.0.1: upstream HTTP $UP_HTTP, gRPC $UP_GRPC;
  plain and TLS (TCP, and UDP for HTTP/3): nginx ${HTTP_PORT[nginx]}/${TLS_PORT[nginx]},
  HAProxy ${HTTP_PORT[haproxy]}/${TLS_PORT[haproxy]}, Caddy ${HTTP_PORT[caddy]}/${TLS_PORT[caddy]},
  hostgate ${HTTP_PORT[hostgate]}/${TLS_PORT[hostgate]} (admin ${ADMIN_PORT[hostgate]}), hostgate-native
  ${HTTP_PORT[hostgate-native]}/${TLS_PORT[hostgate-native]} (admin ${ADMIN_PORT[hostgate-native]}).
- **Not claimed.** Loopback only, so no network latency or bandwidth
  limit; one upstream endpoint; a shared machine (see the load average
  above). Numbers from different runs are not comparable; ratios within a
  run are the figures to read.

## Configurations

Started with \`taskset -c $PROXY_CPU\` as:

EOF
	for p in $PROXIES; do
		# shellcheck disable=SC2016 # the backticks are Markdown's
		printf -- '- %s: `%s`\n' "$p" "$(echo "${COMMAND[$p]}" | sed "s|$work|\$WORK|g; s|$BIN|\$BIN|g")"
	done
	echo
	echo "Upstream nginx (\`nginx -e stderr -p \$WORK/upstream -c \$WORK/upstream/nginx.conf\` with \`taskset -c $LOAD_CPU\`):"
	echo
	conf "$work/upstream/nginx.conf" nginx
	echo "nginx:"
	echo
	conf "$work/nginx/nginx.conf" nginx
	echo "HAProxy (\`\$WORK/haproxy.pem\` is the certificate followed by its key):"
	echo
	conf "$work/haproxy.cfg" haproxy
	echo "Caddy:"
	echo
	conf "$work/Caddyfile" caddyfile
	echo "hostgate (\`\$WORK/hostgate/bench.yaml\`):"
	echo
	conf "$work/hostgate/bench.yaml" yaml
} | cat -s >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "run.sh: wrote $OUT" >&2
