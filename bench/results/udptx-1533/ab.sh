#!/bin/bash
# A/B: ib_write_bw/ib_send_bw 64 KiB (UROCE_SHM=0), loopback and veth (MTU 1500), CPU of both processes; qperf tcp_bw
# usage: udptx-ab.sh OUTFILE PAIRS
OUT=$1; PAIRS=${2:-4}; N=${N:-16384}
A=/tmp/base-udprx/build/bin/uroce; B=/work/wt-udptx/build/bin/uroce
NSA=udtxA$$ NSB=udtxB$$
ip netns add $NSA; ip netns add $NSB
ip link add udtx$$a type veth peer name udtx$$b
ip link set udtx$$a netns $NSA; ip link set udtx$$b netns $NSB
ip -n $NSA link set udtx$$a name urbv0; ip -n $NSB link set udtx$$b name urbv0
ip -n $NSA addr add 10.198.7.1/24 dev urbv0; ip -n $NSB addr add 10.198.7.2/24 dev urbv0
for n in $NSA $NSB; do ip -n $n link set lo up; ip -n $n link set urbv0 mtu 1500 up; done
trap 'ip netns del $NSA; ip netns del $NSB; kill $QP1 $QP2 2>/dev/null' EXIT
ip netns exec $NSA qperf >/dev/null 2>&1 & QP1=$!
qperf >/dev/null 2>&1 & QP2=$! # may fail if one runs already: fine
sleep 0.5
port=19000
one() { # label uroce test where
	local label=$1 U=$2 t=$3 w=$4 ps=() pc=() ex=() dev=uroce_lo addr=127.0.0.1 env=(UROCE_SHM=0)
	port=$((port+1))
	[[ $w == lo1024 ]] && ex=(-m 1024); if [[ $w == veth ]]; then ps=(ip netns exec $NSA); pc=(ip netns exec $NSB); dev=uroce_urbv0; addr=10.198.7.1; env+=(UROCE_IFACES=urbv0); fi
	"${ps[@]}" env "${env[@]}" $XENV timeout 60 /usr/bin/time -f '%U %S' -o /tmp/udtx.srv.time $U run -- $t -s 65536 -n $N "${ex[@]}" -d $dev -x 0 -p $port -F >/tmp/udtx.srv 2>&1 &
	local sp=$!; sleep 0.4
	"${pc[@]}" env "${env[@]}" $XENV timeout 60 /usr/bin/time -f '%U %S' -o /tmp/udtx.cli.time $U run -- $t -s 65536 -n $N "${ex[@]}" -d $dev -x 0 -p $port -F $addr >/tmp/udtx.cli 2>&1
	wait $sp
	local bw=$(awk 'f && $1 ~ /^[0-9]+$/ && NF >= 5 { print $4*1.048576; exit } /#bytes/ { f = 1 }' /tmp/udtx.cli)
	local cpu=$(cat /tmp/udtx.srv.time /tmp/udtx.cli.time | awk -v gb=$(awk "BEGIN{print $N*65536/1e9}") '/^[0-9.]+ [0-9.]+$/{s+=$1+$2} END{printf "%.3f", s/gb}')
	echo "$label $t $w bw_MBps=$bw cpu_s_per_GB=$cpu" >>$OUT
}
echo "# start $(date -u +%T) load: $(uptime)" >>$OUT
for ((p=1;p<=PAIRS;p++)); do
	for side in A B; do
		[[ $side == A ]] && U=$A || U=$B
		[[ $((p%2)) == 0 ]] && { [[ $side == A ]] && U=$B || U=$A; }
		lab=$([[ $U == $A ]] && echo main || echo udptx)
		for w in ${WHERE:-lo veth}; do for t in ib_write_bw ib_send_bw; do one "p$p $lab" $U $t $w; done; done
	done
	[[ -n $NOQP ]] || echo "p$p qperf lo $(qperf -t 2 -m 65536 127.0.0.1 tcp_bw | awk '/bw/{print $3,$4}')" >>$OUT
	[[ -n $NOQP ]] || echo "p$p qperf veth $(ip netns exec $NSB qperf -t 2 -m 65536 10.198.7.1 tcp_bw | awk '/bw/{print $3,$4}')" >>$OUT
done
echo "# end $(date -u +%T) load: $(uptime)" >>$OUT
