#!/usr/bin/env bash
# Records the real multi-rank runs of testdata/gpu/multirank on ONE GPU (torchrun, gloo):
#   ddp4_leak         DDP, 4 ranks, rank 2 keeps 1 MiB per step
#   ddp8_clean        DDP, 8 ranks, none leaks
#   fsdp2_leak        FSDP2 fully_shard, 4 ranks, rank 1 keeps 1 MiB per step (runs on gloo with torch 2.11)
# Usage: bash run_multirank.sh RESULTS_DIR. Each run has a time limit and may fail alone.
set -u
R=$(realpath -m "${1:?results dir}")
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$R/logs"
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1 OMP_NUM_THREADS=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
{ date -u; nvidia-smi -L; python3 -c 'import torch, sys; print("python", sys.version.split()[0]); print("torch", torch.__version__, "cuda", torch.version.cuda)'; } > "$R/env.txt" 2>&1
cd "$HERE"
run() {  # run NAME NPROC ARGS...
  local name=$1 n=$2; shift 2
  local t0=$(date +%s.%N)
  TORCHMEM_RUN_ID=$name timeout "${TMO:-120}" torchrun --standalone --nproc_per_node="$n" \
    ddp_gloo_ranks.py "$R/$name" "$@" > "$R/logs/$name.log" 2>&1
  local rc=$?
  echo "== $name nproc=$n rc=$rc seconds=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}")" | tee -a "$R/summary.txt"
  [ $rc -eq 0 ] || { echo "FAILED $name"; tail -25 "$R/logs/$name.log"; }
}
TMO=80 run ddp4_leak 4 --leaky-rank 2
TMO=100 run ddp8_clean 8
TMO=80 run fsdp2_leak 4 --fsdp2 --leaky-rank 1
du -sh "$R"/* 2>/dev/null
