#!/usr/bin/env python3
"""Tessera's cpu device against ONNX Runtime on the same ONNX files.

Run with the python3 that has onnxruntime (not Debian's /usr/bin/python3):

    python3 scripts/bench_vs_ort.py --tessera build/tools/tessera \
        --models-dir ~/.cache/tessera/models --runs 20

For each model and thread count (1 and 2) it converts the ONNX file with `tessera convert`, then
alternates batches of ONNX Runtime runs (CPU execution provider, ORT_ENABLE_ALL, intra-op threads
= N, inter-op 1, sequential) and `tessera run --device cpu:<N cores> --repeat R --times`, until
each side has >= --runs timed runs; every run's own time counts. Each Tessera batch is a new
process, so it starts with --warmup untimed runs (default 3), while the ONNX Runtime session stays
warm from batch to batch. Between the two sides it pauses --pause seconds (default 0.2): ONNX
Runtime's intra-op threads spin for ~40 ms after a run (measured here), and a Tessera batch
started inside that window would share its cores with them. It prints the median latency of
each, the ratio Tessera/ORT and the achieved GFLOP/s of both against this machine's FP32 FMA
peak (measured with tessera_bench's BM_FmaPeak when --bench is given, else --peak GFLOP/s).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

MODELS = ["mobilenet_v2", "resnet18", "resnet50", "squeezenet1_1", "vgg16", "alexnet"]


def model_flops(tessera, tsr):
    out = subprocess.run([tessera, "info", tsr], capture_output=True, text=True).stdout
    m = re.search(r"([0-9.]+)\s*GFLOP", out)
    return float(m.group(1)) * 1e9 if m else float("nan")


def measure_peak(bench):
    """FP32 FMA peak in FLOP/s per thread count, from tessera_bench's BM_FmaPeak/<threads>."""
    out = subprocess.run([bench, "--benchmark_filter=^BM_FmaPeak/", "--benchmark_format=json",
                          "--benchmark_repetitions=3", "--benchmark_report_aggregates_only=true"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("%s failed: %s" % (bench, out.stderr.strip()))
    # Google Benchmark writes the JSON report to stdout; anything a library logged before it is
    # skipped by starting at the first '{'.
    report = json.loads(out.stdout[out.stdout.index("{"):])
    peaks = {}
    for b in report["benchmarks"]:
        # Names look like "BM_FmaPeak/2/real_time_median"; counters sit next to the timings.
        m = re.match(r"BM_FmaPeak/(\d+)", b.get("run_name", b["name"]))
        if m is None or b.get("aggregate_name", "median") != "median" or "GFLOP/s" not in b:
            continue
        peaks[int(m.group(1))] = b["GFLOP/s"] * 1e9
    if not peaks:
        raise RuntimeError("no BM_FmaPeak GFLOP/s counter in the output of " + bench)
    return peaks


def tessera_batch(tessera, tsr, inp, device, repeat, warmup, precision="f32"):
    """The wall times (ms) of `repeat` timed runs of one `tessera run` process, in run order."""
    out = subprocess.run([tessera, "run", tsr, "-i", inp, "-d", device, "--repeat", str(repeat),
                          "--warmup", str(warmup), "--times", "--precision", precision],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    m = re.search(r"^times ms:((?: [0-9.]+)+)$", out.stdout, re.M)
    if m is None:
        raise RuntimeError("no 'times ms:' line in the output of tessera run:\n" + out.stdout)
    return [float(v) for v in m.group(1).split()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tessera", default="build/tools/tessera")
    ap.add_argument("--bench", default="build/benchmarks/tessera_bench")
    ap.add_argument("--models-dir", default=os.path.expanduser("~/.cache/tessera/models"))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batch", type=int, default=10, help="runs per side per turn")
    ap.add_argument("--warmup", type=int, default=3,
                    help="untimed runs at the start of each Tessera process (ONNX Runtime's "
                         "session stays warm from one batch to the next)")
    ap.add_argument("--pause", type=float, default=0.2,
                    help="seconds between the two sides (lets the other's threads go idle)")
    ap.add_argument("--peak", type=float, default=0, help="FP32 peak GFLOP/s per thread if no --bench")
    ap.add_argument("--precisions", default="f32",
                    help="Tessera precisions to time, each in its own batch of the alternation "
                         "(e.g. f32,bf16; docs/precision.md); the GFLOP/s column counts f32 FLOPs")
    args = ap.parse_args()
    precisions = args.precisions.split(",")

    peaks = {}
    if os.path.exists(args.bench):
        peaks = measure_peak(args.bench)
    elif args.peak <= 0:
        sys.exit("no FMA peak: build %s (TESSERA_BUILD_BENCHMARKS=ON) or pass --peak" % args.bench)
    tmp = tempfile.mkdtemp(prefix="tessera_vs_ort_")
    rows = []
    for name in args.models.split(","):
        onnx_path = os.path.join(args.models_dir, name + ".onnx")
        inp = os.path.join(args.models_dir, name + ".input.npy")
        tsr = os.path.join(tmp, name + ".tsr")
        subprocess.run([args.tessera, "convert", onnx_path, "-o", tsr], check=True, capture_output=True)
        flops = model_flops(args.tessera, tsr)
        x = np.load(inp)
        for threads in [int(t) for t in args.threads.split(",")]:
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
            feed = {sess.get_inputs()[0].name: x}
            sess.run(None, feed)  # warm-up
            device = "cpu:0" if threads == 1 else "cpu:0-%d" % (threads - 1)
            ort_ms, tes_ms = [], {p: [] for p in precisions}
            batch = args.batch
            while len(ort_ms) < args.runs or min(len(v) for v in tes_ms.values()) < args.runs:
                for _ in range(batch):
                    t0 = time.perf_counter()
                    sess.run(None, feed)
                    ort_ms.append((time.perf_counter() - t0) * 1e3)
                time.sleep(args.pause)
                # tessera run: --warmup untimed runs, then `batch` timed runs, each run's time.
                for p in precisions:
                    tes_ms[p].extend(tessera_batch(args.tessera, tsr, inp, device, batch,
                                                   args.warmup, p))
                    time.sleep(args.pause)
            o = statistics.median(ort_ms)
            peak = peaks.get(threads, args.peak * 1e9 * threads)
            for p in precisions:
                t = statistics.median(tes_ms[p])
                rows.append((name, threads, p, t, o, t / o, flops / t * 1e-6, flops / o * 1e-6,
                             peak * 1e-9))
                print("%-14s %d thr %-5s tessera %8.2f ms  ort %8.2f ms  ratio %.2f"
                      % (name, threads, p, t, o, t / o), file=sys.stderr, flush=True)

    print("| model | threads | precision | Tessera ms | ORT f32 ms | Tessera/ORT | Tessera GFLOP/s | ORT GFLOP/s | FMA peak GFLOP/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %d | %s | %.2f | %.2f | %.2f | %.1f | %.1f | %.0f |" % r)


if __name__ == "__main__":
    main()
