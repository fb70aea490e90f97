#!/usr/bin/env python3
"""GA-mapped CSDF actors (seed 003) streaming on two cores, against one device and a pipeline.

For each model:
  - convert it, profile it on cpu:0 and cpu:1 (`tessera profile`, cached in --work);
  - plan it with `tessera plan --planner ga` (the paper's fitness: eq. 1 balance, eq. 4 charging
    every channel) and with the Tessera variant (--ga-objective max --ga-comm cross), and with
    `--planner pipeline` (seed 001's contiguous stages), all on cpu:0,cpu:1;
  - check that the GA plan's streamed outputs equal its sequential run byte for byte;
  - in alternating rounds time
      `tessera run --plan P --stream N --warmup W` for each plan,
      `tessera run --device cpu --repeat N --warmup W --times` (one program on both cores: the
       best layer-by-layer single device, the role TensorRT plays in seed 003);
  - print the median frames/s, the ratios, and each GA actor's measured busy ms per frame (last
    round) against the plan's predicted load of that actor.

usage: scripts/dataflow_bench.py --tessera build/tools/tessera
         [--models resnet18,squeezenet1_1,alexnet,googlenet] [--frames 100] [--rounds 3]
         [--work DIR] [--seed 1] [--devices cpu:0,cpu:1] [--single cpu]

--devices are the processors the plans map onto (profiled and planned on them); --single is the
one device every plan is compared with (`cpu`, both cores, by default; e.g. cpu:0 for
--devices cpu:0,npu:0).
Wrap it in `flock -x /tmp/cpu.lock` on a shared machine.
"""
import json
import os
import re
import statistics
import sys

import bench_common as bc


def actor_predictions(plan_path):
    """Predicted busy ms per dense actor (numbered by first stage, as the executor does)."""
    with open(plan_path) as f:
        plan = json.load(f)
    dense, pred = {}, []
    for i, st in enumerate(plan["stages"]):
        key = st["actor"] if st["actor"] >= 0 else f"own{i}"
        if key not in dense:
            dense[key] = len(dense)
            pred.append(0.0)
        e = st.get("estimate", {})
        pred[dense[key]] += e.get("exec_ms", 0) + e.get("transfer_ms", 0)
    return pred


def actor_measured(out):
    busy = {}
    for line in out.splitlines():
        tok = line.split()
        if len(tok) == 6 and tok[0].isdigit() and tok[1].isdigit():
            busy[int(tok[1])] = busy.get(int(tok[1]), 0.0) + float(tok[4])
    return [busy[k] for k in sorted(busy)]


def main():
    ap = bc.arg_parser(models="resnet18,squeezenet1_1,alexnet,googlenet", frames=100, warmup=10,
                       rounds=3, check_frames=4, work="/tmp/tessera-dataflow-bench")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--devices", default="cpu:0,cpu:1")
    ap.add_argument("--single", default="cpu")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    t = args.tessera
    rows = []
    for name in args.models.split(","):
        tsr = bc.convert(t, args.models_dir, name, args.work)
        prof = bc.profile(t, tsr, args.work, name, devices=args.devices)
        plans = {
            "ga": ["--planner", "ga", "--seed", str(args.seed)],
            "ga-max": ["--planner", "ga", "--seed", str(args.seed), "--ga-objective", "max",
                       "--ga-comm", "cross"],
            "ga-period": ["--planner", "ga", "--seed", str(args.seed), "--ga-objective", "period",
                          "--ga-comm", "cross"],
            "pipeline": ["--planner", "pipeline"],
        }
        paths, outputs = bc.plan_all(t, tsr, prof, args.work, name, plans, devices=args.devices)
        notes = {key: bc.planned_period_ms(out) for key, out in outputs.items()}
        g = re.search(r"ga: (\d+) epochs, (\d+) evaluations, ([\d.]+) s", outputs["ga"])
        notes["ga_s"] = float(g.group(3))
        c = re.search(r"csdf: (.*)", outputs["ga"])
        notes["csdf"] = c.group(1) if c else ""
        # Fidelity: the GA plan streamed vs run sequentially, distinct inputs.
        identical = bc.streamed_equals_sequential(t, tsr, paths["ga"], args.models_dir, name,
                                                  args.work, args.check_frames)
        timed = {key: (lambda p=paths[key]: bc.stream_fps(t, tsr, p, args.frames, args.warmup))
                 for key in plans}
        timed["cpu"] = lambda: bc.device_fps(t, tsr, args.single, args.frames, args.warmup)
        med, last = bc.alternating_rounds(args.rounds, timed)
        rows.append((name, med, notes, identical, actor_predictions(paths["ga"]),
                     actor_measured(last["ga"] or "")))
        print(f"{name}: ga plan {notes['csdf']}", flush=True)
    print(f"devices {args.devices}; 'cpu' columns: --single {args.single}")
    print(f"{'model':14} {'ga f/s':>8} {'ga-max f/s':>10} {'ga-per f/s':>10} {'pipe f/s':>9} "
          f"{'cpu f/s':>8} {'ga/cpu':>7} {'ga/pipe':>8} {'gaper/cpu':>9} {'GA s':>6} {'equal':>6}")
    for name, med, notes, same, _, _ in rows:
        print(f"{name:14} {med['ga']:8.2f} {med['ga-max']:10.2f} {med['ga-period']:10.2f} "
              f"{med['pipeline']:9.2f} {med['cpu']:8.2f} {med['ga'] / med['cpu']:7.2f} "
              f"{med['ga'] / med['pipeline']:8.2f} {med['ga-period'] / med['cpu']:9.2f} "
              f"{notes['ga_s']:6.2f} {str(same):>6}")
    print("priced periods ms (ga, ga-max, ga-period, pipeline):")
    for name, _, notes, _, _, _ in rows:
        print(f"  {name:14} " + " ".join(f"{notes[k]:.2f}" for k in
                                         ("ga", "ga-max", "ga-period", "pipeline")))
    ratios = [r[1]["ga"] / r[1]["cpu"] for r in rows]
    print(f"geometric mean ga/cpu: {statistics.geometric_mean(ratios):.3f}")
    print("GA actors, measured busy ms/frame vs predicted (plan estimate):")
    for name, _, _, _, pred, meas in rows:
        pairs = ", ".join(f"a{i}: {m:.2f} vs {p:.2f}" for i, (m, p) in enumerate(zip(meas, pred)))
        print(f"  {name:14} {pairs}")
    if not all(r[3] for r in rows):
        sys.exit("streamed outputs differ from the sequential run")


if __name__ == "__main__":
    main()
