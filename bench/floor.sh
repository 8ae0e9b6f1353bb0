#!/usr/bin/env bash
# Every collective against the memory floor on one GPU shared by NP ranks under CUDA MPS (docs/performance.md):
# CUDA graph of ITERS calls, bf16 sum, median of REPS replays, the slowest rank; checked against the expected
# result at every size. Usage: bash bench/floor.sh OUTDIR   (NPS="2 8", OPS, SIZES="-b 1K -e 256M -f 4", ALGO=name,
# DTYPE=bfloat16,
# REGISTER=1: the buffers registered with the communicator first, for zero-copy all-reduce; MPS_PERCENT=P: each
# rank's MPS share, default 100/NP)
set -u
out=${1:?usage: bench/floor.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
source bench/gpu_env.sh
export CUDA_VISIBLE_DEVICES=0
for np in ${NPS:-2 8}; do
  for op in ${OPS:-all_reduce all_gather reduce_scatter broadcast all_to_all}; do
    export CUDA_MPS_PIPE_DIRECTORY=$(mktemp -d) CUDA_MPS_LOG_DIRECTORY=$(mktemp -d)
    export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$(mps_percent "$np")
    nvidia-cuda-mps-control -d || { echo "MPS: nvidia-cuda-mps-control -d failed"; exit 1; }
    echo "=== $op np=$np"
    timeout -k 10 "${STEP_TIMEOUT:-240}" mpirun -np "$np" --oversubscribe --bind-to none -x CUDA_VISIBLE_DEVICES \
      -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_ACTIVE_THREAD_PERCENTAGE python3 -m pymscclpp.bench --op "$op" \
      ${SIZES:--b 1K -e 256M -f 4} --graph --iters "${ITERS:-20}" --reps "${REPS:-15}" --check --compare floor \
      ${ALGO:+--algo $ALGO} ${DTYPE:+--dtype $DTYPE} ${REGISTER:+--register} --json "$out/${op}_np${np}${ALGO:+_$ALGO}${DTYPE:+_$DTYPE}${REGISTER:+_reg}.json" 2>&1 | tee "$out/${op}_np${np}${ALGO:+_$ALGO}${DTYPE:+_$DTYPE}${REGISTER:+_reg}.log" \
      | grep -E "^ *[0-9]|^#|Error|error" | grep -v Warning
    echo quit | timeout 15 nvidia-cuda-mps-control >/dev/null 2>&1
    sleep 1
  done
done
