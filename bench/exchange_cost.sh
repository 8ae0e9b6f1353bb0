#!/usr/bin/env bash
# Where a small exchange call's time goes (docs/performance.md): send/recv of 1 KB and 64 KB on NP ranks sharing one
# GPU under MPS (bench/floor.sh: graph, bf16, slowest rank), with the check on and off, on the whole grid and on one
# block, on registered buffers (zero-copy) and not (staged), beside two meetings a launch (--op sync).
# Usage: bash bench/exchange_cost.sh OUTDIR   (NPS="2 8", REPS=9)
set -u
out=${1:?usage: bench/exchange_cost.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
for np in ${NPS:-2 8}; do
  for variant in "check=1 blocks=0 reg=1" "check=0 blocks=0 reg=1" "check=1 blocks=1 reg=1" "check=1 blocks=0 reg=" \
                 "check=0 blocks=0 reg="; do
    eval "$variant"
    dir="$out/np${np}_check${check}_blocks${blocks}_reg${reg:-0}"
    PYMSCCLPP_CHECK=$check PYMSCCLPP_MAX_BLOCKS=$blocks REGISTER=$reg NPS=$np OPS=send_recv SIZES="-b 1K -e 64K -f 64" \
      REPS=${REPS:-9} STEP_TIMEOUT=120 bash bench/floor.sh "$dir" | grep -E "^ *[0-9]" \
      | awk -v v="np=$np $variant" '{s = $0; sub(/.*x  /, "", s); print v": "$1" bytes "$6" us, "s}'
  done
  (source bench/gpu_env.sh
   export CUDA_MPS_PIPE_DIRECTORY=$(mktemp -d) CUDA_MPS_LOG_DIRECTORY=$(mktemp -d) CUDA_VISIBLE_DEVICES=0
   export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$(mps_percent "$np")
   nvidia-cuda-mps-control -d
   timeout -k 10 120 mpirun -np "$np" --oversubscribe --bind-to none -x CUDA_VISIBLE_DEVICES \
     -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_ACTIVE_THREAD_PERCENTAGE python3 -m pymscclpp.bench --op sync 2>&1 \
     | grep "_us" | sed "s/^/np=$np sync: /"
   echo quit | timeout 15 nvidia-cuda-mps-control >/dev/null 2>&1)
done | tee "$out/summary.txt"
