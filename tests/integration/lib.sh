#!/usr/bin/env bash
# Helpers for uroce's integration tests; sourced by tests/integration/*.sh.
#
# Executed directly (ctest registers every *.sh here, this one included) it
# runs a self-test of the helpers with a plain TCP server and client, so a
# broken harness cannot make the real tests pass.
#
# What a test gets from sourcing this file:
#   - LD_LIBRARY_PATH=$UROCE_LIB_DIR, so verbs programs load uroce;
#   - "${ON_UROCE[@]}" CMD...  run a verbs program that was not built with
#                          the sanitizers (Debian's ibv_*, python3) on uroce:
#                          adds LD_PRELOAD=libasan when UROCE_SANITIZE=1;
#   - alloc_port           set PORT to a free TCP port from this test's range;
#   - run_pair NAME SERVER_CMD... -- CLIENT_CMD...
#                          server in the background, client once the server
#                          listens on $PORT, both bounded by timeouts, both
#                          exit codes checked, both logs shown on failure;
#   - require_cmd CMD PKG  skip the test (exit 0, "SKIP: ...") if CMD is missing;
#   - require_py_module MOD PKG  the same for a module of /usr/bin/python3;
#   - check/pass/fail/finish: count results, end with "N passed, N failed".
#
# Environment (set by ctest, see tests/CMakeLists.txt; defaults for a manual
# run from the source tree with a build in ./build):
#   UROCE_SRC_DIR UROCE_BUILD_DIR UROCE_LIB_DIR UROCE_BIN_DIR UROCE_SANITIZE

set -euo pipefail

TEST_NAME=$(basename "$0" .sh)
# a second registration of the same script (tests/CMakeLists.txt: ".udp",
# UROCE_SHM=0) has its own logs and ports
TEST_NAME+=${UROCE_TEST_VARIANT:+.$UROCE_TEST_VARIANT}

UROCE_SRC_DIR=${UROCE_SRC_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
UROCE_BUILD_DIR=${UROCE_BUILD_DIR:-$UROCE_SRC_DIR/build}
UROCE_LIB_DIR=${UROCE_LIB_DIR:-$UROCE_BUILD_DIR/lib}
UROCE_BIN_DIR=${UROCE_BIN_DIR:-$UROCE_BUILD_DIR/bin}
UROCE_SANITIZE=${UROCE_SANITIZE:-0}

# Timeouts in seconds; a test may lower or raise them before run_pair.
LISTEN_TIMEOUT=${LISTEN_TIMEOUT:-20} # server start until its port listens
CLIENT_TIMEOUT=${CLIENT_TIMEOUT:-60} # whole client run
SERVER_GRACE=${SERVER_GRACE:-15}     # server exit after the client is done

# Logs stay in the build tree for a look after the run.
LOG_DIR=$UROCE_BUILD_DIR/test-logs/$TEST_NAME
rm -rf "$LOG_DIR"
mkdir -p "$LOG_DIR"

PASSED=0
FAILED=0

log() { printf '%s\n' "$*"; }
die() {
	printf 'ERROR: %s\n' "$*" >&2
	exit 1
}

# ---- environment ---------------------------------------------------------------

export LD_LIBRARY_PATH="$UROCE_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# With a sanitized library, a program that is not itself built with ASan must
# load the ASan runtime first: take the one the library was linked with.
UROCE_PRELOAD=
if [[ $UROCE_SANITIZE == 1 ]]; then
	UROCE_PRELOAD=$(ldd "$UROCE_LIB_DIR/libibverbs.so.1" 2>/dev/null |
		awk '/libasan/ { print $3; exit }') || true
	if [[ -z $UROCE_PRELOAD ]]; then
		UROCE_PRELOAD=$(gcc -print-file-name=libasan.so)
	fi
	[[ -e $UROCE_PRELOAD ]] || die "UROCE_SANITIZE=1 but no libasan found"
fi

# Prefix for running a foreign verbs program (ibv_*, perftest, python3) on
# uroce: "${ON_UROCE[@]}" ibv_devinfo. An env command, so it also works
# under timeout and in run_pair.
ON_UROCE=(env)
if [[ -n $UROCE_PRELOAD ]]; then
	ON_UROCE+=("LD_PRELOAD=$UROCE_PRELOAD${LD_PRELOAD:+:$LD_PRELOAD}"
		"ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}")
fi

# Skip the whole test when a tool from a Debian package is missing.
require_cmd() {
	local cmd=$1 pkg=${2:-$1}
	if ! command -v "$cmd" >/dev/null 2>&1; then
		log "SKIP: $cmd not found (install the Debian package $pkg, e.g. scripts/deps.sh)"
		exit 0
	fi
}

# Skip the whole test when a Python module of a Debian package is missing
# (Debian's /usr/bin/python3, not another python3 on PATH).
require_py_module() {
	local mod=$1 pkg=$2
	if ! /usr/bin/python3 -c "import $mod" >/dev/null 2>&1; then
		log "SKIP: /usr/bin/python3 cannot import $mod (install the Debian package $pkg, e.g. scripts/deps.sh)"
		exit 0
	fi
}

# The library must exist: a missing one is a build failure, not a skip.
require_uroce() {
	[[ -e $UROCE_LIB_DIR/libibverbs.so.1 ]] ||
		die "$UROCE_LIB_DIR/libibverbs.so.1 not found: build uroce first"
}

# Name of the first uroce device, from ibv_devices' table.
first_device() {
	local out
	out=$(timeout 30 "${ON_UROCE[@]}" ibv_devices) || {
		log "ibv_devices failed:" "$out" >&2
		return 1
	}
	awk 'NR > 2 && NF >= 1 { print $1; exit }' <<<"$out"
}

# ---- TCP ports -------------------------------------------------------------------

# Each test has its own block of 30 ports, so ctest -j runs tests side by
# side without two servers racing for one port. Tests listed here get fixed
# blocks; any other test gets a block chosen by a hash of its name, in a
# separate range. The sanitized build uses blocks 2000 higher, so both
# builds can be tested at once. A port in use (by anything) is skipped.
declare -A PORT_BLOCK=(
	[tour]=0 [rc_pingpong]=1 [lib]=2 [rc_pingpong_new_api]=3 [srq_pingpong]=4
	[ud_pingpong]=5 [pcap]=6 [stat]=7 [uc_pingpong]=8 [perftest]=9 [rdmacm]=10
)
if [[ -n ${PORT_BLOCK[$TEST_NAME]+set} ]]; then
	block=${PORT_BLOCK[$TEST_NAME]}
else
	block=$((20 + $(cksum <<<"$TEST_NAME" | cut -d' ' -f1) % 40))
fi
NEXT_PORT=$((18610 + block * 30 + (UROCE_SANITIZE == 1 ? 2000 : 0)))
PORT_LIMIT=$((NEXT_PORT + 30))
unset block

port_in_use() {
	ss -Htan 2>/dev/null | awk -v p=":$1" '$4 ~ p "$" { found = 1 } END { exit !found }'
}

# Set PORT to the next port of this test's block that nothing uses.
alloc_port() {
	while ((NEXT_PORT < PORT_LIMIT)); do
		PORT=$NEXT_PORT
		NEXT_PORT=$((NEXT_PORT + 1))
		port_in_use "$PORT" || return 0
	done
	die "no free TCP port left in this test's range"
}

listening() {
	ss -Hltn 2>/dev/null | awk -v p=":$1" '$4 ~ p "$" { found = 1 } END { exit !found }'
}

# ---- running a server/client pair ---------------------------------------------------

show_logs() {
	local name=$1 f
	for f in "$LOG_DIR/$name".server.log "$LOG_DIR/$name".client.log; do
		[[ -e $f ]] || continue
		log "----- ${f##*/} (last 60 lines) -----"
		tail -n 60 "$f"
	done
	log "----- end of logs ($LOG_DIR) -----"
}

explain_rc() {
	case $1 in
	0) echo "exit 0" ;;
	124) echo "TIMED OUT" ;;
	137) echo "killed (SIGKILL)" ;;
	*) echo "exit $1" ;;
	esac
}

# Stop a background process if it is still there; returns its exit code.
reap() {
	local pid=$1 grace=$2 rc=0 t=0
	while kill -0 "$pid" 2>/dev/null && ((t < grace * 10)); do
		sleep 0.1
		t=$((t + 1))
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		sleep 1
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" || rc=$?
	return "$rc"
}

# run_pair NAME SERVER_CMD... -- CLIENT_CMD...
# The server must listen on TCP $PORT (see alloc_port). Returns 0 if both
# sides exit 0; otherwise prints both logs and returns 1. Logs are in
# $LOG_DIR/NAME.{server,client}.log.
run_pair() {
	local name=$1
	shift
	local -a server=() client=()
	while [[ $# -gt 0 && $1 != -- ]]; do
		server+=("$1")
		shift
	done
	[[ ${1-} == -- ]] || die "run_pair $name: no '--' between server and client commands"
	shift
	client=("$@")
	[[ ${#server[@]} -gt 0 && ${#client[@]} -gt 0 ]] || die "run_pair $name: empty command"
	[[ -n ${PORT-} ]] || die "run_pair $name: call alloc_port first"

	local slog=$LOG_DIR/$name.server.log clog=$LOG_DIR/$name.client.log
	local budget=$((LISTEN_TIMEOUT + CLIENT_TIMEOUT + SERVER_GRACE))
	local spid src=0 crc=0 waited=0

	log "=== $name (TCP port $PORT)"
	log "  server: ${server[*]}"
	log "  client: ${client[*]}"

	timeout -k 5 "$budget" "${server[@]}" </dev/null >"$slog" 2>&1 &
	spid=$!

	# Wait until the server listens: then it has set up its side.
	# (READY_CHECK: another test of readiness, e.g. lib_cm.sh's UDP check)
	while ! "${READY_CHECK:-listening}" "$PORT"; do
		if ! kill -0 "$spid" 2>/dev/null || ((waited >= LISTEN_TIMEOUT * 10)); then
			reap "$spid" 0 || src=$?
			log "FAIL: $name: server never listened on port $PORT ($(explain_rc "$src"))"
			show_logs "$name"
			return 1
		fi
		sleep 0.1
		waited=$((waited + 1))
	done

	timeout -k 5 "$CLIENT_TIMEOUT" "${client[@]}" </dev/null >"$clog" 2>&1 || crc=$?
	reap "$spid" "$SERVER_GRACE" || src=$?

	if ((src != 0 || crc != 0)); then
		log "FAIL: $name: server $(explain_rc "$src"), client $(explain_rc "$crc")"
		show_logs "$name"
		return 1
	fi
	log "  both sides exit 0"
	return 0
}

# log_has NAME SIDE REGEX: does NAME's server|client log match (grep -E)?
log_has() {
	grep -Eq -- "$3" "$LOG_DIR/$1.$2.log"
}

# ---- results -----------------------------------------------------------------------

pass() {
	PASSED=$((PASSED + 1))
	log "PASS: $*"
}

fail() {
	FAILED=$((FAILED + 1))
	log "FAIL: $*"
}

# check DESCRIPTION CMD...: run CMD, count it as passed or failed.
check() {
	local what=$1
	shift
	if "$@"; then
		pass "$what"
	else
		fail "$what"
	fi
}

finish() {
	log ""
	log "$TEST_NAME: $PASSED passed, $FAILED failed"
	((FAILED == 0 && PASSED > 0))
}

# ---- self-test (lib.sh run as a script) ------------------------------------------------

selftest_server() {
	/usr/bin/python3 - "$1" "$2" <<'EOF'
import socket, sys
port, rc = int(sys.argv[1]), int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(1)
s.settimeout(30)
c, _ = s.accept()
data = c.recv(100)
print("server got", data.decode().strip())
sys.exit(rc if data.startswith(b"hello") else 3)
EOF
}

selftest_client() {
	exec 3<>"/dev/tcp/127.0.0.1/$1"
	echo hello >&3
	exec 3>&-
	echo "client sent hello"
	return "$2"
}

fails() { ! "$@"; }

selftest() {
	require_cmd ss iproute2
	require_cmd timeout coreutils
	require_cmd /usr/bin/python3 python3
	export -f selftest_server selftest_client
	CLIENT_TIMEOUT=10
	SERVER_GRACE=3

	alloc_port
	check "run_pair passes when both sides exit 0" \
		run_pair ok bash -c "selftest_server $PORT 0" -- bash -c "selftest_client $PORT 0"
	check "the server log is kept" log_has ok server "server got hello"
	check "the client log is kept" log_has ok client "client sent hello"

	log "(the next four runs must fail: FAIL lines and logs are expected)"
	alloc_port
	check "run_pair fails when the client fails" \
		fails run_pair client_fails bash -c "selftest_server $PORT 0" -- bash -c "selftest_client $PORT 7"
	alloc_port
	check "run_pair fails when the server fails" \
		fails run_pair server_fails bash -c "selftest_server $PORT 5" -- bash -c "selftest_client $PORT 0"
	alloc_port
	LISTEN_TIMEOUT=2
	check "run_pair fails when the server never listens" \
		fails run_pair no_listen sleep 30 -- true
	LISTEN_TIMEOUT=20
	alloc_port
	CLIENT_TIMEOUT=2
	check "run_pair fails when the client hangs" \
		fails run_pair client_hangs bash -c "selftest_server $PORT 0" -- sleep 30
	finish
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	selftest
fi
