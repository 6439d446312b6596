# Shared by exported programs and the calibration program (timing.py).
import statistics
import time

import torch


def time_calls(dev, fn, n, how="each"):
    """Median seconds of fn: of n calls timed one by one ("each"), or of 5
    batches of about n/5 back-to-back calls, per call ("batch")."""
    groups = [1] * n if how == "each" else [max(n // 5, 1)] * 5
    if dev.type != "cuda":
        ts = []
        for k in groups:
            t0 = time.perf_counter()
            for _ in range(k):
                fn()
            ts.append((time.perf_counter() - t0) / k)
        return statistics.median(ts)
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(len(groups) + 1)]
    torch.cuda.synchronize()
    ev[0].record()
    for i, k in enumerate(groups):
        for _ in range(k):
            fn()
        ev[i + 1].record()
    torch.cuda.synchronize()
    return statistics.median(ev[i].elapsed_time(ev[i + 1]) / 1e3 / k for i, k in enumerate(groups))
