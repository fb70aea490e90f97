#!/usr/bin/env python3
"""A synthetic Jetson-TX2-like profile for planning and `tessera simulate` (seed 003's board).

Takes a profile measured here on one core (`tessera profile MODEL --devices cpu:0`) and writes a
profile of the same model on energy/platforms/jetson_tx2_cores.json: six single-core CPU devices
and the GPU (vulkan:0). Every number is SYNTHETIC, scaled from the measured core:
  - Cortex-A57 cores (cpu:0, cpu:3-5): the measured layer times x --a57 (default 8);
  - Denver 2 cores (cpu:1-2): x --denver (default 5);
  - the GPU: per layer max(FLOPs / --gpu-gflops GFLOP/s, bytes / --gpu-gbs GB/s) + --gpu-launch-ms
    (defaults 250 GFLOP/s, 25 GB/s, 0.02 ms: a share of the Pascal GPU's 665 GFLOP/s peak and the
    LPDDR4's 58 GB/s), calibration slices as the sum of their layers plus one launch;
  - transfers: the measured fits x 4 on the cores; on the GPU alpha = 1 / 10 GB/s, beta 0.01 ms
    (shared memory).
With --cpu-total-ms / --gpu-total-ms every CPU device's (GPU's) layer times and calibration runs
(not its transfers) are then scaled so that its layers sum to that total per frame (seed 001 Table 5 row
(0): --gpu-total-ms 13.05 --cpu-total-ms 45.45 for MobileNet); --only keeps the platform devices
with those ids (e.g. a57,gpu on energy/platforms/jetson_tx2.json).
The conditions record the factors and say "synthetic"; the results are simulations, never a
measurement of a TX2.

usage: scripts/tx2_sim_profile.py MEASURED.json -o TX2.json [--platform PATH] [--a57 8]
         [--denver 5] [--gpu-gflops 250] [--gpu-gbs 25] [--gpu-launch-ms 0.02]
         [--cpu-total-ms MS] [--gpu-total-ms MS] [--only ID,ID]
"""
import argparse
import copy
import json
import os


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("measured")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--platform",
                    default=os.path.join(here, "..", "energy", "platforms", "jetson_tx2_cores.json"))
    ap.add_argument("--a57", type=float, default=8.0)
    ap.add_argument("--denver", type=float, default=5.0)
    ap.add_argument("--gpu-gflops", type=float, default=250.0)
    ap.add_argument("--gpu-gbs", type=float, default=25.0)
    ap.add_argument("--gpu-launch-ms", type=float, default=0.02)
    ap.add_argument("--cpu-total-ms", type=float, default=0.0)
    ap.add_argument("--gpu-total-ms", type=float, default=0.0)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    with open(a.measured) as f:
        prof = json.load(f)
    with open(a.platform) as f:
        platform = json.load(f)
    if a.only:
        keep = a.only.split(",")
        platform["devices"] = [d for d in platform["devices"] if d["id"] in keep]
        if len(platform["devices"]) != len(keep):
            raise SystemExit(f"--only {a.only}: the platform has ids "
                             f"{[d['id'] for d in json.load(open(a.platform))['devices']]}")
    src = prof["devices"][0]
    lvl = src["levels"][0]
    base = [c if c is not None else m for c, m in zip(lvl["layer_chain_ms"], lvl["layer_ms"])]
    if any(v is None for v in base):
        raise SystemExit("the measured profile lacks some layer times")
    layers = prof["model"]["layers"]
    out = copy.deepcopy(prof)
    out["platform"] = platform
    out["conditions"] = dict(prof["conditions"], host="synthetic jetson_tx2_cores", synthetic=(
        f"scaled from {src['device']} of {prof['conditions'].get('host', '?')}: A57 x{a.a57}, "
        f"Denver x{a.denver}, GPU {a.gpu_gflops} GFLOP/s, {a.gpu_gbs} GB/s, "
        f"{a.gpu_launch_ms} ms per layer"))
    devices = []
    for d in platform["devices"]:
        top = max(x["mhz"] for x in d["dvfs"])
        e = {"device": d["device"], "description": "synthetic: " + d["id"],
             "memory_bytes": d["memory_bytes"], "unsupported": {}}
        level = {"mhz": top, "set_by_governor": False, "energy_source": "",
                 "layer_ms": [None] * len(layers)}
        if d["kind"] == "cpu":
            k = a.denver if d["id"].startswith("denver") else a.a57
            level["layer_chain_ms"] = [v * k for v in base]
            level["slice_runs"] = [[r[0], r[1]] + [v * k for v in r[2:]] for r in lvl["slice_runs"]]
            for t in ("upload", "download"):
                fit = copy.deepcopy(lvl[t])
                fit["alpha_ms_per_byte"] *= 4
                fit["beta_ms"] *= 4
                fit["points"] = [[b, ms * 4] for b, ms in fit.get("points", [])]
                level[t] = fit
        else:
            gpu = []
            for L in layers:
                byts = L["input_bytes"] + L["weight_bytes"] + L["output_bytes"]
                gpu.append(max(L["flops"] / (a.gpu_gflops * 1e9), byts / (a.gpu_gbs * 1e9)) * 1e3
                           + a.gpu_launch_ms)
            level["layer_chain_ms"] = gpu
            runs = []
            for r in lvl["slice_runs"]:
                s = sum(gpu[r[0]:r[1]])
                runs.append([r[0], r[1], s + 0.05, s, s])
            level["slice_runs"] = runs
            fit = {"alpha_ms_per_byte": 1e-7, "beta_ms": 0.01, "r2": 1.0, "points": []}
            level["upload"] = fit
            level["download"] = copy.deepcopy(fit)
        total = a.gpu_total_ms if d["kind"] == "gpu" else a.cpu_total_ms
        if total > 0:
            k = total / sum(level["layer_chain_ms"])
            level["layer_chain_ms"] = [v * k for v in level["layer_chain_ms"]]
            level["slice_runs"] = [[r[0], r[1]] + [v * k for v in r[2:]]
                                   for r in level["slice_runs"]]
            out["conditions"]["synthetic"] += f"; {d['id']} scaled to {total} ms per frame"
        e["levels"] = [level]
        devices.append(e)
    out["devices"] = devices
    with open(a.output, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {a.output}: {len(devices)} devices, {len(layers)} layers (synthetic)")


if __name__ == "__main__":
    main()
