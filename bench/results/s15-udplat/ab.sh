#!/bin/bash
# ab.sh OUTFILE MODE REPS "TESTS" NAME=UROCE_BIN ... ; env EXTRA_ENV="K=V ..." for all runs
# FLOORS="none unconn ...": the floor once per `udp_pingpong -o` list each rep, order rotated
# (session 21); UDPPP: the udp_pingpong binary (default /tmp/udplat/udp_pingpong)
# MODE: lo | veth.  TESTS: read5000 read100 atomic5000 atomic100 send write
out=$1 mode=$2 reps=$3 tests=$4; shift 4
trees=("$@")
PORT=$((20000 + RANDOM % 20000))
RAW=${out%.txt}.raw; mkdir -p "$RAW"
NSA="" NSB="" PRE_S=() PRE_C=() DEV=uroce_lo ADDR=127.0.0.1 ENVX=(UROCE_SHM=0)
cleanup() { [[ -n $NSA ]] && ip netns del $NSA 2>/dev/null; [[ -n $NSB ]] && ip netns del $NSB 2>/dev/null; }
trap cleanup EXIT
if [[ $mode == veth ]]; then
	NSA=rdlA$$ NSB=rdlB$$ x=$(($$ % 200 + 20))
	ip netns add $NSA && ip netns add $NSB && ip link add rdl$$a type veth peer name rdl$$b &&
	ip link set rdl$$a netns $NSA && ip link set rdl$$b netns $NSB &&
	ip -n $NSA link set rdl$$a name urbv0 && ip -n $NSB link set rdl$$b name urbv0 &&
	ip -n $NSA addr add 10.198.$x.1/24 dev urbv0 && ip -n $NSB addr add 10.198.$x.2/24 dev urbv0 &&
	ip -n $NSA link set lo up && ip -n $NSB link set lo up &&
	ip -n $NSA link set urbv0 mtu 1500 up && ip -n $NSB link set urbv0 mtu 1500 up || exit 1
	PRE_S=(ip netns exec $NSA) PRE_C=(ip netns exec $NSB) DEV=uroce_urbv0 ADDR=10.198.$x.1
	ENVX+=(UROCE_IFACES=urbv0)
fi
wait_listen() { # port pid
	for i in $(seq 100); do
		"${PRE_S[@]}" ss -ltnH "sport = :$1" 2>/dev/null | grep -q . && return 0
		kill -0 $2 2>/dev/null || return 1; sleep 0.05
	done; return 1
}
UDPPP=${UDPPP:-/tmp/udplat/udp_pingpong}
floor() { # [udp_pingpong -o list]
	PORT=$((PORT + 1))
	local ps=() pc=() o=()
	[[ -n $PIN ]] && ps=(taskset -c 0) pc=(taskset -c 1)
	[[ -n $1 ]] && o=(-o $1)
	"${PRE_S[@]}" "${ps[@]}" timeout 30 $UDPPP server -b $ADDR -p $PORT -i 5 "${o[@]}" >/dev/null 2>&1 &
	local sp=$!; sleep 0.1
	"${PRE_C[@]}" "${pc[@]}" timeout 20 $UDPPP client -H $ADDR -p $PORT -s 2 -n 5000 -w 1000 -T 1 "${o[@]}" 2>&1 |
		sed -n 's/.*median_us=\([^ ]*\).*/\1/p'
	wait $sp 2>/dev/null
}
args_of() {
	case $1 in
	read5000) echo "ib_read_lat -s 2 -n 5000" ;; read100) echo "ib_read_lat -s 2 -n 100" ;;
	atomic5000) echo "ib_atomic_lat -n 5000" ;; atomic100) echo "ib_atomic_lat -n 100" ;;
	send) echo "ib_send_lat -s 2 -n 5000" ;; write) echo "ib_write_lat -s 2 -n 5000" ;;
	esac
}
one() { # tree-name bin[@K=V,K=V] test rep
	PORT=$((PORT + 1))
	local base=$RAW/$4-$3-$1 a bin=${2%%@*} te=""; a=$(args_of $3)
	[[ $2 == *@* ]] && te=${2#*@} && te=${te//,/ }
	local ps=() pc=()
	[[ -n $PIN ]] && ps=(taskset -c 0) pc=(taskset -c 1)
	"${PRE_S[@]}" "${ps[@]}" env "${ENVX[@]}" $EXTRA_ENV $te timeout 60 $bin run -- $a -d $DEV -x 0 -p $PORT -F >$base.srv 2>&1 &
	local sp=$!
	wait_listen $PORT $sp || { echo "nolisten"; kill $sp 2>/dev/null; return; }
	"${PRE_C[@]}" "${pc[@]}" env "${ENVX[@]}" $EXTRA_ENV $te timeout 60 $bin run -- $a -d $DEV -x 0 -p $PORT -F $ADDR >$base.cli 2>&1 &
	local cp=$! spp
	if [[ -n $STAT ]]; then
		spp=$(pgrep -f -- "^ib_[a-z]+_lat .*-p $PORT -F\$" | head -1)
		while kill -0 $cp 2>/dev/null; do "${PRE_S[@]}" $bin stat $spp >$base.stat.tmp 2>&1 && mv $base.stat.tmp $base.stat; sleep 0.05; done
	fi
	wait $cp
	wait $sp 2>/dev/null
	awk 'f && $1 ~ /^[0-9]+$/ && NF >= 5 { print $5; exit } /#bytes/ { f = 1 }' $base.cli
}
echo "# $(date -u +%T) start load $(cut -d' ' -f1-3 /proc/loadavg) mode $mode trees ${trees[*]} env $EXTRA_ENV pin ${PIN:-no}" >>$out
for ((r = 1; r <= reps; r++)); do
	if [[ -n $FLOORS ]]; then
		fv=($FLOORS) line="rep $r floor"
		for ((k = 0; k < ${#fv[@]}; k++)); do
			v=${fv[$(((k + r - 1) % ${#fv[@]}))]}
			line+=" $v=$(floor $v)"
		done
		echo "$line" >>$out
	else
		echo "rep $r floor $(floor)" >>$out
	fi
	for t in $tests; do
		line="rep $r $t"
		n=${#trees[@]}
		for ((k = 0; k < n; k++)); do
			tr=${trees[$(((k + r - 1) % n))]}
			line+=" ${tr%%=*}=$(one ${tr%%=*} ${tr#*=} $t $r)"
		done
		echo "$line" >>$out
	done
done
echo "# $(date -u +%T) end load $(cut -d' ' -f1-3 /proc/loadavg)" >>$out
