# tools/device/env.sh: sourced by the scripts that run ON THE GPU MACHINE
# (run.sh, bucket.sh) from the repo root, with .carry/ staged by pack.sh:
# the environment the machine requires (no NVLink multicast), the carried
# libraries, the work folder W (emptied), OUT, and MPI, the 2-rank mpirun
# command line. Set W before sourcing; output is teed to $OUT/log.txt.
ROOT=$PWD
OUT=${OUT:-/tmp/sg-out}
rm -rf "$W"
mkdir -p "$OUT" "$W"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LD_LIBRARY_PATH=$ROOT/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
BIN=$ROOT/.carry/bin
G=$ROOT/.carry/graphs
MPI=(mpirun -np 2 --bind-to none --oversubscribe
     -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x TORCH_SYMM_MEM_DISABLE_MULTICAST
     -x NVSHMEM_DISABLE_NVLS --mca btl_vader_single_copy_mechanism none)
exec > >(tee "$OUT/log.txt") 2>&1
