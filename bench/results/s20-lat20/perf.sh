#!/bin/bash
# perf.sh TREE TEST N OUT
t=$1 test=$2 n=$3 out=$4
bin=/tmp/lat20/$t/build/bin/uroce
P=$((30000 + RANDOM % 10000))
env UROCE_SHM=0 taskset -c 0 $bin run -- $test -s 2 -n $n -d uroce_lo -x 0 -p $P -F > /tmp/lat20/pf.srv 2>&1 &
for i in $(seq 100); do ss -ltnH "sport = :$P" | grep -q . && break; sleep 0.02; done
env UROCE_SHM=0 taskset -c 1 perf record -q -e cpu-clock:u -F 20000 -g -o $out $bin run -- $test -s 2 -n $n -d uroce_lo -x 0 -p $P -F 127.0.0.1 > /tmp/lat20/pf.cli 2>&1
wait
echo "$t $test typ $(awk '/#bytes/{f=1;next} f&&NF>=5{print $5; exit}' /tmp/lat20/pf.cli)"
