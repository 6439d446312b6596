#!/usr/bin/env python3
"""local_kernels.py: times the torch forms a local step can take on one GPU, so
that the exporter emits the fastest (docs/export.md, "Fusion"). For f32
[R, C] tensors at --sizes MiB, it prints the median device time of each
form (CUDA events around --iters back-to-back calls, after warm-up) and its
rate in GB/s of bytes read plus written.

  python3 scripts/export-check/local_kernels.py [--sizes 64,1024] [--iters 20]"""
import argparse
import statistics

import torch


def timed(fn, iters):
    for _ in range(3):
        fn()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    torch.cuda.synchronize()
    ev[0].record()
    for i in range(iters):
        fn()
        ev[i + 1].record()
    torch.cuda.synchronize()
    return statistics.median(ev[i].elapsed_time(ev[i + 1]) / 1e3 for i in range(iters))


def forms(R, C):
    """(name, bytes moved, function) for every form, on [R, C] float32."""
    dev = torch.device("cuda")
    H = C // 2
    x = torch.randn(R * C, device=dev)
    out = torch.empty(R * C, device=dev)
    nb = 4 * R * C
    g = x.view(2, R, H)          # an Allgather's output: chunk r is device r's [R, H]
    o3 = out.view(R, 2, H)
    o2 = out.view(R, C)
    u = torch.empty(R * (C - 1), device=dev).view(R, C - 1)
    p = torch.empty(R * H, device=dev).view(R, H)
    small = torch.randn(R * (H - 1), device=dev).view(R, H - 1)
    return [
        ("copy: out.copy_(x)", 2 * nb, lambda: out.copy_(x)),
        ("copy: x.clone()", 2 * nb, lambda: x.clone()),
        ("interleave: permute(1,0,2).contiguous()", 2 * nb, lambda: g.permute(1, 0, 2).contiguous()),
        ("interleave: out.copy_(permute view)", 2 * nb, lambda: o3.copy_(g.permute(1, 0, 2))),
        ("interleave: cat(chunks, dim=1, out=)", 2 * nb, lambda: torch.cat(g.unbind(0), dim=1, out=o2)),
        ("interleave: one copy_ per chunk", 2 * nb, lambda: [o3[:, r].copy_(g[r]) for r in range(2)]),
        ("split: [R, 2, H] -> [2, R, H] copy_", 2 * nb, lambda: g.copy_(o3.permute(1, 0, 2))),
        ("split: cat(chunk(dim=1))", 2 * nb, lambda: torch.cat(o2.chunk(2, dim=1))),
        ("unpad: [:, :C-1].contiguous()", 2 * 4 * R * (C - 1), lambda: o2[:, :C - 1].contiguous()),
        ("unpad: out.copy_([:, :C-1])", 2 * 4 * R * (C - 1), lambda: u.copy_(o2[:, :C - 1])),
        ("interleave+unpad: two copy_", 2 * 4 * R * (C - 1),
         lambda: (u[:, :H].copy_(g[0]), u[:, H:].copy_(g[1, :, :H - 1]))),
        ("interleave+unpad: cat(out=)", 2 * 4 * R * (C - 1),
         lambda: torch.cat([g[0], g[1, :, :H - 1]], dim=1, out=u)),
        ("pad: full + box assign", 4 * R * H + 2 * 4 * R * (H - 1),
         lambda: torch.full((R, H), 0.0, device=dev).__setitem__((slice(None), slice(0, H - 1)), small)),
        ("pad: empty + box copy_ + hole fill", 2 * 4 * R * (H - 1),
         lambda: (p[:, :H - 1].copy_(small), p[:, H - 1:].fill_(0))),
        ("pad: F.pad", 2 * 4 * R * H, lambda: torch.nn.functional.pad(small, (0, 1))),
        ("transpose: t().contiguous()", 2 * nb, lambda: o2.t().contiguous()),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="16,64,256,1024", help="MiB of the [R, C] tensor, comma-separated")
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    print("%s, torch %s" % (torch.cuda.get_device_name(), torch.__version__))
    for mib in map(int, args.sizes.split(",")):
        C = 32768 if mib >= 128 else 8192
        R = mib * (1 << 20) // 4 // C
        print("\nf32[%d, %d] (%d MiB)" % (R, C, mib))
        for name, nbytes, fn in forms(R, C):
            t = timed(fn, args.iters)
            print("  %-42s %9.1f us  %7.0f GB/s" % (name, t * 1e6, nbytes / t / 1e9))
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
