#!/bin/bash
# st.sh OUTDIR REPS : sys_timing of floor(none), floor(all), uroce ib_send_lat (tree $T, default base), pinned
d=$1 reps=$2; mkdir -p $d; T=${T:-/tmp/base-lat21/build/bin/uroce}
PORT=$((40000 + RANDOM % 10000)); S=/tmp/lat21/sys_timing.so B=/tmp/lat21/udp_pingpong
echo "# $(date -u +%T) start load $(cut -d' ' -f1-3 /proc/loadavg)" >>$d/log
for ((r=1;r<=reps;r++)); do
 for o in ${OS:-none all}; do PORT=$((PORT+1))
  LD_PRELOAD=$S taskset -c 0 timeout 30 $B server -b 127.0.0.1 -p $PORT -i 5 -o $o 2>$d/fl-$o-$r.srv >/dev/null & sp=$!; sleep 0.1
  LD_PRELOAD=$S taskset -c 1 timeout 20 $B client -H 127.0.0.1 -p $PORT -s 2 -n 20000 -w 1000 -T 2 -o $o >$d/fl-$o-$r.cli 2>&1; wait $sp
 done
 for t in ${TREES:-send}; do PORT=$((PORT+1)); a="ib_${t}_lat -s 2 -n 20000"
  LD_PRELOAD=$S UROCE_SHM=0 taskset -c 0 timeout 60 $T run -- $a -d uroce_lo -x 0 -p $PORT -F >$d/u$t-$r.srv 2>&1 & sp=$!; sleep 1
  LD_PRELOAD=$S UROCE_SHM=0 taskset -c 1 timeout 60 $T run -- $a -d uroce_lo -x 0 -p $PORT -F 127.0.0.1 >$d/u$t-$r.cli 2>&1; wait $sp
 done
done
echo "# $(date -u +%T) end load $(cut -d' ' -f1-3 /proc/loadavg)" >>$d/log
