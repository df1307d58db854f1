"""Timing helpers shared by the PyTorch-driven benchmarks (bench_attention.py, bench_moe.py).

Every time is taken over CUDA-graph replays: the calls of one graph cycle through their own input
sets (the caller's `fn(i)` picks set i % n), so the weights / KV of consecutive calls are not
L2-resident, and the host's launch cost is not in the number. CUDA events bracket one replay; the
median over replays is reported per call.
"""

import datetime
import json
import os
import subprocess
import tempfile
import time

import torch

# Wall-clock span (time.time()) of the timed replays of the last time_graph_us call: the attention
# bench's clock sampler matches its samples against it.
LAST_TIMING = [0.0, 0.0]


def median(xs):
    """The middle element of the sorted values (the upper one of an even count)."""
    xs = sorted(xs)
    return xs[len(xs) // 2]


def capture_graph(fn, per_graph, warmup=2):
    """`warmup` eager calls fn(0..warmup-1) on a side stream (allocator and lazy-init work stays
    out of the capture), then a graph of fn(0) .. fn(per_graph - 1) captured on that stream and
    replayed once."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(warmup):
            fn(i)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        for i in range(per_graph):
            fn(i)
    g.replay()
    torch.cuda.synchronize()
    return g


def replay_us(g, per_graph):
    """Microseconds per call of one timed replay of `g` (a graph of `per_graph` calls)."""
    a = torch.cuda.Event(enable_timing=True)
    b = torch.cuda.Event(enable_timing=True)
    a.record()
    g.replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1000.0 / per_graph


def time_graph_us(fn, per_graph, reps, warmup=2, warm_replays=0, show=None):
    """Median microseconds per call over `reps` timed replays of a graph of fn(0..per_graph-1).
    `warm_replays` untimed replays come first; `show`, when given, labels a line printing every
    timed replay."""
    g = capture_graph(fn, per_graph, warmup)
    for _ in range(warm_replays):
        g.replay()
    torch.cuda.synchronize()
    LAST_TIMING[0] = time.time()
    times = [replay_us(g, per_graph) for _ in range(reps)]
    LAST_TIMING[1] = time.time()
    del g
    if show:
        print(f"  replays {show}: " + " ".join(f"{t:.1f}" for t in times), flush=True)
    return median(times)


def read_bandwidth_gbs(device=None):
    """The read bandwidth the targets are measured against: a streaming read (torch.sum) of a
    2 GiB fp32 tensor, graph-timed, in GB/s."""
    x = torch.ones(2 ** 29, dtype=torch.float32, device=device or "cuda")
    out = torch.empty((), dtype=torch.float32, device=x.device)
    us = time_graph_us(lambda i: torch.sum(x, dim=0, out=out), per_graph=10, reps=7)
    del x
    return 2 ** 31 / (us * 1e-6) / 1e9


def kernel_events(g):
    """The kernel events (chrome-trace dicts: name, ts, dur in us) of one replay of the captured
    graph `g` under torch.profiler (CUPTI)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        g.replay()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        with open(f.name) as fj:
            return [e for e in json.load(fj)["traceEvents"] if e.get("cat") == "kernel"]


def timeline(fn, per_graph, strip=""):
    """Prints the device timeline of one graph replay of fn(0..per_graph-1) (torch.profiler /
    CUPTI): each kernel's start, end and duration in us from the replay's first kernel start.
    With programmatic dependent launch a kernel starts when it is launched early (it then waits
    on the device), so overlapping rows are expected."""
    g = capture_graph(fn, per_graph)
    evs = kernel_events(g)
    del g
    evs.sort(key=lambda e: e["ts"])
    if not evs:
        print("  timeline: no kernel events", flush=True)
        return
    t0 = evs[0]["ts"]
    for e in evs:
        name = e["name"].split("(")[0].split("<")[0].split("::")[-1]
        if strip:
            name = name.replace(strip, "")
        print(f"  tl {name[:24]:24s} {e['ts'] - t0:8.2f} {e['ts'] + e['dur'] - t0:8.2f} "
              f"{e['dur']:7.2f}", flush=True)


def write_json(area, rows, gpu, bw):
    """Writes bench/results/<area>-<gpu>-<date>.json (or under $B12X_BENCH_OUT) with the GPU,
    the commit ($B12X_GIT_COMMIT, else git's HEAD), the date and the read bandwidth; returns the
    path. Called after every row, so a timeout still leaves the rows so far."""
    out_dir = os.environ.get("B12X_BENCH_OUT",
                             os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    os.makedirs(out_dir, exist_ok=True)
    slug = "".join(c.lower() if c.isalnum() else "-" for c in gpu)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    commit = os.environ.get("B12X_GIT_COMMIT")
    if not commit:
        try:
            commit = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True,
                                             stderr=subprocess.DEVNULL).strip()
        except Exception:  # noqa: BLE001
            commit = "unknown"
    path = os.path.join(out_dir, f"{area}-{slug}-{date}.json")
    with open(path, "w") as f:
        json.dump({"area": area, "gpu": gpu, "commit": commit, "date": date, "read_bw_gbs": bw,
                   "rows": rows}, f, indent=1)
    return path
