#!/usr/bin/env bash
# Records the snippet-v2 scenarios of testdata/gpu (issues 14, 15, 17, 22, 25) on one GPU, and
# measures the snippet's cost. Usage: bash run_snippet_v2.sh RESULTS_DIR [GROUP...]
# Groups: env checks scenarios frameworks overhead (default: all). Each scenario runs on its own
# with a time limit and may fail alone; its log lands in RESULTS_DIR/logs.
set -u
R=$(realpath -m "${1:?results dir}"); shift
GROUPS_WANTED=${*:-"env checks scenarios frameworks overhead"}
HERE=$(cd "$(dirname "$0")" && pwd)
EX=$(cd "$HERE/.." && pwd)
mkdir -p "$R/logs"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
want() { case " $GROUPS_WANTED " in *" $1 "*) return 0;; esac; return 1; }
scenario() {  # scenario NAME COMMAND...: run with a time limit, log, record the exit code
  local name=$1; shift
  local t0=$(date +%s.%N)
  timeout "${TMO:-150}" "$@" > "$R/logs/$name.log" 2>&1
  local rc=$?
  echo "== $name rc=$rc seconds=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}")" | tee -a "$R/summary.txt"
  [ $rc -eq 0 ] || tail -5 "$R/logs/$name.log"
}

if want env; then
  { date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c 'import torch, sys; print("python", sys.version.split()[0]); print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
    python3 -m pip list 2>/dev/null | grep -i -E '^(torch|transformers|accelerate|lightning|pytorch-lightning|numpy) '
    uname -r; } > "$R/env.txt" 2>&1
  cat "$R/env.txt"
fi

cd "$HERE"
if want checks; then
  S="$R/snippet_v2"
  scenario check_stats python3 snippet_checks.py stats
  cd "$EX"
  scenario v2_gpu python3 train_small.py --out "$S/gpu"
  scenario v2_oom_escape python3 train_small.py --out "$S/oom_escape" --oom-at 8
  # A second run into the same folder: nothing of the first may be overwritten.
  scenario v2_rerun_1 python3 train_small.py --out "$S/rerun" --repeat 1 --steps 6
  sleep 1
  scenario v2_rerun_2 python3 train_small.py --out "$S/rerun" --repeat 1 --steps 6
  # Rank 3 of a job that profiles ranks 0 and 7 only: steps log, no trace, no snapshot.
  RANK=3 TORCHMEM_RANKS=0,7 scenario v2_rank_not_picked python3 train_small.py --out "$S/rank_not_picked" --steps 6
  RANK=7 TORCHMEM_RANKS=0,7 scenario v2_rank_picked python3 train_small.py --out "$S/rank_picked" --steps 6 --repeat 1
  TORCHMEM_CPP_STACKS=1 scenario v2_cpp_stacks python3 train_small.py --out "$S/cpp_stacks" --steps 6 --repeat 1
  cd "$HERE"
  for f in "$S"/gpu/*.snapshot.pickle.gz "$S"/cpp_stacks/*.snapshot.pickle.gz "$S"/oom_escape/*.snapshot.pickle.gz; do
    [ -e "$f" ] && python3 snippet_checks.py snapshot "$f" | tee -a "$R/summary.txt"
  done
  (cd "$S" && find . -type f | sort | xargs ls -l) >> "$R/summary.txt"
fi

if want scenarios; then
  for s in late_start_leak small_leak_big_model grad_accum peak_above_steady eval_keeps_logits no_zero_grad logged_memory_summary; do
    scenario "$s" python3 "$s.py" "$R/$s"
  done
  for m in blocking nonblocking; do
    scenario "pinned_$m" python3 pinned_copies.py "$R/pinned_$m" "$m"
  done
fi

if want frameworks; then
  for v in leak clean; do
    scenario "hf_trainer_$v" python3 hf_trainer.py "$R/hf_trainer_$v" "$v"
  done
  scenario lightning_leak python3 lightning_callback.py "$R/lightning_leak"
fi
if want trainer_oom; then  # the OOM ends trainer.train(): the callback's files come at exit
  scenario hf_trainer_oom python3 hf_trainer.py "$R/hf_trainer_oom" oom
  ls -l "$R/hf_trainer_oom" | tee -a "$R/summary.txt"
  for f in "$R"/hf_trainer_oom/*.snapshot.pickle.gz; do
    [ -e "$f" ] && python3 snippet_checks.py snapshot "$f" | tee -a "$R/summary.txt"
  done
fi

if want overhead; then
  O="$R/overhead.jsonl"
  for round in 1 2 3; do
    for s in sync nosync; do
      scenario "overhead_default_${s}_$round" python3 snippet_overhead.py "$s" default "$O"
    done
  done
  for v in ${OVERHEAD_VARIANTS:-no_history trace_off cpp_stacks}; do
    scenario "overhead_$v" python3 snippet_overhead.py sync "$v" "$O"
  done
fi
du -ab "$R" | sort -k2 > "$R/sizes.txt"
