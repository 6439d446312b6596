#!/usr/bin/env bash
# sweep.sh [OUTDIR]: the size sweep that holds the cost model to measured
# times. For each of the nine collective types, the 2-GPU example
# testdata/examples/gpu2_<type>.yaml is scaled to one step of S = 1 MiB, 1.5 MiB,
# 2 MiB, 3 MiB, ... 768 MiB, 1 GiB (nccl-tests' message size: the powers of two
# calibrate.py measures and the sizes halfway between them, 21 in all),
# lowered with the nvfuser policy (exactly one collective of that type each) and
# exported to OUTDIR/sweep/<type>_<S>.py (plans in OUTDIR/plans). Needs
# bin/nvcomm (make build). TOPOLOGY=FILE predicts with that topology file.
# Run on 2 GPUs:
#   torchrun --nproc_per_node=2 OUTDIR/run_many.py --bench 50 --out RESULTS OUTDIR/sweep/*.py
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build/sweep}
nvcomm=bin/nvcomm
rm -rf "$out/sweep" "$out/plans"
mkdir -p "$out/sweep" "$out/plans"
cp scripts/export-check/run_many.py "$out/"
# type:example:S of the example's step, in MiB
for spec in allgather:gpu2_allgather:4 reduce_scatter:gpu2_reduce_scatter:4 allreduce:gpu2_allreduce:4 \
  alltoall:gpu2_alltoall:2 broadcast:gpu2_broadcast:4 reduce:gpu2_reduce:4 gather:gpu2_gather:4 \
  scatter:gpu2_scatter:4 sendrecv:gpu2_sendrecv_swap:2; do
  IFS=: read -r typ example base <<<"$spec"
  for kib in 1024 1536 2048 3072 4096 6144 8192 12288 16384 24576 32768 49152 65536 98304 131072 196608 \
    262144 393216 524288 786432 1048576; do
    name=${typ}_$(printf '%07d' "$kib")kib
    # Scale the last extent of the (only) shape by S / base.
    awk -v num="$kib" -v den="$((base * 1024))" '
      /^ *shape: \[/ && !done {
        match($0, /[0-9]+\]/); last = substr($0, RSTART, RLENGTH - 1)
        $0 = substr($0, 1, RSTART - 1) (last * num / den) "]" substr($0, RSTART + RLENGTH); done = 1
      }
      { print }' "testdata/examples/$example.yaml" >"$out/plans/$name.yaml"
    $nvcomm lower --policy nvfuser "$out/plans/$name.yaml" -o "$out/plans/$name.json"
    $nvcomm export torch --topology "${TOPOLOGY:-default}" "$out/plans/$name.json" -o "$out/sweep/$name.py"
  done
done
echo "$out/sweep: $(ls "$out/sweep" | wc -l) programs"
