#!/usr/bin/env python3
"""Streams a two-stage pipeline on two cores against one-device runs, side by side.

For each model: cut it where the cumulative FLOPs pass half (from `tessera info`), write the
streaming plan `cpu:0[0] cpu:1[cut]`, and in alternating rounds time
  - `tessera run --plan P --stream N --warmup W`   (the two stages overlap, one actor per core)
  - `tessera run --device cpu   --repeat N`        (one program on both cores)
  - `tessera run --device cpu:0 --repeat N`        (one core)
then print the median frames/s of each, the stream's CPU time / wall, and the ratios. It also
checks that every streamed frame's output equals the sequential run of the same plan byte for
byte (distinct random inputs, one file per frame).

usage: scripts/stream_bench.py --tessera build/tools/tessera --models-dir DIR
         [--models mobilenet_v2,resnet18,resnet50,squeezenet1_1] [--frames 300] [--rounds 3]
The models are the .onnx files of scripts/export_models.py; they are converted here.
"""
import argparse
import os
import re
import statistics
import sys
import tempfile

import bench_common as bc
from bench_common import run


def half_flops_cut(tessera, tsr):
    flops = []
    for line in run([tessera, "info", tsr]).splitlines():
        tok = line.split()
        if len(tok) >= 7 and tok[0].isdigit() and tok[1] != "layers,":
            flops.append(float(tok[-3]))
    total, acc = sum(flops), 0.0
    for i, f in enumerate(flops):
        acc += f
        if acc >= total / 2:
            return min(i + 1, len(flops) - 1), len(flops)
    return len(flops) // 2, len(flops)


def write_plan(path, layers, cut):
    import json
    stage = lambda first, last, dev: {  # noqa: E731
        "layers": {"first": first, "last": last},
        "placement": {"devices": [{"device": dev, "mhz": 0, "ratio": 1.0}], "split": ""},
        "actor": -1, "packing": ""}
    plan = {"format": "tessera-plan", "version": 2, "model": {"name": "", "hash": "",
                                                                 "layers": layers},
            "mode": "streaming", "planner": "manual", "objective": "throughput",
            "queue_capacity": 2,
            "stages": [stage(0, cut, "cpu:0"), stage(cut, layers, "cpu:1")]}
    with open(path, "w") as f:
        json.dump(plan, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--models-dir", default=os.path.expanduser("~/.cache/tessera/models"))
    ap.add_argument("--models", default="mobilenet_v2,resnet18,resnet50,squeezenet1_1")
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--check-frames", type=int, default=8)
    args = ap.parse_args()
    env = bc.env()
    work = tempfile.mkdtemp(prefix="tessera-stream-")
    rows = []
    for name in args.models.split(","):
        onnx = os.path.join(args.models_dir, name + ".onnx")
        tsr = os.path.join(work, name + ".tsr")
        run([args.tessera, "convert", onnx, "-o", tsr], env)
        cut, layers = half_flops_cut(args.tessera, tsr)
        plan = os.path.join(work, name + ".plan.json")
        write_plan(plan, layers, cut)
        # Fidelity: distinct inputs, every frame's output streamed vs sequential.
        identical = bc.streamed_equals_sequential(args.tessera, tsr, plan, args.models_dir, name,
                                                  work, args.check_frames)
        fps = {"stream": [], "cpu": [], "cpu:0": []}
        cpu_wall = []
        for _ in range(args.rounds):
            f, out = bc.stream_fps(args.tessera, tsr, plan, args.frames, args.warmup)
            fps["stream"].append(f)
            cpu_wall.append(float(re.search(r"cpu time / wall ([\d.]+)", out).group(1)))
            for dev in ("cpu", "cpu:0"):
                fps[dev].append(bc.device_fps(args.tessera, tsr, dev, args.frames, args.warmup))
        med = {k: statistics.median(v) for k, v in fps.items()}
        rows.append((name, cut, layers, med, statistics.median(cpu_wall), identical))
    print(f"{'model':16} {'cut':>8} {'stream f/s':>11} {'cpu f/s':>9} {'cpu:0 f/s':>10} "
          f"{'vs cpu':>7} {'vs cpu:0':>9} {'cpu/wall':>9} {'frames equal':>13}")
    for name, cut, layers, med, cw, same in rows:
        print(f"{name:16} {cut:>4}/{layers:<3} {med['stream']:11.2f} {med['cpu']:9.2f} "
              f"{med['cpu:0']:10.2f} {med['stream'] / med['cpu']:7.2f} "
              f"{med['stream'] / med['cpu:0']:9.2f} {cw:9.2f} {str(same):>13}")
    if not all(r[5] for r in rows):
        sys.exit("streamed outputs differ from the sequential run")


if __name__ == "__main__":
    main()
