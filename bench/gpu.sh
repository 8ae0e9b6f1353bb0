#!/usr/bin/env bash
# One call on a fresh 2-GPU machine: install what the image lacks, run the GPU tests and benchmarks.
# Usage: bash bench/gpu.sh OUTDIR   (logs and JSON land in OUTDIR; a short summary prints last)
set -u
out=${1:?usage: bench/gpu.sh OUTDIR}
mkdir -p "$out"
cd "$(dirname "$0")/.."
if ls .whl/*.whl >/dev/null 2>&1; then  # the image's numpy 2.5 breaks numba-cuda: carried wheels fix that
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # never NVLink multicast
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
export PYMSCCLPP_BACKEND=gpu PYMSCCLPP_TIMEOUT_S=${PYMSCCLPP_TIMEOUT_S:-20}
np=${NP:-2}
run() {  # name, command...: run with a time limit, log to OUTDIR/name.log, remember the status
  local name=$1; shift
  if [ -n "${STEPS:-}" ] && [[ " $STEPS " != *" $name "* ]]; then return; fi  # STEPS="a b" runs only those
  echo "=== $name: $*"
  timeout "${STEP_TIMEOUT:-300}" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  tail -n "${TAIL:-25}" "$out/$name.log"
  grep -E "^FAIL|Error|error:" "$out/$name.log" | grep -v Warning | head -n "${ERRLINES:-12}" | sed "s/^/  [$name] /"
  echo "$name rc=$rc" >> "$out/summary.txt"
}
: > "$out/summary.txt"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$out/gpus.txt"
nvidia-smi topo -m >> "$out/gpus.txt" 2>&1
python3 -c "import numpy, numba, numba.cuda, cuda.bindings, torch; print('numpy', numpy.__version__, 'numba', numba.__version__, 'cuda.bindings', cuda.bindings.__version__, 'torch', torch.__version__, 'nccl', torch.cuda.nccl.version())" | tee -a "$out/gpus.txt"
run primitives_tests mpirun -np "$np" python3 tests/gpu/run_primitives.py
run primitives_bench mpirun -np "$np" python3 -m pymscclpp.bench --op memory_channel --json "$out/primitives.json"
run collectives_tests mpirun -np "$np" python3 tests/gpu/run_collectives.py
PYMSCCLPP_SOCKET_ADDR=127.0.0.1 run port_tests mpirun -np "$np" python3 tests/gpu/run_port.py
PYMSCCLPP_SOCKET_ADDR=127.0.0.1 run port_bench mpirun -np "$np" python3 -m pymscclpp.bench --op port_channel --json "$out/port.json"
run nccl_api_tests mpirun -np "$np" python3 tests/gpu/run_nccl_api.py
PYMSCCLPP_SOCKET_ADDR=127.0.0.1 run graph_replays mpirun -np "$np" python3 tests/gpu/run_graphs.py --replays 1000
run soak mpirun -np "$np" python3 tests/fault/soak.py --iters 100000 --report 20000
run allreduce_graph mpirun -np "$np" python3 -m pymscclpp.bench -b 1K -e 1G -f 4 --graph --check --json "$out/allreduce_graph.json"
run allreduce_tune_packet mpirun -np "$np" python3 -m pymscclpp.bench -b 16K -e 1M -f 2 --graph --check --algo packet_wide --json "$out/tune_packet_wide.json"
run allreduce_tune_simple mpirun -np "$np" python3 -m pymscclpp.bench -b 256K -e 32M -f 2 --graph --check --algo simple --json "$out/tune_simple.json"
run executor_tests mpirun -np "$np" python3 tests/gpu/run_executor.py
run executor_bench mpirun -np "$np" python3 tests/../bench/executor.py --json "$out/executor.json"
run executor_cached bash -c "PYMSCCLPP_CACHE_DIR=/tmp/pc mpirun -np $np python3 bench/executor.py --sizes 1048576 && PYMSCCLPP_CACHE_DIR=/tmp/pc mpirun -np $np python3 bench/executor.py --sizes 1048576"
for op in all_gather reduce_scatter all_to_all broadcast; do
  run "${op}_graph" mpirun -np "$np" python3 -m pymscclpp.bench --op "$op" -b "${OP_MIN:-1K}" -e "${OP_MAX:-1G}" -f "${OP_STEP:-4}" \
    --graph --check --json "$out/${op}_graph.json"
done
PYMSCCLPP_SOCKET_ADDR=127.0.0.1 run torch_tests mpirun -np "$np" python3 tests/gpu/run_torch.py  # one GPU: PYMSCCLPP_TORCH_FALLBACK=gloo
PYMSCCLPP_SOCKET_ADDR=127.0.0.1 run llama_tp mpirun -np "$np" python3 examples/llama_tp.py --tokens 32
PYMSCCLPP_SOCKET_ADDR=127.0.0.1 run tp_decode mpirun -np "$np" python3 bench/tp_decode.py --layers 8 --batch 1,2,4,8,16,32,64
run allreduce_eager mpirun -np "$np" python3 -m pymscclpp.bench -b 1K -e 1M -f 32 --eager --iters 20 --profile --json "$out/allreduce_eager.json"
for step in ${EXTRA_STEPS:-}; do run "$step" bash -c "${!step}"; done
echo "=== summary"; cat "$out/summary.txt"
python3 -m pymscclpp.bench.summary "$out"
