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

With int8 among --precisions it first makes --calib-samples calibration inputs (N(0, 1), the
exported models' input distribution, seeds 1..N; the timed input is seed 0's, held apart),
calibrates the .tsr with `tessera calibrate` (percentile) and quantises the ONNX file with ONNX
Runtime's quantize_static (QDQ, per-channel s8 weights, s8 activations, MinMax) on the
same inputs; ONNX Runtime int8 then joins the alternation as the peer of Tessera int8, and the
fidelity of each reduced precision against its own f32 (relative L2, top-1 agreement over
--fidelity-inputs held-out inputs, seeds 1000..) is printed after the latency table. The
precision `qdq` runs Tessera's int8 kernels on ONNX Runtime's QDQ model itself (converted; its
scales and zero points, no Tessera calibration): both engines on the same quantised file.

With --openvino (the Python package openvino) OpenVINO's CPU plugin joins the alternation on the
same ONNX file, with the same thread count (INFERENCE_NUM_THREADS, one stream, latency hint,
synchronous requests): at f32 (INFERENCE_PRECISION_HINT f32) and at its default precision on this
CPU (no hint: bf16 where it picks bf16, e.g. on AMX hosts; the precision it chose is printed), and
with int8 on ONNX Runtime's QDQ model. A second table then gives Tessera against each.
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


def qdq_tsr(tsr):
    """Where ONNX Runtime's QDQ model of `tsr`, converted, is written."""
    return tsr[:-len(".tsr")] + ".qdq.tsr"


def model_and_precision(tsr, precision):
    """The model file and `tessera run --precision` of a precision column ("qdq": int8 on
    ONNX Runtime's QDQ model, with its own quantisation)."""
    return (qdq_tsr(tsr), "int8") if precision == "qdq" else (tsr, precision)


def calibration_inputs(x, count, seed0, out_dir):
    """`count` N(0, 1) inputs shaped like x (seeds seed0..), written as .npy files to out_dir."""
    os.makedirs(out_dir, exist_ok=True)
    arrays = []
    for i in range(count):
        a = np.random.default_rng(seed0 + i).standard_normal(x.shape).astype(np.float32)
        np.save(os.path.join(out_dir, "c%03d.npy" % i), a)
        arrays.append(a)
    return arrays


def ort_int8_model(onnx_path, input_name, arrays, out_path, unsigned=False):
    """ONNX Runtime's static int8 model (QDQ, per-channel weights) calibrated on `arrays`; s8
    activations, or u8 with `unsigned`."""
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{input_name: a} for a in arrays])

        def get_next(self):
            return next(self.it, None)

    pre = out_path + ".pre.onnx"
    quant_pre_process(onnx_path, pre)
    quantize_static(pre, out_path, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8 if unsigned else QuantType.QInt8,
                    weight_type=QuantType.QInt8)
    return out_path


def fidelity(y, y32):
    """(relative L2, top-1 agreement) of outputs y against y32, lists of [1, classes] arrays."""
    num = sum(float(np.sum((a - b) ** 2)) for a, b in zip(y, y32))
    den = sum(float(np.sum(b ** 2)) for b in y32)
    top1 = np.mean([int(np.argmax(a) == np.argmax(b)) for a, b in zip(y, y32)])
    return (num / den) ** 0.5, top1


def tessera_outputs(tessera, tsr, inputs, precision, out_dir):
    """Tessera's outputs for each input file on cpu at `precision`."""
    ys = []
    for i, inp in enumerate(inputs):
        out = os.path.join(out_dir, "y_%s_%d.npy" % (precision, i))
        subprocess.run([tessera, "run", tsr, "-i", inp, "-d", "cpu", "--precision", precision,
                        "-o", out], check=True, capture_output=True)
        ys.append(np.load(out))
    return ys


def check_outputs(tessera, tsr, onnx_path, inp, x, out_dir):
    """(outputs, max abs error, max |ORT output|) of Tessera f32 on cpu against ONNX Runtime."""
    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    want = sess.run(None, {sess.get_inputs()[0].name: x})
    paths = [os.path.join(out_dir, "check_%d.npy" % i) for i in range(len(want))]
    cmd = [tessera, "run", tsr, "-i", inp, "-d", "cpu"]
    for path in paths:
        cmd += ["-o", path]
    subprocess.run(cmd, check=True, capture_output=True)
    err = ref = 0.0
    for path, w in zip(paths, want):
        got = np.load(path)
        if got.shape != w.shape:
            raise RuntimeError("%s: output shape %s, ONNX Runtime %s" % (tsr, got.shape, w.shape))
        if w.size:
            err = max(err, float(np.max(np.abs(got.astype(np.float64) - w))))
            ref = max(ref, float(np.max(np.abs(w))))
    return len(want), err, ref


def openvino_compiles(path, config):
    """Whether OpenVINO compiles and runs `path` with `config`, tried in a child process: OpenVINO
    2026.4 crashes (SIGSEGV) compiling some QDQ models (ONNX Runtime's DenseNet-121)."""
    code = ("import sys, json, numpy as np, openvino as ov\n"
            "c = ov.Core(); m = c.compile_model(c.read_model(sys.argv[1]), 'CPU', json.loads(sys.argv[2]))\n"
            "r = m.create_infer_request()\n"
            "r.infer([np.zeros([d if isinstance(d, int) else 1 for d in m.inputs[0].get_partial_shape().get_min_shape()], np.float32)])\n")
    out = subprocess.run([sys.executable, "-c", code, path, json.dumps(config)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        print("OpenVINO cannot run %s (exit %d): left out" % (path, out.returncode),
              file=sys.stderr, flush=True)
    return out.returncode == 0


class OpenVinoPeer:
    """OpenVINO's compiled models of one ONNX file at `threads` threads: "f32", "default" and,
    given a QDQ model, "int8"; each runs synchronously on the input. A model OpenVINO cannot
    compile (openvino_compiles) is left out; its columns read nan. OpenVINO 2026.4 finds no
    implementation for ONNX Runtime's s8-activation QDQ models on AMX hosts: there "int8" runs the
    u8-activation QDQ model `qdq_u8()` makes (same calibration inputs), and says so."""

    def __init__(self, onnx_path, qdq_path, threads, x, qdq_u8=None):
        import openvino as ov
        core = ov.Core()
        base = {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1,
                "PERFORMANCE_HINT": "LATENCY"}
        self.requests = {}
        self.precision = {}
        for label, path, extra in [("f32", onnx_path, {"INFERENCE_PRECISION_HINT": "f32"}),
                                   ("default", onnx_path, {}),
                                   ("int8", qdq_path, {})]:
            if path is None:
                continue
            if not openvino_compiles(path, {**base, **extra}):
                if label != "int8" or qdq_u8 is None:
                    continue
                path = qdq_u8()
                if not openvino_compiles(path, {**base, **extra}):
                    continue
                label_note = " (u8 activations)"
            else:
                label_note = ""
            compiled = core.compile_model(core.read_model(path), "CPU", {**base, **extra})
            hint = compiled.get_property("INFERENCE_PRECISION_HINT")
            self.precision[label] = (hint.to_string() if hasattr(hint, "to_string") else
                                     str(hint)) + label_note
            req = compiled.create_infer_request()
            req.infer([x])  # warm-up
            self.requests[label] = req
        self.x = x

    def batch(self, label, n):
        req, x, ms = self.requests[label], self.x, []
        for _ in range(n):
            t0 = time.perf_counter()
            req.infer([x])
            ms.append((time.perf_counter() - t0) * 1e3)
        return ms


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
    ap.add_argument("--shape-from-input", action="store_true",
                    help="convert with --shape INPUT=<the .input.npy's shape> (models with "
                    "symbolic sizes, e.g. detection and segmentation exports)")
    ap.add_argument("--check", action="store_true",
                    help="also compare every output of one Tessera f32 run on cpu with ONNX "
                    "Runtime's on the timed input (max abs error, max |ORT output|)")
    ap.add_argument("--precisions", default="f32",
                    help="Tessera precisions to time, each in its own batch of the alternation "
                         "(e.g. f32,bf16; docs/precision.md); the GFLOP/s column counts f32 FLOPs")
    ap.add_argument("--calib-samples", type=int, default=16,
                    help="with int8: calibration inputs for Tessera and ONNX Runtime")
    ap.add_argument("--fidelity-inputs", type=int, default=8,
                    help="held-out inputs for the fidelity of the reduced precisions")
    ap.add_argument("--openvino", action="store_true",
                    help="also time OpenVINO (f32, its default precision, int8 on the QDQ model)")
    args = ap.parse_args()
    precisions = args.precisions.split(",")
    # "qdq": Tessera's int8 kernels on ONNX Runtime's own QDQ model (its scales and zero points).
    int8 = "int8" in precisions or "qdq" in precisions
    fid_rows = []
    check_rows = []
    ov_rows = []

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
        x = np.load(inp)
        convert = [args.tessera, "convert", onnx_path, "-o", tsr]
        if args.shape_from_input:
            s0 = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
            convert += ["--shape", "%s=%s" % (s0.get_inputs()[0].name,
                                              "x".join(str(d) for d in x.shape))]
        subprocess.run(convert, check=True, capture_output=True)
        flops = model_flops(args.tessera, tsr)
        if args.check:
            check_rows.append((name,) + check_outputs(args.tessera, tsr, onnx_path, inp, x, tmp))
        ort_q = qdq_u8 = None
        if int8:
            cdir = os.path.join(tmp, name + "_calib")
            arrays = calibration_inputs(x, args.calib_samples, 1, cdir)
            subprocess.run([args.tessera, "calibrate", tsr, "-i", cdir], check=True,
                           capture_output=True)
            s0 = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
            ort_q = ort_int8_model(onnx_path, s0.get_inputs()[0].name, arrays,
                                   os.path.join(tmp, name + ".int8.onnx"))
            u8_path = os.path.join(tmp, name + ".int8u8.onnx")
            qdq_u8 = (lambda onnx_path=onnx_path, n0=s0.get_inputs()[0].name, arrays=arrays,
                      u8_path=u8_path: u8_path if os.path.exists(u8_path) else
                      ort_int8_model(onnx_path, n0, arrays, u8_path, unsigned=True))
            subprocess.run([args.tessera, "convert", ort_q, "-o", qdq_tsr(tsr)], check=True,
                           capture_output=True)
        # Fidelity on held-out inputs (seeds 1000..), each reduced precision against its f32.
        if any(p != "f32" for p in precisions) and args.fidelity_inputs > 0:
            fdir = os.path.join(tmp, name + "_heldout")
            held = calibration_inputs(x, args.fidelity_inputs, 1000, fdir)
            files = [os.path.join(fdir, "c%03d.npy" % i) for i in range(len(held))]
            y32 = tessera_outputs(args.tessera, tsr, files, "f32", tmp)
            for p in precisions:
                if p == "f32":
                    continue
                m, prec = model_and_precision(tsr, p)
                ys = tessera_outputs(args.tessera, m, files, prec, tmp)
                l2, top1 = fidelity(ys, y32)
                fid_rows.append((name, "Tessera " + p, l2, top1, len(files)))
            if ort_q is not None:
                s32 = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
                sq = ort.InferenceSession(ort_q, providers=["CPUExecutionProvider"])
                n0 = s32.get_inputs()[0].name
                l2, top1 = fidelity([sq.run(None, {n0: a})[0] for a in held],
                                    [s32.run(None, {n0: a})[0] for a in held])
                fid_rows.append((name, "ONNX Runtime int8", l2, top1, len(files)))
        for threads in [int(t) for t in args.threads.split(",")]:
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
            feed = {sess.get_inputs()[0].name: x}
            sess.run(None, feed)  # warm-up
            qsess = None
            if ort_q is not None:
                qsess = ort.InferenceSession(ort_q, so, providers=["CPUExecutionProvider"])
                qsess.run(None, feed)
            ortq_ms = []
            ov = OpenVinoPeer(onnx_path, ort_q, threads, x, qdq_u8) if args.openvino else None
            ov_ms = {k: [] for k in (ov.requests if ov else {})}
            device = "cpu:0" if threads == 1 else "cpu:0-%d" % (threads - 1)
            ort_ms, tes_ms = [], {p: [] for p in precisions}
            batch = args.batch
            while len(ort_ms) < args.runs or min(len(v) for v in tes_ms.values()) < args.runs:
                for _ in range(batch):
                    t0 = time.perf_counter()
                    sess.run(None, feed)
                    ort_ms.append((time.perf_counter() - t0) * 1e3)
                time.sleep(args.pause)
                if qsess is not None:
                    for _ in range(batch):
                        t0 = time.perf_counter()
                        qsess.run(None, feed)
                        ortq_ms.append((time.perf_counter() - t0) * 1e3)
                    time.sleep(args.pause)
                for label in ov_ms:
                    ov_ms[label].extend(ov.batch(label, batch))
                    time.sleep(args.pause)
                # tessera run: --warmup untimed runs, then `batch` timed runs, each run's time.
                for p in precisions:
                    m, prec = model_and_precision(tsr, p)
                    tes_ms[p].extend(tessera_batch(args.tessera, m, inp, device, batch,
                                                   args.warmup, prec))
                    time.sleep(args.pause)
            o = statistics.median(ort_ms)
            oq = statistics.median(ortq_ms) if ortq_ms else float("nan")
            peak = peaks.get(threads, args.peak * 1e9 * threads)
            for p in precisions:
                t = statistics.median(tes_ms[p])
                rows.append((name, threads, p, t, o, t / o, oq, t / oq, flops / t * 1e-6,
                             flops / o * 1e-6, peak * 1e-9))
                print("%-14s %d thr %-5s tessera %8.2f ms  ort %8.2f ms  ratio %.2f"
                      % (name, threads, p, t, o, t / o), file=sys.stderr, flush=True)
                if ov is not None:
                    nan = float("nan")
                    med = {k: statistics.median(v) for k, v in ov_ms.items()}
                    f, d, q = med.get("f32", nan), med.get("default", nan), med.get("int8", nan)
                    ov_rows.append((name, threads, p, t, f, t / f, d,
                                    ov.precision.get("default", "-"), t / d, q, t / q))
                    print("%-14s %d thr %-5s tessera %8.2f ms  openvino f32 %8.2f  default (%s) "
                          "%8.2f  int8%s %8.2f ms" % (name, threads, p, t, f,
                                                       ov.precision.get("default", "-"), d,
                                                       ov.precision.get("int8", "")[-17:]
                                                       if "u8" in ov.precision.get("int8", "")
                                                       else "", q),
                          file=sys.stderr, flush=True)

    print("| model | threads | precision | Tessera ms | ORT f32 ms | Tessera/ORT | ORT int8 ms | Tessera/ORT int8 | Tessera GFLOP/s | ORT GFLOP/s | FMA peak GFLOP/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %d | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f | %.0f |" % r)
    if ov_rows:
        print()
        print("| model | threads | precision | Tessera ms | OpenVINO f32 ms | Tessera/OV f32 | OpenVINO default ms | its precision | Tessera/OV default | OpenVINO int8 (QDQ) ms | Tessera/OV int8 |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in ov_rows:
            print("| %s | %d | %s | %.2f | %.2f | %.2f | %.2f | %s | %.2f | %.2f | %.2f |" % r)
    if check_rows:
        print()
        print("| model | outputs | max abs error vs ORT | max abs ORT output |")
        print("|---|---|---|---|")
        for r in check_rows:
            print("| %s | %d | %.2e | %.3g |" % r)
    if fid_rows:
        print()
        print("| model | precision | relative L2 vs its f32 | top-1 agreement | held-out inputs |")
        print("|---|---|---|---|---|")
        for r in fid_rows:
            print("| %s | %s | %.4f | %.0f%% | %d |" % (r[0], r[1], r[2], 100 * r[3], r[4]))


if __name__ == "__main__":
    main()
