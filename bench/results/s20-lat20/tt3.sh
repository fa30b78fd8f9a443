#!/bin/bash
for r in 1 2 3 4; do
  for test in ib_send_lat ib_write_lat; do
    order="tta ttb ttc"; (( r % 2 == 0 )) && order="ttc ttb tta"
    for t in $order; do
      if [[ $t == ttc ]]; then EXTRA=UROCE_RC_FAST=0 /tmp/lat20/tt.sh ttb $test 20000 | sed 's/^ttb/ttc/'; else EXTRA= /tmp/lat20/tt.sh $t $test 20000; fi
    done
  done
done
