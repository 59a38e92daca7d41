#!/usr/bin/env bash
# Issue 17.6: the snippet detaches CUPTI after its last profiled cycle (TEARDOWN_CUPTI=1 for that
# stop only). Earlier runs with TEARDOWN_CUPTI=1 set for the whole process hung at exit; this runs
# every way a run ends, each under a time limit: rc 124 = hung. Usage: bash teardown_exits.sh DIR
set -u
R=$(realpath -m "${1:?results dir}")
HERE=$(cd "$(dirname "$0")" && pwd)
EX=$(cd "$HERE/.." && pwd)
mkdir -p "$R/logs"
case_() {  # case_ NAME COMMAND...
  local name=$1; shift
  local t0=$(date +%s.%N)
  timeout "${TMO:-90}" "$@" > "$R/logs/$name.log" 2>&1
  local rc=$?
  echo "== $name rc=$rc seconds=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}") files=$(ls "$R/$name" 2>/dev/null | wc -l)" | tee -a "$R/summary.txt"
  grep -E '^\{' "$R/logs/$name.log" | tail -1 | tee -a "$R/summary.txt"
  [ $rc -eq 0 ] || tail -3 "$R/logs/$name.log"
}
cd "$EX"
case_ window_then_steps python3 train_small.py --out "$R/window_then_steps" --repeat 1 --steps 14
case_ two_cycles python3 train_small.py --out "$R/two_cycles" --repeat 2 --steps 16
case_ window_is_last_step python3 train_small.py --out "$R/window_is_last_step" --repeat 1 --steps 7
TORCHMEM_REPEAT=0 case_ cycles_until_exit python3 train_small.py --out "$R/cycles_until_exit" --steps 12
case_ oom_in_window python3 train_small.py --out "$R/oom_in_window" --oom-at 4 --repeat 1
case_ oom_after_window python3 train_small.py --out "$R/oom_after_window" --oom-at 10 --repeat 1
cd "$HERE"
case_ user_profiler python3 teardown_exits.py user_profiler "$R/user_profiler"
case_ launch_cost python3 teardown_exits.py launch_cost "$R/launch_cost"
TEARDOWN_CUPTI=0 case_ launch_cost_keep_cupti python3 teardown_exits.py launch_cost "$R/launch_cost_keep_cupti"
TMO=240 case_ cudagraphs python3 teardown_exits.py cudagraphs "$R/cudagraphs"
