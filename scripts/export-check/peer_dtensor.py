#!/usr/bin/env python3
"""peer_dtensor.py: times PyTorch DTensor's `redistribute` against the program
`nvcomm export torch` writes for the same transition, on a 1-D mesh of 2 GPUs,
in one torchrun job, and prints the ratio table of docs/export.md.

  torchrun --nproc_per_node=2 scripts/export-check/peer_dtensor.py \\
      [--nvcomm bin/nvcomm] [--sizes 1,4,16,64,256,1024] [--timing batch] [--bench 20] [--out DIR]
  python3 scripts/export-check/peer_dtensor.py --emit-only [--topology FILE] [--out DIR]   # programs only

For each transition and size (MiB of the float32 [R, 32768] tensor, R = 8 per
MiB; the uneven rows have one row or one column less), rank 0 writes the fusion,
lowers and exports it (nvcomm lower, nvcomm export torch) into DIR; every rank
then runs the program's own main (which checks every output shard against the
reference and prints PASS or FAIL before it times anything) with --bench, whose
"one call" is the exported function's time, and times DTensor's redistribute of
the same shards with the same timing function (the program's time_calls: the
slowest rank's median). DIR gets results.csv and every program's JSON result."""
import argparse
import csv
import json
import datetime
import importlib.util
import os
import subprocess
import sys

import torch
import torch.distributed as dist

COLS = 32768

# name, fusion template (R rows, C columns), DTensor source and target placements, shape.
FUSIONS = {
    "partial": """tensors:
  tv0:
    mesh: m
    shape: [{R}, {C}, 2]
    schedule:
      - parallelize: {{axis: 2, type: DIDx}}
  tv1:
    mesh: m
    shape: [{R}, {C}]
{target}ops:
  - {{op: sum, in: tv0, out: tv1, axis: 2}}
""",
    "set": """tensors:
  tv0:
    mesh: m
    shape: [{R}, {C}]
    schedule:
      - outer_split: {{axis: {src}, factor: 2}}
      - parallelize: {{axis: {src}, type: DIDx}}
  tv1:
    mesh: m
{target}ops:
  - {{op: set, in: tv0, out: tv1}}
""",
}
SHARD1 = """    schedule:
      - outer_split: {axis: 1, factor: 2}
      - parallelize: {axis: 1, type: DIDx}
"""

# name: (fusion, source axis or None, target sharded on dim 1, DTensor placements, rows less, columns less)
TRANSITIONS = [
    ("Partial->Replicate", "partial", None, False, ("P", "R"), 0, 0),
    ("Partial->Shard(1)", "partial", None, True, ("P", "S1"), 0, 0),
    ("Shard(0)->Shard(1)", "set", 0, True, ("S0", "S1"), 0, 0),
    ("Shard(1)->Replicate", "set", 1, False, ("S1", "R"), 0, 0),
    ("Shard(1)->Replicate uneven", "set", 1, False, ("S1", "R"), 0, 1),
    ("Shard(0)->Replicate uneven", "set", 0, False, ("S0", "R"), 1, 0),
    ("Shard(0)->Shard(1) uneven", "set", 0, True, ("S0", "S1"), 1, 0),
]


def fusion_text(kind, src, shard1, rows, cols):
    body = FUSIONS[kind].format(R=rows, C=cols, src=src, target=SHARD1 if shard1 else "")
    return "meshes: {m: [0, 1]}\n" + body


def cases(sizes):
    """(name, MiB, fusion text, placements, global shape) of every measurement."""
    out = []
    for name, kind, src, shard1, places, less_r, less_c in TRANSITIONS:
        for mib in sizes:
            rows, cols = 8 * mib - less_r, COLS - less_c
            out.append((name, mib, fusion_text(kind, src, shard1, rows, cols), places, (rows, cols)))
    out.append(("Partial->Replicate [64, 1024]", 0.25, fusion_text("partial", None, False, 64, 1024), ("P", "R"), (64, 1024)))
    return out


def export(nvcomm, topology, text, stem):
    with open(stem + ".yaml", "w") as f:
        f.write(text)
    subprocess.run([nvcomm, "lower", stem + ".yaml", "-o", stem + ".json"], check=True)
    subprocess.run([nvcomm, "export", "torch", "--topology", topology, stem + ".json", "-o", stem + ".py"], check=True)


def load(path):
    spec = importlib.util.spec_from_file_location("peer_" + os.path.basename(path)[:-3].replace("-", "_").replace(".", "_"), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def placement(p):
    from torch.distributed.tensor import Partial, Replicate, Shard
    return {"P": Partial(), "R": Replicate(), "S0": Shard(0), "S1": Shard(1)}[p]


def dtensor_time(mod, mesh, places, shape, args, dev):
    """Seconds of one redistribute of a DTensor of the given global shape, the slowest rank's."""
    from torch.distributed.tensor import DTensor
    rank, (rows, cols) = dist.get_rank(), shape
    local = [rows, cols]
    if places[0] in ("S0", "S1"):  # torch.chunk's split: the first chunks hold the ceiling
        d = 0 if places[0] == "S0" else 1
        step = -(-shape[d] // 2)
        local[d] = max(0, min(step, shape[d] - rank * step))
    x = torch.randn(local, device=dev)
    src = DTensor.from_local(x, mesh, [placement(places[0])], run_check=False, shape=torch.Size(shape),
                             stride=(cols, 1))
    dst = [placement(places[1])]

    def call():
        src.redistribute(mesh, dst)
    for _ in range(args.warmup):
        call()
    t = torch.tensor([mod.time_calls(dev, call, args.bench, args.timing)], dtype=torch.float64, device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nvcomm", default="bin/nvcomm")
    ap.add_argument("--topology", default="default", help="topology of the programs' predictions")
    ap.add_argument("--sizes", default="1,4,16,64,256,1024", help="MiB, comma-separated")
    ap.add_argument("--timing", default="batch", choices=("queued", "each", "batch"))
    ap.add_argument("--bench", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--out", default="build/peer")
    ap.add_argument("--backend", default="nccl", choices=("nccl", "gloo"),
                    help="gloo: CPU processes (a check of the script, not a measurement)")
    ap.add_argument("--emit-only", action="store_true",
                    help="only write the programs (no GPUs needed), e.g. for local_blocks.py")
    args = ap.parse_args()
    todo = cases([int(s) for s in args.sizes.split(",")])
    if args.emit_only:
        os.makedirs(args.out, exist_ok=True)
        for k, (name, mib, text, _, _) in enumerate(todo):
            export(args.nvcomm, args.topology, text, os.path.join(args.out, "case%02d" % k))
            print("%s/case%02d.py: %s, %s MiB" % (args.out, k, name, mib))
        return 0
    gpu = args.backend == "nccl"
    if gpu:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=600))
    rank = dist.get_rank()
    dev = torch.device("cuda", torch.cuda.current_device()) if gpu else torch.device("cpu")
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh(dev.type, (2,))
    os.makedirs(args.out, exist_ok=True)
    if rank == 0:
        for k, (_, _, text, _, _) in enumerate(todo):
            export(args.nvcomm, args.topology, text, os.path.join(args.out, "case%02d" % k))
    dist.barrier(device_ids=[dev.index]) if gpu else dist.barrier()
    cache, rows = {}, []
    for k, (name, mib, _, places, shape) in enumerate(todo):
        stem = os.path.join(args.out, "case%02d" % k)
        mod = load(stem + ".py")
        rc = mod.main(["--backend", args.backend, "--bench", str(args.bench), "--warmup", str(args.warmup),
                       "--timing", args.timing, "--json", stem + ".result.json"], group_cache=cache, out=open(os.devnull, "w"))
        res = json.load(open(stem + ".result.json")) if rank == 0 else {}
        try:
            peer = dtensor_time(mod, mesh, places, shape, args, dev)
        except (RuntimeError, NotImplementedError) as e:  # gloo lacks some of DTensor's collectives
            print("rank %d: DTensor %s: %s" % (rank, name, str(e).splitlines()[0]), file=sys.stderr)
            peer = float("nan")
        if rank == 0:
            steps = " + ".join("%s %.0f" % (s["type"], s["measured_s"] * 1e6) for s in res["steps"])
            row = {"transition": name, "mib": mib, "shape": "%dx%d" % shape, "pass": res["pass"] and rc == 0,
                   "blocks": steps, "nvcomm_us": res["call_s"] * 1e6, "dtensor_us": peer * 1e6,
                   "ratio": res["call_s"] / peer, "predicted_us": (res.get("predicted_s") or 0) * 1e6}
            rows.append(row)
            print("%-30s %6s MiB  %-5s nvcomm %9.1f us  DTensor %9.1f us  ratio %.2f   [%s]" % (
                name, mib, "PASS" if row["pass"] else "FAIL", row["nvcomm_us"], row["dtensor_us"], row["ratio"], steps), flush=True)
        if gpu:
            torch.cuda.empty_cache()
    if rank == 0:
        with open(os.path.join(args.out, "results.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        print("\n| transition | MiB | shape | nvcomm blocks (us) | nvcomm (us) | DTensor (us) | ratio |\n|---|---|---|---|---|---|---|")
        for r in rows:
            print("| %s | %s | %s | %s | %.0f | %.0f | %s%.2f%s |" % (
                r["transition"], r["mib"], r["shape"], r["blocks"], r["nvcomm_us"], r["dtensor_us"],
                "**" if r["ratio"] > 1.05 else "", r["ratio"], "**" if r["ratio"] > 1.05 else ""))
        bad = [r for r in rows if not r["pass"]]
        print("\n%d measurements, %d FAIL" % (len(rows), len(bad)))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
