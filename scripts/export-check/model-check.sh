#!/usr/bin/env bash
# model-check.sh RESULTS: holds the cost model to measured times on the
# machine at hand (2 GPUs, PyTorch, bin/nvcomm built for it). For each timing
# (queued: device time; each: as the host issues calls), it calibrates,
# fits a topology (nvcomm calibrate --fit), exports the size sweep
# (sweep.sh) predicting with that topology, and runs it with --bench:
#   RESULTS/cal-<timing>.csv, fit-<timing>.txt, topo-<timing>.yaml
#   RESULTS/sweep-<timing>-<run>/NAME.json   measured and predicted per step
# RUNS=N repeats each sweep (default 1); TIMINGS="queued each" by default;
# CORPUS=1 adds the 2-GPU plans of the corpus (RESULTS/sweep-corpus_<timing>-1).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TORCH_NCCL_ASYNC_ERROR_HANDLING=1
set -uo pipefail
cd "$(dirname "$0")/../.."
out=$(mkdir -p "$1" && cd "$1" && pwd)
mkdir -p build && bin/nvcomm calibrate -o build/calibrate.py
port=29600
for timing in ${TIMINGS:-queued each}; do
  port=$((port + 1))
  start=$(date +%s)
  timeout 240 python3 -m torch.distributed.run --nproc_per_node=2 --master_port=$port build/calibrate.py \
    --timing "$timing" --out "$out/cal-$timing.csv" >"$out/calibrate-$timing.log" 2>&1
  echo "calibrate $timing rc=$? in $(( $(date +%s) - start )) s"
  bin/nvcomm calibrate --fit "$out/cal-$timing.csv" --devices-per-node 2 --name "h200-x2-$timing" \
    -o "$out/topo-$timing.yaml" 2>"$out/fit-$timing.txt" || { echo "fit $timing failed"; continue; }
  TOPOLOGY="$out/topo-$timing.yaml" bash scripts/export-check/sweep.sh "build/sweep-$timing" >/dev/null
  for run in $(seq 1 "${RUNS:-1}"); do
    port=$((port + 1))
    start=$(date +%s)
    timeout 300 python3 -m torch.distributed.run --nproc_per_node=2 --master_port=$port build/sweep-$timing/run_many.py \
      --bench 50 --timing "$timing" --out "$out/sweep-$timing-$run" build/sweep-$timing/sweep/*.py \
      >"$out/sweep-$timing-$run.log" 2>&1
    echo "sweep $timing run $run rc=$? in $(( $(date +%s) - start )) s, $(grep -l '"pass": true' "$out/sweep-$timing-$run"/*.json 2>/dev/null | wc -l) PASS"
  done
done

# CORPUS=1: every 2-GPU plan of the corpus too (prepare.sh), predicted with
# the first timing's topology, run with --bench 20 in that timing.
if [ "${CORPUS:-0}" = 1 ]; then
  timing=$(echo ${TIMINGS:-queued each} | awk '{print $1}')
  TOPOLOGY="$out/topo-$timing.yaml" bash scripts/export-check/prepare.sh build/export-check >/dev/null
  start=$(date +%s)
  timeout 300 python3 -m torch.distributed.run --nproc_per_node=2 --master_port=29690 build/export-check/run_many.py \
    --bench 20 --timing "$timing" --out "$out/sweep-corpus_$timing-1" build/export-check/gpu/*.py >"$out/corpus.log" 2>&1
  echo "corpus rc=$? in $(( $(date +%s) - start )) s, $(grep -l '"pass": true' "$out/sweep-corpus_$timing-1"/*.json | wc -l) PASS of $(ls build/export-check/gpu | wc -l)"
fi

# One CSV of every step measured, and the per-program results in one archive.
python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
with open(os.path.join(out, "sweep.csv"), "w") as f:
    f.write("timing,run,plan,pass,step,type,measured_s,predicted_s\n")
    for d in sorted(glob.glob(os.path.join(out, "sweep-*-*/"))):
        timing, run = os.path.basename(d.rstrip("/")).split("-")[1:]
        for p in sorted(glob.glob(d + "*.json")):
            r = json.load(open(p))
            for s in r.get("steps") or []:
                f.write("%s,%s,%s,%s,%d,%s,%.4e,%.4e\n" % (timing, run, r["plan"], str(r["pass"]).lower(),
                        s["step"], s["type"], s["measured_s"], s["predicted_s"] or 0))
PY
tar -C "$out" -czf "$out/sweep-results.tar.gz" $(cd "$out" && ls -d sweep-*-*/) && rm -rf "$out"/sweep-*-*/
echo "wrote $out/sweep.csv"
