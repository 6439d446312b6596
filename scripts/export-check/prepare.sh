#!/usr/bin/env bash
# prepare.sh [OUTDIR]: export every plan of the corpus to a torch.distributed
# program (nvcomm export torch) and lay out the check that run.sh runs on a
# machine with PyTorch and 2 GPUs. Needs bin/nvcomm (make build).
#   gpu/   plans whose devices fit on 2 GPUs (device ids 0 and 1), plus the
#          1 GiB collectives of testdata/export/bench_*.yaml
#   gloo/  every plan, golden (policy nvfuser) and lowered with the default
#          policy (optimal, prefix opt_), for CPU processes with gloo
# Each program's first comment line says how many processes it needs.
# TOPOLOGY=FILE predicts the steps' times with that topology file (default:
# the built-in one).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build/export-check}
nvcomm=bin/nvcomm
topo=(--topology "${TOPOLOGY:-default}")
rm -rf "$out"
mkdir -p "$out/gpu" "$out/gloo"
cp scripts/export-check/run.sh scripts/export-check/run_many.py "$out/"
$nvcomm calibrate -o "$out/calibrate.py"

nprocs() { grep -o 'start at least [0-9]*' "$1" | awk '{print $4}'; }

for plan in testdata/examples/*.json testdata/conformance/*.json; do
  name=$(basename "$plan" .json)
  $nvcomm export torch "${topo[@]}" "$plan" -o "$out/gloo/$name.py"
  if [ "$(nprocs "$out/gloo/$name.py")" -le 2 ]; then
    cp "$out/gloo/$name.py" "$out/gpu/$name.py"
  fi
done
for fusion in testdata/examples/*.yaml testdata/conformance/*.yaml testdata/export/*.yaml; do
  name=$(basename "$fusion" .yaml)
  case $name in bench_*) continue ;; esac
  if $nvcomm lower "$fusion" -o "$out/opt_$name.json" 2>/dev/null; then
    $nvcomm export torch "${topo[@]}" "$out/opt_$name.json" -o "$out/gloo/opt_$name.py"
  fi
  rm -f "$out/opt_$name.json"
done
for fusion in testdata/export/bench_*.yaml testdata/export/uneven_*.yaml; do
  name=$(basename "$fusion" .yaml)
  $nvcomm export torch "${topo[@]}" "$fusion" -o "$out/gpu/$name.py"
  if [ "$(nprocs "$out/gpu/$name.py")" -gt 2 ]; then rm "$out/gpu/$name.py"; fi
done
echo "$out: $(ls "$out/gpu" | wc -l) GPU programs, $(ls "$out/gloo" | wc -l) gloo programs"
