# Shared by exported programs and the calibration program (timing.py).
import statistics
import sys
import time

import torch

TIMINGS = ("queued", "each", "batch")
TIMING_HELP = ("queued (default): calls enqueued behind a GPU spin, so they run back to back "
               "as nccl-tests' do (device time, host launch overhead hidden); each: CUDA events "
               "around every call as the host issues it; batch: 5 batches of back-to-back calls")

_SPIN_HZ = 2.0e9  # cycles a second for torch.cuda._sleep: at least the GPU's clock, so spins last long enough


def time_calls(dev, fn, n, how="queued"):
    """Median seconds a call of fn takes, over n calls.

    queued: the stream is held by a GPU spin while the host enqueues all n
    calls with CUDA events between them, so the GPU runs them back to back
    and each interval is the call's device time. The spin lasts ten times
    the host's time to enqueue the calls, measured here, plus 5 ms (a warning
    says when it ended too soon); every rank makes the same calls whatever
    its spin, so ranks never disagree. each: events around every call as the
    host issues it (the host's launch time shows where it exceeds the
    device's). batch: 5 batches of about n/5 back-to-back calls, per call."""
    if dev.type != "cuda":
        return _host_times(fn, n, how)
    if how == "queued" and not hasattr(torch.cuda, "_sleep"):  # a private API: fall back
        print("nvcomm timing: torch.cuda._sleep is missing; timing queued as batch", file=sys.stderr)
        how = "batch"
    if how != "queued":
        groups = [1] * n if how == "each" else [max(n // 5, 1)] * 5
        return _event_times(fn, groups)
    t0 = time.perf_counter()
    for _ in range(3):
        fn()
    host = (time.perf_counter() - t0) / 3  # host seconds to enqueue one call
    t, held = _queued(fn, n, 10 * n * host + 5e-3)  # generous: a spin costs only idle GPU time
    if not held:
        print("nvcomm timing: the GPU spin ended before all %d calls were enqueued; "
              "the time includes host launch overhead" % n, file=sys.stderr)
    return t


def _queued(fn, n, spin):
    """Per-call device seconds of n calls queued behind a spin of spin
    seconds, and whether the spin outlasted the enqueueing."""
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
    torch.cuda.synchronize()
    torch.cuda._sleep(int(spin * _SPIN_HZ))
    ev[0].record()
    for i in range(n):
        fn()
        ev[i + 1].record()
    held = not ev[0].query()  # the GPU still spins: every call was queued before the first ran
    torch.cuda.synchronize()
    # The first call absorbs the ranks' skew in leaving their spins.
    return statistics.median(ev[i].elapsed_time(ev[i + 1]) / 1e3 for i in range(1, n)) if n > 1 \
        else ev[0].elapsed_time(ev[1]) / 1e3, held


def _event_times(fn, groups):
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(len(groups) + 1)]
    torch.cuda.synchronize()
    ev[0].record()
    for i, k in enumerate(groups):
        for _ in range(k):
            fn()
        ev[i + 1].record()
    torch.cuda.synchronize()
    return statistics.median(ev[i].elapsed_time(ev[i + 1]) / 1e3 / k for i, k in enumerate(groups))


def _host_times(fn, n, how):
    """Without CUDA: wall-clock time of calls (each) or of 5 batches (batch, queued)."""
    groups = [1] * n if how == "each" else [max(n // 5, 1)] * 5
    ts = []
    for k in groups:
        t0 = time.perf_counter()
        for _ in range(k):
            fn()
        ts.append((time.perf_counter() - t0) / k)
    return statistics.median(ts)
