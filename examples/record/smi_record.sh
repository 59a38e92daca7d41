#!/usr/bin/env bash
# Records the nvidia-smi logs of issue 33 on one GPU: a healthy training run and a leaking one
# (start, plateau, exit), and three processes sharing the GPU (a holder that outlives the trainer:
# a zombie; a trainer; a process that grows). Each scenario has its own GPU log
# (--query-gpu, 200 ms), compute-apps log (--query-compute-apps, 200 ms), the trainer's steps log
# (examples/torchmem_profile.py) and torch's own per-step numbers (torch_mem.jsonl).
#   bash smi_record.sh RESULTS_DIR [SCENARIO...]   (healthy leak shared; default all)
set -u
R=$(realpath -m "${1:?results dir}"); shift
WANT=" ${*:-healthy leak shared} "
want() { case "$WANT" in *" $1 "*) return 0;; esac; return 1; }
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$R"
export PYTHONUNBUFFERED=1
GPU_Q=timestamp,index,uuid,pci.bus_id,memory.used,memory.total,memory.free,utilization.gpu
APPS_Q=timestamp,pid,process_name,used_memory,gpu_uuid,gpu_bus_id
{ date -u; date +%z; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  nvidia-smi --help-query-compute-apps; } > "$R/env.txt" 2>&1
# Which compute-apps fields this driver takes: timestamp is not in every version.
if ! nvidia-smi --query-compute-apps=$APPS_Q --format=csv > "$R/apps_probe.txt" 2>&1; then
  APPS_Q=pid,process_name,used_memory,gpu_uuid,gpu_bus_id
  echo "compute-apps: no timestamp field; logging with a timestamp prefix" >> "$R/env.txt"
  APPS_LOOP=1
fi
echo "GPU_Q=$GPU_Q APPS_Q=$APPS_Q" >> "$R/env.txt"

start_logs() {  # start_logs DIR
  nvidia-smi --query-gpu=$GPU_Q --format=csv -lms 200 > "$1/nvidia_smi.csv" 2> "$1/nvidia_smi.err" &
  GPU_LOG=$!
  if [ -z "${APPS_LOOP:-}" ]; then
    nvidia-smi --query-compute-apps=$APPS_Q --format=csv -lms 200 > "$1/compute_apps.csv" 2> "$1/compute_apps.err" &
  else
    ( echo "timestamp, pid, process_name, used_gpu_memory [MiB], gpu_uuid, gpu_bus_id"
      while :; do t=$(date +'%Y/%m/%d %H:%M:%S.%3N')
        nvidia-smi --query-compute-apps=$APPS_Q --format=csv,noheader | sed "s|^|$t, |"; sleep 0.2; done
    ) > "$1/compute_apps.csv" 2> "$1/compute_apps.err" &
  fi
  APPS_LOG=$!
  sleep 2  # idle before the run
}
stop_logs() { sleep 2; kill $GPU_LOG $APPS_LOG 2>/dev/null; wait $GPU_LOG $APPS_LOG 2>/dev/null; }

t0=$(date +%s)
# 1. healthy: context, model, data loaded in chunks (2 s of growth), 12 s plateau, exit.
if want healthy; then
D="$R/healthy"; mkdir -p "$D"; start_logs "$D"
timeout 60 python3 "$HERE/smi_trainer.py" "$D" --seconds 12 > "$D/run.log" 2>&1 || echo FAILED healthy
stop_logs
echo "healthy done $(( $(date +%s) - t0 )) s"
fi

# 2. leak: the same, keeping 32 MiB per step for 10 s (the allocator reserves it 256 MiB at a
# time: a rise every 2 s in nvidia-smi).
if want leak; then
D="$R/leak"; mkdir -p "$D"; start_logs "$D"
timeout 60 python3 "$HERE/smi_trainer.py" "$D" --seconds 10 --leak > "$D/run.log" 2>&1 || echo FAILED leak
stop_logs
echo "leak done $(( $(date +%s) - t0 )) s"
fi

# 3. shared: a holder (2 GiB, idle) starts first and outlives everything (a zombie at the end);
# the trainer runs; a grower takes 16 MiB every 0.25 s for 5 s in the middle of the training.
if want shared; then
D="$R/shared"; mkdir -p "$D"; start_logs "$D"
python3 "$HERE/smi_other.py" "$D/holder.json" hold 2 120 > "$D/holder.log" 2>&1 &
HOLDER=$!
sleep 4
timeout 60 python3 "$HERE/smi_trainer.py" "$D" --seconds 12 > "$D/run.log" 2>&1 &
TRAINER=$!
sleep 9
timeout 30 python3 "$HERE/smi_other.py" "$D/grower.json" grow 16 5 > "$D/grower.log" 2>&1 || echo FAILED grower
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$D/compute_apps_once.csv" 2>&1
nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,nounits > "$D/gpu_once_nounits.csv" 2>&1
wait $TRAINER || echo FAILED shared trainer
sleep 4  # the holder alone: memory held, nothing running
stop_logs
kill $HOLDER 2>/dev/null; wait $HOLDER 2>/dev/null
echo "shared done $(( $(date +%s) - t0 )) s"
fi
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$R/compute_apps_none.csv" 2>&1
date -u >> "$R/env.txt"
