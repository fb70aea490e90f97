#!/usr/bin/env python3
"""What the cold slowdown of calibration runs scales with (docs/log/cost-model.md, 2026-11-27).

usage: scripts/cold_fit.py PROFILE.json...
"""
import json
import sys

import numpy as np

# Cold slowdown of calibration runs: own layer sum (layers_ms) vs the same layers in the chain run
# right before (chain_ms), against two models scaled by the evicted share (1 - touched share):
# multiplicative (the cost model's cold_scale) and additive per touched byte (weights + inputs).
for path in sys.argv[1:]:
    p = json.load(open(path))
    L = p["model"]["layers"]
    touched = [l["weight_bytes"] + l["input_bytes"] + l["output_bytes"] for l in L]
    T = sum(touched)
    for d in p["devices"]:
        for lv in d["levels"]:
            rows = [r for r in lv["slice_runs"] if len(r) >= 5 and r[4] > 0]
            if not rows: continue
            chain = np.array([r[4] for r in rows]); own = np.array([r[3] for r in rows])
            tb = np.array([sum(touched[r[0]:r[1]]) for r in rows], float)
            wb = np.array([sum(L[i]["weight_bytes"] + L[i]["input_bytes"] for i in range(r[0], r[1])) for r in rows], float)
            share = 1 - tb / T
            y = own - chain; w = 1 / own
            def fit(X):
                c, *_ = np.linalg.lstsq(X * w[:, None], y * w, rcond=None)
                c = np.maximum(c, 0)
                return c, np.mean(np.abs((chain + X @ c) / own - 1)) * 100
            ca, ea = fit((chain * share)[:, None])
            cb, eb = fit((wb * share)[:, None])
            short = np.array([r[1] - r[0] <= 4 for r in rows])
            def short_err(X, c):
                e = (chain + X @ c) / own - 1
                return np.mean(e[short]) * 100 if short.any() else float('nan')
            print(f"{path.split('/')[-1]:28} {d['device']:5} runs {len(rows)} none {np.mean(np.abs(chain/own-1))*100:4.1f}% | mult {ea:4.1f}% (k={1+ca[0]:.3f}, short mean {short_err((chain*share)[:,None], ca):+.1f}%) | per-byte {eb:4.1f}% ({cb[0]*1e6:.4f} ms/MB, short mean {short_err((wb*share)[:,None], cb):+.1f}%)")
