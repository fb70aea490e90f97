#!/usr/bin/env python3
"""Whole models with layers split across two cores (seed 004), against the pure pipeline and one
program on both cores.

For each model:
  - convert it and profile it on cpu:0 and cpu:1 (cached in --work);
  - plan it with `tessera plan --planner pipeline` (seed 001's contiguous stages) and with
    `--planner split` (Procedure 1 Steps 0-2: that pipeline with the bottleneck layers split over
    both cores; `--mem-size MB` adds Step 1's memory cap);
  - check that the split plan's streamed outputs equal its sequential run byte for byte;
  - in alternating rounds time `tessera run --plan P --stream N --warmup W` for both plans and
    `tessera run --device cpu --repeat N --warmup W --times` (one program on both cores);
  - print the median frames/s, the ratios and the predicted periods.

usage: scripts/split_bench.py --tessera build/tools/tessera [--models vgg16,alexnet]
         [--frames 20] [--rounds 3] [--mem-size MB] [--work DIR]
Wrap it in the machine's exclusive CPU lock on a shared machine.
"""
import json
import os
import sys

import bench_common as bc


def notation(plan_path):
    with open(plan_path) as f:
        plan = json.load(f)
    parts = []
    for st in plan["stages"]:
        pl = st["placement"]
        devs = "+".join(d["device"] for d in pl["devices"])
        if pl.get("split"):
            devs += "/" + pl["split"]
        first = st["layers"]["first"] if isinstance(st["layers"], dict) else st["layers"][0]
        parts.append(f"{devs}[{first}]")
    return " ".join(parts)


def main():
    ap = bc.arg_parser(models="vgg16,alexnet", frames=20, warmup=3, rounds=3, check_frames=3,
                       work="/tmp/tessera-split-bench")
    ap.add_argument("--mem-size", type=int, default=0)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    t = args.tessera
    rows = []
    for name in args.models.split(","):
        tsr = bc.convert(t, args.models_dir, name, args.work)
        prof = bc.profile(t, tsr, args.work, name)
        plans = {"pipeline": ["--planner", "pipeline"], "split": ["--planner", "split"]}
        if args.mem_size:
            plans["split"] += ["--mem-size", str(args.mem_size)]
        paths, outputs = bc.plan_all(t, tsr, prof, args.work, name, plans)
        period = {key: bc.planned_period_ms(out) for key, out in outputs.items()}
        for key in plans:
            print(f"{name} {key}: {notation(paths[key])} (predicted {period[key]:.2f} ms)",
                  flush=True)
        same = bc.streamed_equals_sequential(t, tsr, paths["split"], args.models_dir, name,
                                             args.work, args.check_frames)
        timed = {key: (lambda p=paths[key]: bc.stream_fps(t, tsr, p, args.frames, args.warmup))
                 for key in plans}
        timed["cpu"] = lambda: bc.device_fps(t, tsr, "cpu", args.frames, args.warmup)
        med, _ = bc.alternating_rounds(args.rounds, timed)
        rows.append((name, med, period, same))
    print(f"{'model':10} {'split f/s':>10} {'pipe f/s':>9} {'cpu f/s':>8} {'split/pipe':>10} "
          f"{'split/cpu':>9} {'pred split':>10} {'pred pipe':>9} {'equal':>6}")
    for name, med, period, same in rows:
        print(f"{name:10} {med['split']:10.2f} {med['pipeline']:9.2f} {med['cpu']:8.2f} "
              f"{med['split'] / med['pipeline']:10.2f} {med['split'] / med['cpu']:9.2f} "
              f"{period['split']:10.2f} {period['pipeline']:9.2f} {str(same):>6}")
    if not all(r[3] for r in rows):
        sys.exit("streamed outputs differ from the sequential run")


if __name__ == "__main__":
    main()
