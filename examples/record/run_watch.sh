#!/usr/bin/env bash
# The watchdog's device proof and its cost (issue 34), in one go:
#   run_watch.sh OUT
# OUT/watch/<case>/   what the snippet wrote for watch_proof.py's cases, with truth.json,
#                     alarms.json (on_alarm) and notify.jsonl (TORCHMEM_NOTIFY's stdin)
# OUT/watch/logs/     each case's stdout and stderr: the alarm lines as they appear in a log
# OUT/watch/cost.jsonl  watch_cost.py: small x3 (separate processes), large x1
set -u
here="$(cd "$(dirname "$0")" && pwd)"
out="$1"
mkdir -p "$out/watch/logs"
export PYTHONUNBUFFERED=1
cd "$here"
for case in leak leak_profile healthy near_oom queue9 periodic ddp; do
  dir="$out/watch/$case"
  mkdir -p "$dir"
  extra=()
  [[ $case == leak_profile ]] && extra=(TORCHMEM_ON_LEAK=profile)
  launcher=python3
  [[ $case == ddp ]] && launcher="python3 -m torch.distributed.run --nproc-per-node 2"
  env ${extra[@]+"${extra[@]}"} TORCHMEM_NOTIFY="python3 $here/record_stdin.py $dir/notify.jsonl" \
    timeout 120 $launcher watch_proof.py "$case" "$dir" > "$out/watch/logs/$case.log" 2>&1 || echo "FAILED $case rc=$?"
  tail -n 3 "$out/watch/logs/$case.log"
done
for f in "$out"/watch/leak/*.leak.snapshot.pickle.gz; do
  python3 snippet_checks.py snapshot "$f" || echo "FAILED snapshot check"
done
[[ "${COST:-1}" == 1 ]] || exit 0
for rep in 1 2 3; do
  timeout 120 python3 watch_cost.py small "$out/watch/cost.jsonl" || echo "FAILED cost small $rep"
done
[[ "${COST_LARGE:-1}" == 1 ]] || exit 0
timeout 150 python3 watch_cost.py large "$out/watch/cost.jsonl" || echo "FAILED cost large"
