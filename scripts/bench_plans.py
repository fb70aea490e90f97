#!/usr/bin/env python3
"""Measured latency of the slice plan against its baselines, per foundation model.

For each model: convert the exported ONNX file, profile it on the devices (default: every device
`tessera devices` lists but the reference kernels), then make and run these plans (latency
objective) with `tessera run --plan`:

    slice          seed 000 Algorithm 1 over all devices
    DEVICE         every device alone (the slice planner restricted to it)
    preferred:X    device-preferred with fallback (seed 000 Sect. VI-A) for every non-cpu X,
                   falling back to the cpu device
    hca            communication-oblivious (Sect. VI-E)

and print, per plan, its notation, estimated latency, measured median latency and the ratio
measured / estimated, then the slice plan's speed-up over the best single device. Output is a
Markdown table (for docs/planning.md).

    scripts/bench_plans.py --tessera build/tools/tessera [--models mobilenet_v2,resnet18]
        [--devices cpu,npu:0,opencl:0,vulkan:0] [--profile-repeat 3] [--run-repeat 7]

The measured columns are the median and the minimum of the runs; the profile takes the minimum
of its repeats (--statistic min), so min/est is the like-for-like ratio on a loaded machine.
"""
import argparse
import os
import re
import subprocess
import sys

FOUNDATION = ["mobilenet_v2", "resnet18", "resnet50", "squeezenet1_1", "vgg16", "alexnet"]


def sh(args, check=True):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if check and p.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(args), p.stdout))
    return p


def detected_devices(tessera):
    out = sh([tessera, "devices"]).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    devs = [n for n in names if n != "reference" and not n.startswith("remote:")]
    return devs or ["reference"]


def make_plan(tessera, tsr, profile, path, planner="slice", devices=None, prefer=None):
    args = [tessera, "plan", tsr, "--profile", profile, "--objective", "latency",
            "--planner", planner, "-o", path]
    if devices:
        args += ["--devices", ",".join(devices)]
    if prefer:
        args += ["--prefer", ",".join(prefer)]
    p = sh(args, check=False)
    if p.returncode != 0:
        return None, p.stdout.strip().splitlines()[-1]
    m = re.search(r"^plan \([^)]*\): (.*)$", p.stdout, re.M)
    return (m.group(1) if m else "?"), None


def run_plan(tessera, tsr, plan, inp, repeat):
    p = sh([tessera, "run", tsr, "--plan", plan, "--input", inp, "--repeat", str(repeat)],
           check=False)
    if p.returncode != 0:
        return None, None, None, p.stdout.strip().splitlines()[-1]
    m = re.search(r"latency median ([0-9.]+) ms, min ([0-9.]+) ms over \d+ run\(s\); "
                  r"estimated ([0-9.]+) ms", p.stdout)
    if not m:
        return None, None, None, "unparsed output"
    return float(m.group(1)), float(m.group(2)), float(m.group(3)), None


def short(notation, width=48):
    return notation if len(notation) <= width else notation[:width - 3] + "..."


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tessera", default="build/tools/tessera")
    ap.add_argument("--models", default=",".join(FOUNDATION))
    ap.add_argument("--model-dir", default=os.environ.get(
        "TESSERA_MODEL_CACHE", os.path.expanduser("~/.cache/tessera/models")))
    ap.add_argument("--work", default="build/bench_plans")
    ap.add_argument("--devices", default="")
    ap.add_argument("--profile-repeat", type=int, default=3)
    ap.add_argument("--run-repeat", type=int, default=7)
    a = ap.parse_args()

    devices = a.devices.split(",") if a.devices else detected_devices(a.tessera)
    cpu = next((d for d in devices if d.startswith("cpu")), devices[0])
    os.makedirs(a.work, exist_ok=True)
    load = os.getloadavg()[0]
    print("devices: %s; load average %.1f on %d cores" % (",".join(devices), load,
                                                         os.cpu_count()))
    print()
    # The profile takes the minimum of its repeats, so on a loaded machine the measured minimum
    # is the figure comparable with the estimate; the median is what a user sees.
    print("| model | plan | notation | estimated ms | measured ms | measured/est | min ms | "
          "min/est |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    summary = []
    for model in a.models.split(","):
        onnx = os.path.join(a.model_dir, model + ".onnx")
        inp = os.path.join(a.model_dir, model + ".input.npy")
        tsr = os.path.join(a.work, model + ".tsr")
        prof = os.path.join(a.work, model + ".profile.json")
        sh([a.tessera, "convert", onnx, "-o", tsr])
        sh([a.tessera, "profile", tsr, "-o", prof, "--devices", ",".join(devices),
            "--repeat", str(a.profile_repeat), "--warmup", "1", "--statistic", "min"])
        plans = [("slice", dict())]
        plans += [(d, dict(devices=[d])) for d in devices]
        plans += [("preferred:" + d, dict(planner="preferred", prefer=[d, cpu]))
                  for d in devices if d != cpu]
        plans += [("hca", dict(planner="hca"))]
        measured = {}
        for name, kw in plans:
            path = os.path.join(a.work, "%s.%s.plan.json" % (model, name.replace(":", "_")))
            notation, err = make_plan(a.tessera, tsr, prof, path, **kw)
            if err:
                print("| %s | %s | %s | | | | | |" % (model, name, err))
                continue
            ms, ms_min, est, err = run_plan(a.tessera, tsr, path, inp, a.run_repeat)
            if err:
                print("| %s | %s | %s | | | | | |" % (model, name, err))
                continue
            measured[name] = ms
            print("| %s | %s | `%s` | %.1f | %.1f | %.2f | %.1f | %.2f |" % (
                model, name, short(notation), est, ms, ms / est if est else 0, ms_min,
                ms_min / est if est else 0))
            sys.stdout.flush()
        singles = [(measured[d], d) for d in devices if d in measured]
        if "slice" in measured and singles:
            best = min(singles)
            summary.append((model, measured["slice"], best[1], best[0]))
    print()
    print("| model | slice ms | best single device | its ms | speed-up |")
    print("|---|---:|---|---:|---:|")
    for model, s, d, b in summary:
        print("| %s | %.1f | %s | %.1f | %.2fx |" % (model, s, d, b, b / s))


if __name__ == "__main__":
    main()
