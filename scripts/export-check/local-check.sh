#!/usr/bin/env bash
# local-check.sh RESULTS: holds the cost model of local steps to measured times
# on the GPU at hand (one is enough: local steps run on each device alone;
# PyTorch, bin/nvcomm built for the machine). It measures the local copies
# (calibrate.py on one process: copy and permute, 1 KiB to 1 GiB), fits them
# (nvcomm calibrate --fit: memory and memory.strided), exports the transitions
# of peer_dtensor.py from 1 MiB to 1 GiB predicted with that topology, and
# times every local block of those programs (local_blocks.py):
#   RESULTS/cal-local.csv, fit-local.txt, topo-local.yaml, local-blocks.csv, local-blocks.txt
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mkdir -p "$1" && cd "$1" && pwd)
mkdir -p build
bin/nvcomm calibrate -o build/calibrate.py 2>/dev/null
python3 -m torch.distributed.run --nproc_per_node=1 --master_port=29650 build/calibrate.py \
  --collectives copy,permute --out "$out/cal-local.csv" >"$out/calibrate-local.log" 2>&1
bin/nvcomm calibrate --fit "$out/cal-local.csv" --devices-per-node 2 --name h200-local \
  -o "$out/topo-local.yaml" 2>"$out/fit-local.txt"
python3 scripts/export-check/peer_dtensor.py --emit-only --topology "$out/topo-local.yaml" \
  --sizes 1,4,16,64,256,1024 --out build/local >/dev/null
python3 scripts/export-check/local_blocks.py --csv "$out/local-blocks.csv" build/local/case*.py | tee "$out/local-blocks.txt"
