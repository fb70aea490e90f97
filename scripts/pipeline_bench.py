#!/usr/bin/env python3
"""Planned pipelines against single devices: estimate, simulation and measurement, per model.

For each model: convert it, profile it on DEVICES (`tessera profile --repeat R --statistic min`,
which measures each device's co-run factor when two or more are profiled), plan for throughput
(`tessera plan --planner pipeline`), then in alternating rounds (the order rotates every round)
stream the plan (`tessera run --plan P --stream N --warmup W`) and run the model on each single
device of SINGLES (`tessera run --device D --repeat N --warmup W --times`, frames/s = runs / summed
time). It prints the median frames/s of each over the rounds, the ratios, and the plan's
estimated and simulated (`tessera simulate`) frames/s with their errors against the measured
stream, twice: with the co-run factors of the profile ("co-run") and with them removed from the
same profile ("alone"; for the same plan, and the plan the planner makes without them).

Each timed step (a profile; a round: every configuration once) can be prefixed by --wrap, e.g.
`--wrap /work/cpu-excl` on a shared machine, so that it runs alone.

usage: scripts/pipeline_bench.py --tessera build/tools/tessera [--models-dir DIR]
         [--models mobilenet_v2,resnet18] [--devices cpu:0,cpu:1] [--singles cpu,cpu:0]
         [--frames 300] [--warmup 20] [--rounds 3] [--profile-repeat 11] [--work DIR]
         [--wrap CMD] [--reuse-profiles]
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys


def run(cmd, wrap=(), env=None):
    p = subprocess.run(list(wrap) + cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
    return p.stdout


def simulate(tessera, tsr, plan, profile, frames, warmup, env):
    out = run([tessera, "simulate", tsr, "--plan", plan, "--profile", profile, "--frames",
               str(frames + warmup), "--warmup", str(warmup)], env=env)
    m = re.search(r"throughput ([\d.]+) frames/s, period ([\d.]+) ms \(priced ([\d.]+) ms\)", out)
    return float(m.group(1)), 1000.0 / float(m.group(3))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--models-dir", default=os.path.expanduser("~/.cache/tessera/models"))
    ap.add_argument("--models", default="mobilenet_v2,resnet18,resnet50,squeezenet1_1,vgg16")
    ap.add_argument("--devices", default="cpu:0,cpu:1")
    ap.add_argument("--singles", default="cpu,cpu:0")
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile-repeat", type=int, default=11)
    ap.add_argument("--work", default="/tmp/tessera-pipeline-bench")
    ap.add_argument("--wrap", default="", help="command prefix of every timed step")
    ap.add_argument("--reuse-profiles", action="store_true",
                    help="keep a profile already in --work instead of profiling again")
    args = ap.parse_args()
    env = dict(os.environ, OPENBLAS_CORETYPE=os.environ.get("OPENBLAS_CORETYPE", "SkylakeX"))
    wrap = shlex.split(args.wrap)
    os.makedirs(args.work, exist_ok=True)
    singles = [d for d in args.singles.split(",") if d]
    rows = []
    for name in args.models.split(","):
        base = os.path.join(args.work, name)
        tsr = base + ".tsr"
        if not os.path.exists(tsr):
            run([args.tessera, "convert", os.path.join(args.models_dir, name + ".onnx"), "-o",
                 tsr], env=env)
        prof = base + ".profile.json"
        if not (args.reuse_profiles and os.path.exists(prof)):
            run([args.tessera, "profile", tsr, "-o", prof, "--devices", args.devices, "--repeat",
                 str(args.profile_repeat), "--statistic", "min", "--quiet"], wrap, env)
        with open(prof) as f:
            p = json.load(f)
        corun = {d["device"]: d.get("corun_scale", 0) for d in p["devices"]}
        for d in p["devices"]:
            d.pop("corun_scale", None)
        alone = base + ".alone.json"
        with open(alone, "w") as f:
            json.dump(p, f)
        plan, plan0 = base + ".pipe.json", base + ".pipe-alone.json"
        for pr, out in ((prof, plan), (alone, plan0)):
            run([args.tessera, "plan", tsr, "--profile", pr, "--planner", "pipeline",
                 "--objective", "throughput", "-o", out], env=env)
        notation = {}
        for pl in (plan, plan0):
            with open(pl) as f:
                j = json.load(f)
            notation[pl] = " ".join(
                f"{s['placement']['devices'][0]['device']}[{s['layers']['first']}]"
                for s in j["stages"])
        sim_c, est_c = simulate(args.tessera, tsr, plan, prof, args.frames, args.warmup, env)
        sim_a, est_a = simulate(args.tessera, tsr, plan, alone, args.frames, args.warmup, env)
        configs = [("stream", [args.tessera, "run", tsr, "--plan", plan, "--stream",
                               str(args.frames), "--warmup", str(args.warmup)])]
        if notation[plan0] != notation[plan]:
            configs.append(("stream-alone-plan", [args.tessera, "run", tsr, "--plan", plan0,
                                                  "--stream", str(args.frames), "--warmup",
                                                  str(args.warmup)]))
        for d in singles:
            configs.append((d, [args.tessera, "run", tsr, "--device", d, "--repeat",
                                str(args.frames), "--warmup", str(args.warmup), "--times"]))
        fps = {c: [] for c, _ in configs}
        for r in range(args.rounds):
            # One round (every configuration once, the order rotated) in one wrapped section.
            k = r % len(configs)
            order = configs[k:] + configs[:k]
            outs = [f"{base}.round{r}.{i}.txt" for i in range(len(order))]
            script = " && ".join(f"{shlex.join(cmd)} > {o}" for (_, cmd), o in zip(order, outs))
            run(["sh", "-c", script], wrap, env)
            for (c, _), o in zip(order, outs):
                with open(o) as f:
                    out = f.read()
                if c.startswith("stream"):
                    fps[c].append(float(re.search(r"throughput ([\d.]+) frames/s", out).group(1)))
                else:
                    t = [float(x) for x in re.search(r"times ms: (.*)", out).group(1).split()]
                    fps[c].append(1000.0 * len(t) / sum(t))
        med = {c: statistics.median(v) for c, v in fps.items()}
        rows.append(dict(name=name, plan=notation[plan], plan0=notation[plan0], med=med,
                         est_c=est_c, est_a=est_a, sim_c=sim_c, sim_a=sim_a, corun=corun))
        print(json.dumps(rows[-1]), flush=True)

    err = lambda x, m: f"{100 * (x / m - 1):+.1f}%"  # noqa: E731
    hdr = ["model", "planned pipeline", "co-run factors", "stream f/s"] + \
        [f"{d} f/s" for d in singles] + [f"vs {d}" for d in singles] + \
        ["est. f/s co-run (err)", "est. f/s alone (err)", "sim. f/s co-run (err)",
         "plan alone / its f/s"]
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for r in rows:
        m = r["med"]
        s = m["stream"]
        cells = [r["name"], f"`{r['plan']}`",
                 ", ".join(f"{v:.3f}" for v in r["corun"].values()), f"{s:.1f}"]
        cells += [f"{m[d]:.1f}" for d in singles] + [f"{s / m[d]:.2f}" for d in singles]
        cells += [f"{r['est_c']:.1f} ({err(r['est_c'], s)})",
                  f"{r['est_a']:.1f} ({err(r['est_a'], s)})",
                  f"{r['sim_c']:.1f} ({err(r['sim_c'], s)})"]
        cells.append("same" if r["plan0"] == r["plan"] else
                     f"`{r['plan0']}` {m['stream-alone-plan']:.1f}")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
