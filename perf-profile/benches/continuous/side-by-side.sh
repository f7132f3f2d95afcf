#!/bin/bash
# side-by-side.sh SECS LABEL:BINARY:MODE ... : runs each profiler at once, system-wide at 99 Hz, --every 10,
# --symbolize MODE, cuts written as folded files under $OUT; reads utime+stime and VmRSS every 5 s and
# prints CPU of one CPU from 60 s to the end and RSS at 60 s, at the end and at most after 60 s.
secs=$1; shift
tck=$(getconf CLK_TCK)
declare -A pids
out=${OUT:-/tmp/pp-side.$$}; mkdir -p $out
for spec in "$@"; do
  IFS=: read label bin mode <<<"$spec"
  mkdir -p $out/$label
  $bin -a -F 99 --every 10 --symbolize $mode -o $out/$label/cut-{n}.folded -d $secs 2>$out/$label.err >/dev/null &
  pids[$label]=$!
done
start=$(date +%s)
while :; do
  t=$(( $(date +%s) - start ))
  alive=0
  for l in "${!pids[@]}"; do
    p=${pids[$l]}
    if [ -r /proc/$p/stat ]; then
      alive=1
      read -r ut st <<<"$(awk '{print $14, $15}' /proc/$p/stat)"
      rss=$(awk '/VmRSS/{print $2}' /proc/$p/status)
      echo "$t $ut $st $rss" >> $out/$l.pts
    fi
  done
  [ $alive = 0 ] && break
  [ $t -gt $((secs+20)) ] && break
  sleep 5
done
wait
for l in "${!pids[@]}"; do
  awk -v tck=$tck -v secs=$secs -v l=$l '$1>=60 && $1<=secs-1 {if(!s){t0=$1;c0=$2+$3;r0=$4;s=1} t1=$1;c1=$2+$3;r1=$4; if($4>mx)mx=$4}
    END{printf "%-10s CPU %.2f%% (60..%d s)  RSS %d -> %d KiB (max %d)\n", l, (c1-c0)/tck/(t1-t0)*100, t1, r0, r1, mx}' $out/$l.pts
done
echo "load: $(cat /proc/loadavg)  dir $out"
