#!/usr/bin/env bash
# Records the scenarios of evidence_cases.py (issue #30) on one GPU, each on its own with a time
# limit, into RESULTS_DIR/<scenario>/ with its log; the snippet is found at ../torchmem_profile.py.
# Usage: bash run_evidence.sh RESULTS_DIR
set -u
R=$(realpath -m "${1:?results dir}")
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$R/logs"
export PYTHONUNBUFFERED=1 TORCHMEM_RUN_ID=run
cd "$HERE"
{ date -u; nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'; } > "$R/env.txt" 2>&1
scenario() {  # scenario NAME DIR [ENV=...]: one process, 120 s at most
  local name=$1 dir=$2; shift 2
  local t0=$(date +%s.%N)
  env "$@" timeout 120 python3 evidence_cases.py "$name" "$R/$dir" > "$R/logs/$dir.log" 2>&1
  echo "$dir rc=$? s=$(awk "BEGIN{print $(date +%s.%N) - $t0}")" | tee -a "$R/summary.txt"
}
scenario inference_kv_cache inference_kv_cache
scenario bounded_queue_cap bounded_queue_cap
scenario seqlen_cache seqlen_cache
scenario trace_off_leak trace_off_leak TORCHMEM_TRACE=0
scenario hook_every_step hook_every_step
scenario hook_once hook_once
scenario periodic_eval periodic_eval
scenario frag_fraction frag_fraction
scenario frag_fraction frag_fraction_expandable PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
scenario oom_fraction oom_fraction
scenario slow_loader slow_loader
scenario compiled_keeps_logits compiled_keeps_logits
date -u >> "$R/env.txt"
