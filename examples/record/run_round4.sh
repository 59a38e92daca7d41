#!/usr/bin/env bash
# Records round4_cases.py's scenarios (issues #38, #40, #41) and the multi-rank jobs on one GPU,
# each in its own process with a time limit, 8 at a time, into RESULTS_DIR/<scenario>/.
# Corpus scenarios keep only the steps log (no profiler, no allocator history) unless listed
# with other settings below. Multi-rank jobs run under torchrun with the snippet's defaults
# (no TORCHMEM_RUN_ID): the run id must come from the job itself.
# Usage: bash run_round4.sh RESULTS_DIR
set -u
R=$(realpath -m "${1:?results dir}")
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$R/logs"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 TORCHMEM_RUN_ID=run
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd "$HERE"
{ date -u; nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'; } > "$R/env.txt" 2>&1
one() {  # one DIR SCENARIO [ENV=...]
  local dir=$1 name=$2; shift 2
  local t0=$(date +%s.%N)
  env "$@" timeout 200 python3 round4_cases.py "$name" "$R/$dir" > "$R/logs/$dir.log" 2>&1
  echo "$dir rc=$? s=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}")" >> "$R/summary.txt"
}
export -f one; export R
Q="TORCHMEM_TRACE=0 TORCHMEM_HISTORY=0"
{
for s in mlp_clean cnn_clean lm_clean lm_dynamic_seqlen_clean compile_default_clean \
  compile_reduce_overhead_clean compile_dynamic_clean amp_gradscaler_clean checkpointing_clean \
  grad_accum_clean eval_spikes_clean warmup_ramp_clean queue_fill_3_clean queue_fill_10_clean \
  queue_fill_30_clean lru_cache_clean late_leak_30 tiny_leak_churn staircase_p2 staircase_p7 \
  staircase_p25 accelerating_leak loss_kept_with_graph pinned_host_leak pinned_loader_clean \
  expandable_off_clean; do echo "$s $s $Q"; done
echo "expandable_on_clean expandable_on_clean $Q PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
echo "alloc_conf_conflict expandable_on_clean $Q PYTORCH_ALLOC_CONF=expandable_segments:False PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
for s in uneven_leak_late compiled_keeps_logits_40 eval5_keeps_outputs optimizer_recreated hook_lambda_traced; do echo "$s $s"; done
echo "retries_under_cap retries_under_cap TORCHMEM_TRACE=0"
echo "reserved_growth_flat_allocated reserved_growth_flat_allocated TORCHMEM_TRACE=0"
echo "leak_to_oom_fraction leak_to_oom_fraction TORCHMEM_TRACE=0 TORCHMEM_HISTORY=always"
echo "history_overflow history_overflow TORCHMEM_TRACE=0 TORCHMEM_MAX_ENTRIES=3000"
echo "snapshot_series_nohistory snapshot_series_nohistory"
echo "snapshot_fields snapshot_fields"
} > "$R/jobs.txt"
xargs -P 8 -L 1 bash -c 'one "$@"' _ < "$R/jobs.txt"
# Multi-rank jobs, two at a time (ports: --standalone picks its own; the static one 29533).
ranks() {  # ranks DIR NPROC SCRIPT-ARGS...
  local dir=$1 n=$2; shift 2
  local t0=$(date +%s.%N)
  env -u TORCHMEM_RUN_ID timeout 200 torchrun --standalone --nproc_per_node="$n" "$@" > "$R/logs/$dir.log" 2>&1
  echo "$dir rc=$? s=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}")" >> "$R/summary.txt"
}
ranks ddp4_defaults_leak 4 ddp_gloo_ranks.py "$R/ddp4_defaults_leak" --leaky-rank 2 --steps 20 &
ranks fsdp2_defaults_leak 2 ddp_gloo_ranks.py "$R/fsdp2_defaults_leak" --fsdp2 --leaky-rank 1 --steps 20 &
wait
ranks titan_layout 2 titan_layout.py "$R/titan_layout" titan &
ranks tune_layout 2 titan_layout.py "$R/tune_layout" tune &
t0=$(date +%s.%N)
env -u TORCHMEM_RUN_ID timeout 200 torchrun --nnodes=1 --nproc_per_node=2 --master_port=29533 \
  ddp_gloo_ranks.py "$R/ddp2_static_rdzv_leak" --leaky-rank 1 --steps 20 > "$R/logs/ddp2_static_rdzv_leak.log" 2>&1
echo "ddp2_static_rdzv_leak rc=$? s=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}")" >> "$R/summary.txt"
wait
date -u >> "$R/env.txt"
sort "$R/summary.txt"
