#!/usr/bin/env python3
"""run_many.py PROGRAM.py...: run several programs of `nvcomm export torch` in one
torchrun job, sharing the process group and its communicators, so that a
suite does not pay NCCL's start-up for every plan:

  torchrun --nproc-per-node=2 run_many.py [--backend B] [--bench N] [--out DIR] gpu/*.py

Each program runs as its own main(); results go to DIR/NAME.json."""
import argparse
import datetime
import importlib.util
import os
import sys
import traceback

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=("nccl", "gloo"), default=None)
    ap.add_argument("--bench", type=int, default=0)
    ap.add_argument("--timing", choices=("queued", "each", "batch"), default="queued")
    ap.add_argument("--out", default=".")
    ap.add_argument("programs", nargs="+")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    backend = args.backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=120))
    cache, failed = {}, 0
    for path in args.programs:
        name = os.path.splitext(os.path.basename(path))[0]
        if dist.get_rank() == 0:
            print("=== %s" % name, flush=True)
        spec = importlib.util.spec_from_file_location("plan_" + name.replace("-", "_"), path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        argv = ["--backend", backend, "--json", os.path.join(args.out, name + ".json")]
        if args.bench:
            argv += ["--bench", str(args.bench), "--timing", args.timing]
        try:
            rc = mod.main(argv, group_cache=cache)
        except SystemExit as e:
            rc = e.code
        except Exception:
            traceback.print_exc()
            raise
        failed += rc != 0
        if backend == "nccl":
            torch.cuda.empty_cache()
    dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
