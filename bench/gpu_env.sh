# Sourced from the repository root by the GPU scripts (bench/gpu.sh, bench/floor.sh): the Python path (with the
# carried wheels in .whl/ first: the image's numpy 2.5 breaks numba-cuda) and the environment of every GPU run.
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # never NVLink multicast
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
export PYMSCCLPP_BACKEND=gpu PYMSCCLPP_TIMEOUT_S=${PYMSCCLPP_TIMEOUT_S:-20}
# Each of N ranks' MPS share of the SMs (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE): 100/N, or MPS_PERCENT where set. Shares
# that add up to every SM leave none spare, and a block spinning on its peers may then hold the SM a peer's block
# waits for (docs/performance.md, twenty-seventh session).
mps_percent() { echo "${MPS_PERCENT:-$((100 / $1))}"; }
