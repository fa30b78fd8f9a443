#!/bin/bash
# tt.sh BIN OUT N TEST: pinned, trace on both sides
bin=$1 out=$2 n=$3 test=${4:-ib_send_lat}
P=$((30000 + RANDOM % 10000))
env UROCE_SHM=0 $EXTRA taskset -c 0 $bin run -- $test -s 2 -n $n -d uroce_lo -x 0 -p $P -F > $out.srv 2>&1 &
for i in $(seq 100); do ss -ltnH "sport = :$P" | grep -q . && break; sleep 0.02; done
env UROCE_SHM=0 $EXTRA taskset -c 1 $bin run -- $test -s 2 -n $n -d uroce_lo -x 0 -p $P -F 127.0.0.1 > $out.cli 2>&1
wait
