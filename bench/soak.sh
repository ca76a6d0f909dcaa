#!/usr/bin/env bash
# bench/soak.sh: hostgate in file mode under steady load while its
# configuration changes all the time, as an operator's tools change it:
# every CHANGE_EVERY a new version of the config file, written alternately
# by atomic rename and in place (truncated, then written in two pieces with
# a pause between them), with the certificate re-issued every 10th change.
# Load: wrk over HTTP/1.1 (16 connections) and h2load over HTTP/2 with TLS
# (4 connections x 8 streams), both for the whole run. Every 10 s it samples
# hostgate's RSS, goroutines and open file descriptors.
#
# It fails (exit 1) if any request failed or got an answer other than 200,
# or if RSS, goroutines or descriptors grew from the first minute to the
# last beyond noise (ALLOWED_GROWTH percent).
#
#   bench/soak.sh                       # DURATION=600 (seconds)
#   DURATION=60 bench/soak.sh           # a quick look
#   OUT=/tmp/soak.md bench/soak.sh      # the report (default: stdout)
#
# Not part of hack/test.sh (TestFileChurnUnderLoad is its short form).
# Needs wrk, h2load, nginx and openssl (installed with apt-get if missing).
set -euo pipefail
# gateway-api v1.7 needs Go 1.27; machines whose go command is older (or set
# to GOTOOLCHAIN=local) fetch this toolchain through the module proxy.
export GOTOOLCHAIN=go1.27.3

DURATION=${DURATION:-600}
CHANGE_EVERY=${CHANGE_EVERY:-2}
ALLOWED_GROWTH=${ALLOWED_GROWTH:-25}
OUT=${OUT:-/dev/stdout}
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || { echo "soak.sh: DURATION is whole seconds" >&2; exit 2; }

missing=()
for tool in wrk:wrk h2load:nghttp2-client nginx:nginx openssl:openssl; do
	command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if ((${#missing[@]})); then
	echo "soak.sh: installing ${missing[*]}" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d -t hostgate-soak.XXXXXX)
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
http_port=$(free_port) https_port=$(free_port) admin_port=$(free_port) origin_port=$(free_port)

# The origin: nginx answering a small body, as bench/run.sh's.
mkdir -p "$work/nginx"
cat >"$work/nginx/nginx.conf" <<EOF
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 4096; }
http {
	access_log off;
	server {
		listen 127.0.0.1:$origin_port;
		location / { return 200 "soak-ok\n"; }
	}
}
EOF
nginx -c "$work/nginx/nginx.conf" -g 'daemon off;' &
pids+=($!)

version=$(git -C "$repo" describe --always --dirty)
echo "soak.sh: building hostgate $version" >&2
(cd "$repo" && go build -o "$work/hostgate" .)

issue_cert() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
		-subj "/CN=soak.test" -addext "subjectAltName=DNS:soak.test" \
		-keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
}

# version N of the configuration: the Gateway, its certificate, the route
# (whose header filter changes every version) and the backend.
config() {
	local n=$1
	cat <<EOF
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: hostgate}
spec: {controllerName: hostgate.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: soak, namespace: default}
spec:
  gatewayClassName: hostgate
  addresses: [{type: IPAddress, value: 127.0.0.1}]
  listeners:
  - {name: http, port: $http_port, protocol: HTTP}
  - name: https
    port: $https_port
    protocol: HTTPS
    tls: {certificateRefs: [{name: soak-tls}]}
---
apiVersion: v1
kind: Secret
metadata: {name: soak-tls, namespace: default}
type: kubernetes.io/tls
stringData:
  tls.crt: |
$(sed 's/^/    /' "$work/cert.pem")
  tls.key: |
$(sed 's/^/    /' "$work/key.pem")
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: soak, namespace: default}
spec:
  parentRefs: [{name: soak}]
  rules:
  - filters:
    - type: ResponseHeaderModifier
      responseHeaderModifier: {set: [{name: X-Config-Version, value: "$n"}]}
    backendRefs: [{name: origin, port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: origin, namespace: default}
spec: {ports: [{port: 80, targetPort: $origin_port}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: origin-1, namespace: default, labels: {kubernetes.io/service-name: origin}}
addressType: IPv4
endpoints: [{addresses: [127.0.0.1]}]
ports: [{port: $origin_port}]
EOF
}

mkdir -p "$work/config"
file=$work/config/soak.yaml
issue_cert
config 0 >"$file"
"$work/hostgate" --config "$work/config" --admin-addr "127.0.0.1:$admin_port" \
	--http-addr= --https-addr= --access-log=false --log-level=warn 2>"$work/hostgate.log" &
hostgate_pid=$!
pids+=("$hostgate_pid")
for _ in $(seq 100); do
	curl -sf "http://127.0.0.1:$http_port/" >/dev/null && break
	sleep 0.1
done
curl -sf "http://127.0.0.1:$http_port/" >/dev/null || { echo "soak.sh: hostgate does not serve" >&2; cat "$work/hostgate.log" >&2; exit 1; }

echo "soak.sh: ${DURATION}s of load, a change every ${CHANGE_EVERY}s" >&2
wrk -t1 -c16 -d"${DURATION}s" "http://127.0.0.1:$http_port/" >"$work/wrk.out" 2>&1 &
wrk_pid=$!
pids+=("$wrk_pid")
h2load -c4 -m8 -D "$DURATION" --connect-to="127.0.0.1:$https_port" "https://soak.test:$https_port/" >"$work/h2load.out" 2>&1 &
h2load_pid=$!
pids+=("$h2load_pid")

sample() {
	local rss goroutines fds
	rss=$(awk '/^VmRSS/ {print $2}' "/proc/$hostgate_pid/status")
	goroutines=$(curl -sf "http://127.0.0.1:$admin_port/metrics" | awk '$1 == "go_goroutines" {print $2}')
	fds=$(ls "/proc/$hostgate_pid/fd" | wc -l)
	echo "$1 $rss $goroutines $fds" >>"$work/samples"
}

start=$SECONDS
changes=0
next_sample=0
while ((SECONDS - start < DURATION)); do
	elapsed=$((SECONDS - start))
	if ((elapsed >= next_sample)); then
		sample "$elapsed"
		next_sample=$((next_sample + 10))
	fi
	changes=$((changes + 1))
	((changes % 10 == 0)) && issue_cert
	config "$changes" >"$work/next.yaml"
	if ((changes % 2 == 0)); then
		mv "$work/next.yaml" "$file"
	else
		# In place: truncate, half, pause, the rest.
		half=$(($(wc -c <"$work/next.yaml") / 2))
		exec 3<>"$file"
		: >"$file"
		head -c "$half" "$work/next.yaml" >&3
		sleep 0.05
		tail -c "+$((half + 1))" "$work/next.yaml" >&3
		exec 3>&-
	fi
	sleep "$CHANGE_EVERY"
done
wait "$wrk_pid" "$h2load_pid" || true
sample "$((SECONDS - start))"

# What the clients saw.
wrk_requests=$(awk '/requests in/ {print $1}' "$work/wrk.out")
wrk_errors=$(awk '/Socket errors/ {gsub(",", ""); print $4 + $6 + $8 + $10}' "$work/wrk.out")
wrk_non2xx=$(awk '/Non-2xx/ {print $NF}' "$work/wrk.out")
h2_line=$(grep '^requests:' "$work/h2load.out" || echo "requests: 0 total, 0 started, 0 done, 0 succeeded, 0 failed, 0 errored, 0 timeout")
h2_done=$(awk '{print $8}' <<<"$h2_line")
h2_failed=$(awk '{print $12}' <<<"$h2_line")
h2_errored=$(awk '{print $14}' <<<"$h2_line")
h2_non2xx=$(awk '/^status codes:/ {gsub(",", ""); print $5 + $7 + $9}' "$work/h2load.out")

# Growth: the mean of the first minute's samples against the last minute's.
growth() {
	awk -v col="$1" -v d="$DURATION" '
		$1 <= 60 { first += $col; nf++ }
		$1 >= d - 60 { last += $col; nl++ }
		END { f = first / nf; l = last / nl; printf "%.0f %.0f %.1f\n", f, l, (l - f) * 100 / f }' "$work/samples"
}
read -r rss_first rss_last rss_pct < <(growth 2)
read -r gor_first gor_last gor_pct < <(growth 3)
read -r fd_first fd_last fd_pct < <(growth 4)

status=pass
failed=$((${wrk_errors:-0} + ${wrk_non2xx:-0} + ${h2_failed:-0} + ${h2_errored:-0} + ${h2_non2xx:-0}))
((failed > 0)) && status=fail
for pct in "$rss_pct" "$gor_pct" "$fd_pct"; do
	awk -v p="$pct" -v a="$ALLOWED_GROWTH" 'BEGIN { exit !(p > a) }' && status=fail
done

{
	echo "| soak ($(date -u +%F), $version, ${DURATION}s, $changes changes) | value |"
	echo "|---|---|"
	echo "| HTTP/1.1 requests (wrk, 16 connections) | ${wrk_requests:-0}, failed ${wrk_errors:-0}, non-2xx ${wrk_non2xx:-0} |"
	echo "| HTTP/2 TLS requests (h2load, 4x8) | ${h2_done:-0}, failed ${h2_failed:-0}, errored ${h2_errored:-0}, non-2xx ${h2_non2xx:-0} |"
	echo "| RSS, first minute -> last minute | ${rss_first} -> ${rss_last} KiB (${rss_pct}%) |"
	echo "| goroutines | ${gor_first} -> ${gor_last} (${gor_pct}%) |"
	echo "| open descriptors | ${fd_first} -> ${fd_last} (${fd_pct}%) |"
	echo "| result | $status |"
} >"$OUT"
[ "$status" = pass ]
