#!/usr/bin/env bash
# One call on a fresh GPU machine: install what the image lacks, run the GPU tests and benchmarks.
# Usage: bash bench/gpu.sh OUTDIR   (logs and JSON land in OUTDIR; a short summary prints last)
#   NP=N          ranks (default 2, one GPU each)
#   STEPS="a b"   only those steps;  STEP_TIMEOUT=S  every step's limit (default: the step's own, below)
#   MPS=1         all ranks on GPU 0, sharing it under CUDA MPS (docs/gpu_testing.md); NCCL steps are skipped
#   MPS_PERCENT=P each rank's MPS share of the SMs (default 100/NP)
#   NPS="2 4 8"   with MPS=1: the test runners at each rank count, a step x NP table in OUTDIR/matrix.md
#   BUDGET_S=S    stop starting steps once S seconds have gone (default 510 with MPS=1: one 10-minute call)
#   SHRINK_ITERS=N  checked all-reduces on the shrunk communicator of step shrink_after_death (default 10000)
set -u
out=${1:?usage: bench/gpu.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
started=$SECONDS
source bench/gpu_env.sh
mps=${MPS:-0}
budget=${BUDGET_S:-$([ "$mps" = 1 ] && echo 510 || echo 0)}  # 0: no budget
# NCCL_STEPS use NCCL. The names stand a space apart: a line break would hide the name before it from the
# " $LIST " == *" name "* tests below.
RUNNERS="primitives_tests collectives_tests callcheck_tests port_tests graph_replays soak soak_collectives"
RUNNERS+=" executor_tests nccl_api_served verbs_tests packet_tests"
NCCL_STEPS="primitives_bench nccl_api_tests allreduce_graph allreduce_tune_packet allreduce_tune_simple"
NCCL_STEPS+=" all_gather_graph reduce_scatter_graph all_to_all_graph broadcast_graph tp_decode allreduce_eager"
TWO_RANK_STEPS="primitives_bench port_bench pipeline_mlp"
NAMED_ONLY="verbs_tests packet_tests tune"  # run only when STEPS names them (verbs_, packet_tests: parts of collectives_tests)
declare -A LIMIT=([primitives_tests]=180 [collectives_tests]=480 [callcheck_tests]=180 [port_tests]=240 [graph_replays]=300 [soak]=420
                  [soak_collectives]=480 [executor_tests]=420
                  [shrink_after_death]=300)

mps_start() {  # a fresh MPS control daemon with its own pipe and log folders; every rank gets mps_percent's share
  export CUDA_MPS_PIPE_DIRECTORY=$(mktemp -d) CUDA_MPS_LOG_DIRECTORY=$(mktemp -d) CUDA_VISIBLE_DEVICES=0
  export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$(mps_percent "$np")
  nvidia-cuda-mps-control -d || { echo "MPS: nvidia-cuda-mps-control -d failed"; exit 1; }
}
mps_stop() {  # quit the daemon (bounded) and wait until it no longer answers
  echo quit | timeout 15 nvidia-cuda-mps-control >/dev/null 2>&1
  for _ in $(seq 50); do
    echo get_server_list | timeout 2 nvidia-cuda-mps-control >/dev/null 2>&1 || return 0
    sleep 0.2
  done
  echo "MPS: the daemon in $CUDA_MPS_PIPE_DIRECTORY did not quit within 10 s (see $CUDA_MPS_LOG_DIRECTORY)"
}
set_mpi() {  # MPI: mpirun with NP ranks; under MPS all of them on GPU 0 with the MPS settings forwarded
  MPI=(mpirun -np "$np")
  [ "$mps" = 1 ] && MPI+=(--oversubscribe --bind-to none -x CUDA_VISIBLE_DEVICES -x CUDA_MPS_PIPE_DIRECTORY
                          -x CUDA_MPS_ACTIVE_THREAD_PERCENTAGE)
}
skip_reason() {  # why step $1 cannot run in this mode (empty: it can)
  [ -n "${STEPS:-}" ] && [[ " $STEPS " != *" $1 "* ]] && { echo "-"; return; }  # not selected: silent
  [ -z "${STEPS:-}" ] && [[ " $NAMED_ONLY " == *" $1 "* ]] && { echo "-"; return; }
  [ -n "${NPS:-}" ] && [[ " $RUNNERS " != *" $1 "* ]] && { echo "-"; return; }  # the matrix runs the runners
  if [ "$mps" = 1 ] && [[ " $NCCL_STEPS " == *" $1 "* ]]; then
    echo "needs NCCL, which refuses two ranks on one GPU"; return
  fi
  [[ " $TWO_RANK_STEPS " == *" $1 "* ]] && [ "$np" != 2 ] && echo "needs exactly 2 ranks"
}
run() {  # name, command...: run with a time limit, log to OUTDIR/name.log, remember the status
  local name=$1; shift
  local why; why=$(skip_reason "$name")
  [ "$why" = "-" ] && return
  if [ -n "$why" ]; then echo "=== $name: skipped ($why)"; echo "$name np=$np skipped: $why" >> "$out/summary.txt"; return; fi
  local limit=${STEP_TIMEOUT:-${LIMIT[$name]:-300}} log="$out/$name${NPS:+_np$np}.log"
  if [ "$budget" != 0 ]; then
    local left=$((budget - (SECONDS - started) - 20))  # 20 s for the MPS restart and the summary
    if [ "$left" -lt 30 ]; then
      echo "=== $name: not started (budget of $budget s spent)"; echo "$name np=$np not started: budget" >> "$out/summary.txt"
      return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
  fi
  echo "=== $name (np=$np, limit ${limit} s): $*"
  [ "$mps" = 1 ] && mps_start
  local t0=$SECONDS
  timeout -k 10 "$limit" "$@" > "$log" 2>&1
  local rc=$? wall=$((SECONDS - t0))
  if [ "$mps" = 1 ]; then  # a step killed mid-kernel can leave the daemon broken: the next one gets a fresh one
    mps_stop
    [ "$rc" != 0 ] && cp "$CUDA_MPS_LOG_DIRECTORY/control.log" "${log%.log}.mps.log" 2>/dev/null
  fi
  tail -n "${TAIL:-25}" "$log"
  grep -E "^FAIL|Error|error:" "$log" | grep -v Warning | head -n "${ERRLINES:-12}" | sed "s/^/  [$name] /"
  echo "$name np=$np rc=$rc wall=${wall}s" >> "$out/summary.txt"
  [ -n "${NPS:-}" ] && echo "| $name | $np | $(python3 bench/passed.py "$log") | $wall | $rc |" >> "$out/matrix.md"
}
steps() {  # every step at $np ranks
  set_mpi
  run primitives_tests "${MPI[@]}" python3 tests/gpu/run_primitives.py
  run watchdog_tests "${MPI[@]}" python3 tests/gpu/run_watchdog.py
  run host_costs "${MPI[@]}" python3 -m pymscclpp.bench --op host --json "$out/host_$np.json"
  run primitives_bench "${MPI[@]}" python3 -m pymscclpp.bench --op memory_channel --json "$out/primitives.json"
  run collectives_tests "${MPI[@]}" python3 tests/gpu/run_collectives.py
  run verbs_tests "${MPI[@]}" python3 tests/gpu/run_collectives.py --verbs
  run packet_tests "${MPI[@]}" python3 tests/gpu/run_collectives.py --algo packet
  run callcheck_tests "${MPI[@]}" python3 tests/gpu/run_callcheck.py
  PYMSCCLPP_SOCKET_ADDR=127.0.0.1 run port_tests "${MPI[@]}" python3 tests/gpu/run_port.py
  PYMSCCLPP_SOCKET_ADDR=127.0.0.1 run port_bench "${MPI[@]}" python3 -m pymscclpp.bench --op port_channel --json "$out/port.json"
  run nccl_api_tests "${MPI[@]}" python3 tests/gpu/run_nccl_api.py
  [ "$mps" = 1 ] && run nccl_api_served "${MPI[@]}" python3 tests/gpu/run_nccl_api.py --no-nccl
  PYMSCCLPP_SOCKET_ADDR=127.0.0.1 run graph_replays "${MPI[@]}" python3 tests/gpu/run_graphs.py --replays 1000
  run close_cycles "${MPI[@]}" python3 bench/close_cycles.py --cycles "${CLOSE_CYCLES:-1000}"
  # no MPI (mpirun ends the job when a rank dies): the runner spawns NP ranks; the last kills itself mid all-reduce
  run shrink_after_death python3 tests/gpu/run_shrink.py --np "$np" --iters "${SHRINK_ITERS:-10000}" --json "$out/shrink.json"
  run soak "${MPI[@]}" python3 tests/fault/soak.py --iters "${SOAK_ITERS:-100000}" --seed "${SOAK_SEED:-0}" --report "${SOAK_REPORT:-20000}"
  run soak_collectives "${MPI[@]}" python3 tests/fault/soak_collectives.py --iters "${SOAK_ITERS:-100000}" --seed "${SOAK_SEED:-0}" --report "${SOAK_REPORT:-20000}"
  run allreduce_graph "${MPI[@]}" python3 -m pymscclpp.bench -b 1K -e 1G -f 4 --graph --check --json "$out/allreduce_graph.json"
  run allreduce_tune_packet "${MPI[@]}" python3 -m pymscclpp.bench -b 16K -e 1M -f 2 --graph --check --algo packet_wide --json "$out/tune_packet_wide.json"
  run allreduce_tune_simple "${MPI[@]}" python3 -m pymscclpp.bench -b 256K -e 32M -f 2 --graph --check --algo simple --json "$out/tune_simple.json"
  run executor_tests "${MPI[@]}" python3 tests/gpu/run_executor.py
  run executor_bench "${MPI[@]}" python3 bench/executor.py --json "$out/executor.json"
  PYMSCCLPP_CACHE_DIR=/tmp/pc run executor_cached bash -c \
    "${MPI[*]} python3 bench/executor.py --sizes 1048576 && ${MPI[*]} python3 bench/executor.py --sizes 1048576"
  for op in all_gather reduce_scatter all_to_all broadcast; do
    run "${op}_graph" "${MPI[@]}" python3 -m pymscclpp.bench --op "$op" -b "${OP_MIN:-1K}" -e "${OP_MAX:-1G}" -f "${OP_STEP:-4}" \
      --graph --check --json "$out/${op}_graph.json"
  done
  PYMSCCLPP_SOCKET_ADDR=127.0.0.1 run torch_tests "${MPI[@]}" python3 tests/gpu/run_torch.py  # one GPU: PYMSCCLPP_TORCH_FALLBACK=gloo
  PYMSCCLPP_SOCKET_ADDR=127.0.0.1 run llama_tp "${MPI[@]}" python3 examples/llama_tp.py --tokens 32
  # served with no fallback: a call forwarded to NCCL or gloo would fail the step
  PYMSCCLPP_SOCKET_ADDR=127.0.0.1 PYMSCCLPP_TORCH_FALLBACK=none run pipeline_mlp "${MPI[@]}" python3 examples/pipeline_mlp.py
  PYMSCCLPP_SOCKET_ADDR=127.0.0.1 PYMSCCLPP_TORCH_FALLBACK=none run moe_alltoall "${MPI[@]}" python3 examples/moe_alltoall.py
  PYMSCCLPP_SOCKET_ADDR=127.0.0.1 run tp_decode "${MPI[@]}" python3 bench/tp_decode.py --layers 8 --batch 1,2,4,8,16,32,64
  # the tuner's table for this rank count (staged and zero-copy rows): TUNE_OPS, TUNE_SIZES
  run tune "${MPI[@]}" python3 -m pymscclpp.bench.tune --ops "${TUNE_OPS:-all_to_allv,reduce}" ${TUNE_SIZES:--b 1K -e 16M -f 4} \
    --out "$out/tuning.json"
  run allreduce_eager "${MPI[@]}" python3 -m pymscclpp.bench -b 1K -e 1M -f 32 --eager --iters 20 --profile --json "$out/allreduce_eager.json"
  for step in ${EXTRA_STEPS:-}; do run "$step" bash -c "${!step}"; done
}

: > "$out/summary.txt"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$out/gpus.txt"
nvidia-smi topo -m >> "$out/gpus.txt" 2>&1
python3 -c "import numpy, numba, numba.cuda, cuda.bindings, torch; print('numpy', numpy.__version__, 'numba', numba.__version__, 'cuda.bindings', cuda.bindings.__version__, 'torch', torch.__version__, 'nccl', torch.cuda.nccl.version())" | tee -a "$out/gpus.txt"
if [ "$mps" = 1 ]; then
  trap '[ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ] && mps_stop' EXIT  # never leave a daemon behind
  command -v nvidia-cuda-mps-control >/dev/null || { echo "MPS=1: nvidia-cuda-mps-control is not on PATH"; exit 1; }
  echo "MPS mode: every rank on GPU 0, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=${MPS_PERCENT:-100/NP}, a fresh MPS daemon per step"
fi
if [ -n "${NPS:-}" ]; then
  [ "$mps" = 1 ] || { echo "NPS needs MPS=1 (the matrix shares one GPU)"; exit 1; }
  [ -s "$out/matrix.md" ] || printf '| step | NP | cases passed | wall s | rc |\n|---|---|---|---|---|\n' > "$out/matrix.md"
  for np in $NPS; do steps; done
  echo "=== matrix"; cat "$out/matrix.md"
else
  np=${NP:-2}
  steps
fi
echo "=== summary"; cat "$out/summary.txt"
[ -z "${NPS:-}" ] && python3 -m pymscclpp.bench.summary "$out"
exit 0
