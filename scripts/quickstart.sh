#!/usr/bin/env bash
# From a fresh clone to a working RDMA connection on this machine: install
# the dependencies, build uroce, then run the verbs tour (examples/
# verbs_tour.c) as a server and a client talking over loopback.
#
# Usage: scripts/quickstart.sh [verbs_tour options, e.g. -s 65536 -e]
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD=$PWD/build
PORT=${PORT:-18600}

echo "== 1. dependencies (Debian packages)"
bash scripts/deps.sh

echo
echo "== 2. build ($BUILD)"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j "$(nproc)"

TOUR=$BUILD/bin/verbs_tour
UROCE=$BUILD/bin/uroce
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/uroce-quickstart.XXXXXX")

echo
echo "== 3. the uroce devices on this machine"
"$UROCE" run ibv_devices || true

echo
echo "== 4. the verbs tour: server in the background, client on 127.0.0.1"
echo "   $UROCE run $TOUR -p $PORT $*"
echo "   $UROCE run $TOUR -p $PORT $* 127.0.0.1"
"$UROCE" run "$TOUR" -p "$PORT" "$@" >"$LOGS/server.log" 2>&1 &
server=$!

# Wait until the server listens (it opens the device first).
for _ in $(seq 100); do
	ss -Hltn 2>/dev/null | awk -v p=":$PORT" '$4 ~ p "$" { f = 1 } END { exit !f }' && break
	kill -0 "$server" 2>/dev/null || break
	sleep 0.1
done

client_rc=0
timeout 120 "$UROCE" run "$TOUR" -p "$PORT" "$@" 127.0.0.1 >"$LOGS/client.log" 2>&1 || client_rc=$?
server_rc=0
timeout 30 tail --pid="$server" -f /dev/null || kill "$server" 2>/dev/null || true
wait "$server" || server_rc=$?

echo
echo "================ server output ================"
cat "$LOGS/server.log"
echo
echo "================ client output ================"
cat "$LOGS/client.log"
echo
echo "(logs kept in $LOGS)"
if [[ $server_rc -eq 0 && $client_rc -eq 0 ]]; then
	echo "quickstart: the tour passed on both sides. Read examples/verbs_tour.c next."
	exit 0
fi
echo "quickstart: FAILED (server exit $server_rc, client exit $client_rc)"
exit 1
