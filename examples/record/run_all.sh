#!/usr/bin/env bash
# Records every scenario of testdata/gpu on one host with 2 GPUs (1 GPU: DDP is skipped).
# Usage: bash run_all.sh RESULTS_DIR    (run from examples/record; examples/ must hold the snippet)
# Each scenario runs on its own and may fail alone; logs land next to its files.
set -u
R=$(realpath -m "${1:?results dir}")
HERE=$(cd "$(dirname "$0")" && pwd)
EX=$(cd "$HERE/.." && pwd)
mkdir -p "$R"
# NVLink multicast stays off on shared hosts (it can take the GPUs out of service).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
TORCHRUN="python3 -m torch.distributed.run --standalone --nproc_per_node=2"

{
  date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import torch, sys; print("python", sys.version.split()[0]); print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
  uname -r
} > "$R/env.txt" 2>&1

mkdir -p "$R/nvidia_smi"
nvidia-smi --query-gpu=index,timestamp,memory.used,memory.total,utilization.gpu,utilization.memory \
  --format=csv -lms 200 > "$R/nvidia_smi/nvidia_smi.csv" 2>"$R/nvidia_smi/stderr.txt" &
SMI_PID=$!
echo "$SMI_PID" > "$R/nvidia_smi/pid"

scenario() {  # scenario NAME COMMAND...: run with a time limit, log, record the exit code
  local name=$1; shift
  local t0=$(date +%s.%N)
  echo "== $name: $*" | tee -a "$R/summary.txt"
  timeout 150 "$@" > "$R/logs/$name.log" 2>&1
  local rc=$?
  echo "   rc=$rc seconds=$(awk "BEGIN{print $(date +%s.%N) - $t0}")" | tee -a "$R/summary.txt"
}
mkdir -p "$R/logs"

# (a) the snippet, used by a user's script
P="$R/snippet_proof"
cd "$EX"
scenario snippet_gpu python3 train_small.py --out "$P/gpu"
TORCHMEM=0 scenario snippet_disabled python3 train_small.py --out "$P/disabled"
if [ -e "$P/disabled" ]; then echo "   FAIL: TORCHMEM=0 wrote $P/disabled" | tee -a "$R/summary.txt";
else echo "   ok: TORCHMEM=0 wrote nothing" | tee -a "$R/summary.txt"; fi
CUDA_VISIBLE_DEVICES= scenario snippet_no_gpu python3 train_small.py --out "$P/no_gpu"
scenario snippet_oom_escape python3 train_small.py --out "$P/oom_escape" --oom-at 8
if [ "$NGPU" -ge 2 ]; then
  scenario snippet_ddp $TORCHRUN train_small.py --ddp --steps 7 --repeat 1 --out "$P/ddp"
fi

# (b)-(e) planted patterns, recorded with plain torch.profiler usage
cd "$HERE"
scenario leak_hook_every_step python3 leak_hook_every_step.py "$R/leak_hook_every_step"
scenario leak_retain_graph python3 leak_retain_graph.py "$R/leak_retain_graph"
if [ "$NGPU" -ge 2 ]; then
  scenario ddp_one_rank_leaks $TORCHRUN ddp_one_rank_leaks.py "$R/ddp_one_rank_leaks"
fi
scenario amp_item_sync_slow_loader python3 amp_item_sync_slow_loader.py "$R/amp_item_sync_slow_loader"
scenario oom python3 oom.py "$R/oom"
for v in base head head_leak; do
  scenario diff_$v python3 diff_train.py "$R/diff_pair/$v" $v
done
scenario diff_summary python3 diff_train.py --summary "$R/diff_pair"

kill "$SMI_PID" 2>/dev/null; wait "$SMI_PID" 2>/dev/null; rm -f "$R/nvidia_smi/pid"
date -u >> "$R/env.txt"
du -ab "$R" | sort -k2 > "$R/sizes.txt"
