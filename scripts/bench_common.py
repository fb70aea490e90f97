"""Run-and-parse helpers shared by the streaming benchmarks (stream_bench.py, dataflow_bench.py,
split_bench.py): their common flags, running the tessera CLI, converting and profiling models
once, planning, the fidelity check of a streamed plan against its sequential run, frames/s of
`tessera run`, and the alternating rounds whose medians they print.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

import numpy as np


def arg_parser(models, frames, warmup, rounds, check_frames, work):
    """The flags of the streaming benchmarks, with these defaults: --tessera (required),
    --models-dir, --models, --frames, --warmup, --rounds, --check-frames, --work. A script adds
    its own flags to the parser it returns."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--models-dir", default=os.path.expanduser("~/.cache/tessera/models"))
    ap.add_argument("--models", default=models)
    ap.add_argument("--frames", type=int, default=frames)
    ap.add_argument("--warmup", type=int, default=warmup)
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--check-frames", type=int, default=check_frames)
    ap.add_argument("--work", default=work)
    return ap


def env():
    """The environment the CLI runs in (OpenBLAS told the core type, as on the bench machine)."""
    return dict(os.environ, OPENBLAS_CORETYPE=os.environ.get("OPENBLAS_CORETYPE", "SkylakeX"))


def run(cmd, environ=None):
    """Runs a command; exits with its output when it fails. Returns stdout."""
    p = subprocess.run(cmd, capture_output=True, text=True, env=environ or env())
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
    return p.stdout


def convert(tessera, models_dir, name, work):
    """The model's .tsr in `work` (converted from models_dir/NAME.onnx once)."""
    tsr = os.path.join(work, name + ".tsr")
    if not os.path.exists(tsr):
        run([tessera, "convert", os.path.join(models_dir, name + ".onnx"), "-o", tsr])
    return tsr


def profile(tessera, tsr, work, name, devices="cpu:0,cpu:1", repeat=3):
    """The model's profile on `devices` in `work` (profiled once)."""
    prof = os.path.join(work, f"{name}.profile.json")
    if not os.path.exists(prof):
        run([tessera, "profile", tsr, "-o", prof, "--devices", devices, "--repeat", str(repeat)])
    return prof


def plan_all(tessera, tsr, prof, work, name, plans, devices="cpu:0,cpu:1"):
    """Plans the model once per entry of `plans` (key -> `tessera plan` flags) on `devices`,
    writing WORK/NAME.KEY.plan.json. Returns ({key: plan path}, {key: what the planner
    printed}), in the order of `plans`."""
    paths, outputs = {}, {}
    for key, flags in plans.items():
        paths[key] = os.path.join(work, f"{name}.{key}.plan.json")
        outputs[key] = run([tessera, "plan", tsr, "-p", prof, "--devices", devices, "-o",
                            paths[key]] + flags)
    return paths, outputs


def alternating_rounds(rounds, timed):
    """Runs each callable of `timed` (key -> f() returning frames/s, or (frames/s, output)) once
    per round, in the order of `timed`, for `rounds` rounds, so that a drift of the machine
    touches every configuration alike. Returns ({key: median frames/s}, {key: the output of the
    last round, or None})."""
    fps = {k: [] for k in timed}
    last = {k: None for k in timed}
    for _ in range(rounds):
        for key, f in timed.items():
            r = f()
            if isinstance(r, tuple):
                r, last[key] = r
            fps[key].append(r)
    return {k: statistics.median(v) for k, v in fps.items()}, last


def streamed_equals_sequential(tessera, tsr, plan, models_dir, name, work, frames):
    """Streams `frames` distinct random inputs through `plan` and runs them sequentially on the
    same plan; True when every output is equal byte for byte."""
    frames_dir = os.path.join(work, name + "-in")
    os.makedirs(frames_dir, exist_ok=True)
    x = np.load(os.path.join(models_dir, name + ".input.npy"))
    rng = np.random.default_rng(1)
    for k in range(frames):
        np.save(os.path.join(frames_dir, f"{k:04d}.npy"),
                rng.standard_normal(x.shape).astype(np.float32))
    tag = os.path.basename(plan).replace(".json", "")
    out_s = os.path.join(work, f"{tag}-s%d.npy")
    out_q = os.path.join(work, f"{tag}-q%d.npy")
    run([tessera, "run", tsr, "--plan", plan, "--input", frames_dir, "--output", out_s,
         "--stream", str(frames), "--warmup", "0"])
    run([tessera, "run", tsr, "--plan", plan, "--input", frames_dir, "--output", out_q,
         "--warmup", "0", "--repeat", str(frames)])
    return all(np.array_equal(np.load(out_s % k), np.load(out_q % k)) for k in range(frames))


def stream_fps(tessera, tsr, plan, frames, warmup):
    """Frames/s of `tessera run --plan P --stream N`, and its full output."""
    out = run([tessera, "run", tsr, "--plan", plan, "--stream", str(frames),
               "--warmup", str(warmup)])
    return float(re.search(r"throughput ([\d.]+) frames/s", out).group(1)), out


def device_fps(tessera, tsr, device, frames, warmup):
    """Frames/s of `tessera run --device D --repeat N --times` (frames / the sum of run times)."""
    out = run([tessera, "run", tsr, "--device", device, "--repeat", str(frames),
               "--warmup", str(warmup), "--times"])
    times = [float(t) for t in re.search(r"times ms: (.*)", out).group(1).split()]
    return 1000.0 * len(times) / sum(times)


def planned_period_ms(plan_output):
    """The estimated period `tessera plan` printed (nan when none)."""
    m = re.search(r"estimated period ([\d.]+) ms", plan_output)
    return float(m.group(1)) if m else float("nan")
