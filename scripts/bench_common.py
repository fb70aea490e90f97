"""Run-and-parse helpers shared by the streaming benchmarks (stream_bench.py, dataflow_bench.py,
split_bench.py): running the tessera CLI, converting and profiling models once, the fidelity
check of a streamed plan against its sequential run, and frames/s of `tessera run`.
"""
import os
import re
import subprocess
import sys

import numpy as np


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
