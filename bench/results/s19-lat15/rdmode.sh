#!/bin/bash
# rdmode.sh BIN OUT REPS : ib_read_lat -s 2 -n $N loopback UROCE_SHM=0 UROCE_LOG=info, placement sampled
bin=$1 out=$2 reps=$3
for ((r=1; r<=reps; r++)); do
P=$((30000 + RANDOM % 10000))
ps=() pc=()
[[ -n $PIN ]] && ps=(taskset -c 0) pc=(taskset -c 1)
env UROCE_SHM=0 UROCE_LOG=info $EXTRA "${ps[@]}" $bin run -- ib_read_lat -s 2 -n ${N:-5000} -d uroce_lo -x 0 -p $P -F > $out.r$r.srv 2>&1 &
for i in $(seq 100); do ss -ltnH "sport = :$P" | grep -q . && break; sleep 0.02; done
env UROCE_SHM=0 UROCE_LOG=info $EXTRA "${pc[@]}" $bin run -- ib_read_lat -s 2 -n ${N:-5000} -d uroce_lo -x 0 -p $P -F 127.0.0.1 > $out.r$r.cli 2>&1 &
cp=$!
for i in $(seq 50); do cpid=$(pgrep -f -- "^ib_read_lat .*-p $P -F 127" | head -1); [[ -n $cpid ]] && break; sleep 0.01; done
spid=$(pgrep -f -- "^ib_read_lat .*-p $P -F\$" | head -1)
python3 /tmp/lat15/samp.py $spid $cpid ${IV:-3} > $out.r$r.samp 2>&1
wait
tt=$(awk 'f && $1 ~ /^[0-9]+$/ && NF >= 5 { print $5; exit } /#bytes/ { f = 1 }' $out.r$r.cli)
echo "rep $r t_typical $tt"
cat $out.r$r.samp
done
