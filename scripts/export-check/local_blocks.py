#!/usr/bin/env python3
"""local_blocks.py PROGRAM...: times the local blocks (Permute, Pad, Unpad, Copy,
Slice, LocalReduce, alone or fused) of programs `nvcomm export torch` wrote, on
one GPU, beside the time each program predicts for them: the check that the cost
model prices local steps (docs/export.md, "Local steps").

  python3 scripts/export-check/local_blocks.py [--timing queued] [--iters 20] [--csv FILE] build/local/*.py

A local block runs on each device by itself, so one GPU times every device's
part: the program's function runs as each rank of its plan in turn, its
collectives replaced by calls that leave their buffers as they are (the values
are not checked here: the program itself checks them on 2 GPUs, or on gloo).
The block's time is the slowest rank's median, timed as --bench times it."""
import argparse
import csv
import importlib.util
import inspect
import os
import sys

import torch

LOCAL = {"Permute", "Pad", "Unpad", "Copy", "Slice", "LocalReduce"}


class NoComm:
    """torch.distributed for one device alone: every call does nothing, every
    attribute (dist.ReduceOp.SUM, groups[0, 1]) is another NoComm."""

    def __getattr__(self, name):
        return NoComm()

    def __getitem__(self, key):
        return NoComm()

    def __call__(self, *args, **kwargs):
        return None


def load(path):
    spec = importlib.util.spec_from_file_location("blocks_" + os.path.basename(path)[:-3].replace("-", "_"), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def inputs_of(mod, plan, rank, dev):
    """Random shards of the fusion inputs of the right sizes (None outside a mesh)."""
    out = []
    for name in plan.inputs:
        shard = plan.shards[name]
        n = shard.count(rank) if rank in shard.mesh["devices"] else None
        dt = mod.DTYPES[plan.tensors[name]["dtype"]]
        out.append(None if n is None else torch.randn(n, device=dev).to(dt))
    return out


def time_program(path, args, dev):
    """(block, steps, types, measured seconds, predicted seconds) of every local block."""
    mod = load(path)
    mod.dist = NoComm()  # RUN looks dist up in its module
    plan = mod.Plan(mod.PLAN)
    pre, blocks = mod.code_blocks(mod.RUN)
    params = list(inspect.signature(mod.RUN).parameters)
    local = [k for k, (_, _, types, _) in enumerate(blocks) if set(t.strip() for t in types.split("+")) <= LOCAL]
    worst = {k: 0.0 for k in local}
    for rank in sorted(plan.devices()):
        ns = dict(mod.RUN.__globals__)
        ns.update(zip(params, [rank, dev, NoComm()] + inputs_of(mod, plan, rank, dev)))
        exec(pre, ns)
        for k, (_, _, _, code) in enumerate(blocks):
            exec(code, ns)  # every block once: the buffers the next ones read
        for k in local:
            code = blocks[k][3]

            def fn(code=code):
                exec(code, ns)
            for _ in range(args.warmup):
                fn()
            worst[k] = max(worst[k], mod.time_calls(dev, fn, args.iters, args.timing))
        del ns
        torch.cuda.empty_cache()
    rows = []
    for k in local:
        a, b, types, _ = blocks[k]
        pred = mod.PREDICTED[k] if mod.PREDICTED else None
        rows.append((k, str(a) if a == b else "%d-%d" % (a, b), types, worst[k], pred))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timing", default="queued", choices=("queued", "each", "batch"))
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--csv", help="write every row to this CSV")
    ap.add_argument("programs", nargs="+")
    args = ap.parse_args()
    dev = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    out = []
    print("%-22s %-6s %-6s %-22s %13s %14s %6s" % ("program", "block", "steps", "type", "measured (us)", "predicted (us)", "ratio"))
    for path in args.programs:
        name = os.path.splitext(os.path.basename(path))[0]
        for k, steps, types, t, pred in time_program(path, args, dev):
            ratio = t / pred if pred else None
            print("%-22s %-6d %-6s %-22s %13.1f %14s %6s" % (name, k, steps, types, t * 1e6,
                  "%.1f" % (pred * 1e6) if pred is not None else "-", "%.2f" % ratio if ratio else "-"), flush=True)
            out.append({"program": name, "block": k, "steps": steps, "type": types.replace(" ", ""),
                        "measured_s": t, "predicted_s": pred})
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(out[0]))
            w.writeheader()
            w.writerows(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
