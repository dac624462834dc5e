# tools/device/env.sh: sourced by the scripts that run ON THE GPU MACHINE
# (run.sh, p2p_check.sh, chunked_mm.sh, cmm.sh, bucket.sh, grouped.sh, contention.sh, faults.sh)
# from the repo root, with .carry/
# staged by pack.sh: the staged binaries and libraries, the environment the
# machine needs (NVLink multicast off: KINDS.md), mpirun for 2 ranks.
ROOT=$PWD
OUT=${OUT:-/tmp/sg-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LD_LIBRARY_PATH=$ROOT/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
BIN=$ROOT/.carry/bin
G=$ROOT/.carry/graphs
MPI=(mpirun -np 2 --bind-to none --oversubscribe
     -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x TORCH_SYMM_MEM_DISABLE_MULTICAST
     -x NVSHMEM_DISABLE_NVLS --mca btl_vader_single_copy_mechanism none)
# cuDNN: the machine has none beside CUDA; PyTorch's wheel ships one
# (docs/gpu.md "Attention on cuDNN"), which schedrun opens at run time.
CUDNN_LIB=$(python3 -c "import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], 'lib'))" 2>/dev/null)
[ -n "$CUDNN_LIB" ] && export LD_LIBRARY_PATH=$CUDNN_LIB:$LD_LIBRARY_PATH
