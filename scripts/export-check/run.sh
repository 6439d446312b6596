#!/usr/bin/env bash
# run.sh OUTDIR: run the programs prepare.sh laid out, on a machine with
# PyTorch (torchrun) and 2 GPUs, and write every result to OUTDIR:
#   gloo/NAME.json, gloo/NAME.log   every plan on CPU processes (gloo)
#   gpu/NAME.json                    the 2-GPU plans on NCCL, with --bench
#   calibration.csv                  calibrate.py on the 2 GPUs
#   summary.txt                      one line per program
# Keep NVLink multicast off on shared machines:
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TORCH_NCCL_ASYNC_ERROR_HANDLING=1
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
bench=${BENCH:-20}
mkdir -p "$out/gloo" "$out/gpu"
cd "$here"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count(), "nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else "-")' | tee "$out/env.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$out/env.txt" 2>&1
nvidia-smi topo -m >>"$out/env.txt" 2>&1

nprocs() { grep -o 'start at least [0-9]*' "$1" | awk '{print $4}'; }

# 1. Standalone NCCL runs (the program as a user runs it), then every 2-GPU
#    plan in one job through run_many.py, with --bench.
port=29501
for name in R-21_allgather gpu2_sendrecv_swap C-06_sendrecv_to_self; do
  port=$((port + 1))
  timeout 60 python3 -m torch.distributed.run --nproc_per_node=2 --master_port=$port "gpu/$name.py" >"$out/gpu/standalone_$name.log" 2>&1
  echo "standalone nccl $name rc=$?" | tee -a "$out/standalone.txt"
done
start=$(date +%s)
timeout 240 python3 -m torch.distributed.run --nproc_per_node=2 --master_port=29510 run_many.py --bench "$bench" --out "$out/gpu" gpu/*.py >"$out/gpu.log" 2>&1
echo "gpu: run_many rc=$? in $(( $(date +%s) - start )) s"
for prog in gpu/*.py; do  # anything the job did not finish, standalone
  name=$(basename "$prog" .py)
  [ -f "$out/gpu/$name.json" ] && continue
  port=$((port + 1))
  timeout 60 python3 -m torch.distributed.run --nproc_per_node=2 --master_port=$port "$prog" --bench "$bench" --json "$out/gpu/$name.json" >"$out/gpu/$name.log" 2>&1
  echo "gpu retry $name rc=$?" | tee -a "$out/gpu.log"
done

# 1b. Extra ranks idle: a 2-device plan on 4 gloo processes.
timeout 120 python3 -m torch.distributed.run --nproc_per_node=4 --master_port=29950 gpu/gpu2_allgather.py --backend gloo >"$out/extra_ranks.log" 2>&1
echo "extra ranks rc=$?" | tee -a "$out/standalone.txt"

# 2. Calibration on the GPUs.
timeout 180 python3 -m torch.distributed.run --nproc_per_node=2 --master_port=29520 calibrate.py --out "$out/calibration.csv" >"$out/calibrate.log" 2>&1
echo "calibrate rc=$?"

# 3. Every plan as CPU processes with gloo, 8 jobs at a time.
gloo_one() {
  prog=$1 out=$2 i=$3
  name=$(basename "$prog" .py)
  n=$(grep -o 'start at least [0-9]*' "$prog" | awk '{print $4}')
  timeout 300 python3 -m torch.distributed.run --nproc_per_node="$n" --master_port=$((30000 + i)) "$prog" --backend gloo \
    --json "$out/gloo/$name.json" >"$out/gloo/$name.log" 2>&1
  echo "gloo $name nproc=$n rc=$?"
}
export -f gloo_one
start=$(date +%s)
ls gloo/*.py | awk '{print $0, NR}' | timeout ${GLOO_BUDGET:-300} xargs -P 8 -n 2 bash -c 'gloo_one "$0" "'"$out"'" "$1"' >"$out/gloo.txt"
echo "gloo: $(grep -c 'rc=0' "$out/gloo.txt") of $(wc -l <"$out/gloo.txt") exit 0 in $(( $(date +%s) - start )) s"

python3 - "$out" <<'PY' | tee "$out/summary.txt"
import glob, json, os, sys
out = sys.argv[1]
for kind in ("gpu", "gloo"):
    rows = sorted(glob.glob(os.path.join(out, kind, "*.json")))
    ok = sum(json.load(open(f))["pass"] for f in rows)
    print("%s: %d results, %d PASS" % (kind, len(rows), ok))
    for f in rows:
        r = json.load(open(f))
        line = "%s %s %s" % (kind, r["plan"], "PASS" if r["pass"] else "FAIL")
        for s in r["steps"]:
            line += " | %d %s %.1fus pred %s" % (s["step"], s["type"], s["measured_s"] * 1e6,
                                                 "%.1fus" % (s["predicted_s"] * 1e6) if s["predicted_s"] else "-")
        print(line)
PY
