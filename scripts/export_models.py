#!/usr/bin/python3
"""Export Tessera's test models: torchvision CNNs with seeded random weights, as ONNX.

Run with Debian's interpreter (it carries python3-torch, python3-torchvision, python3-onnx):

    /usr/bin/python3 scripts/export_models.py --out DIR [--models a,b,...] [--seed 0] [--demo]

For each model NAME this writes, into DIR:

    NAME.onnx         opset 13, batch 1, input "input" [1,3,224,224], output "output",
                      exported with do_constant_folding=False (Tessera folds by itself)
    NAME.input.npy    float32 [1,3,224,224], N(0,1), seeded
    NAME.output.npy   float32, PyTorch's output for NAME.input.npy (eval mode, no_grad)
    NAME.json         metadata (versions, opset, seed, op counts, output stats, top-5, sha256)

A model whose four files exist and whose json records the same seed, opset and script version
is skipped ("cached"). Every file is written to a temporary name and renamed into place, and the
json (the cache marker) is removed first and written last, so an interrupted run never leaves a
set that looks cached. See docs/models.md.
"""

import argparse
import glob
import hashlib
import io
import json
import math
import os
import sys
import tempfile
import time

SCRIPT_VERSION = 1
OPSET = 13
INPUT_SHAPE = (1, 3, 224, 224)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

DEFAULT_MODELS = ["mobilenet_v2", "resnet18", "resnet50", "squeezenet1_1", "vgg16", "alexnet"]
EXTRA_MODELS = ["mobilenet_v3_small", "googlenet", "shufflenet_v2_x0_5", "densenet121",
                "efficientnet_b0"]
# Keyword arguments for the torchvision constructors (besides weights=None).
MODEL_KWARGS = {
    "googlenet": {"aux_logits": False, "init_weights": True},
}

# The ONNX operators Tessera's importer is meant to accept. An exported graph using anything
# else is reported as a failure.
SUPPORTED_OPS = frozenset("""
    Conv ConvTranspose Gemm MatMul BatchNormalization Relu LeakyRelu Clip Sigmoid HardSigmoid
    HardSwish Tanh Add Sub Mul Div MaxPool AveragePool GlobalAveragePool GlobalMaxPool Concat
    Split Slice Flatten Reshape Transpose Squeeze Unsqueeze Pad Softmax LRN ReduceMean Resize
    Identity Dropout Constant Shape Gather Cast
""".split())

# Activation scale the calibration pass aims for at the output of every Conv2d / Linear.
TARGET_STD = 1.0
# Number of seeded noise images the calibration pass uses.
CALIB_BATCH = 8


def import_deps():
    """Imports numpy, torch, torchvision and onnx, or exits with a clear message."""
    missing = []
    mods = {}
    for name in ("numpy", "torch", "torchvision", "onnx"):
        try:
            mods[name] = __import__(name)
        except ImportError as e:  # pragma: no cover - depends on the machine
            missing.append(f"{name} ({e})")
    if missing:
        sys.stderr.write(
            "export_models: missing Python modules: " + ", ".join(missing) + "\n"
            f"  interpreter: {sys.executable}\n"
            "  Run this script with Debian's interpreter, /usr/bin/python3, after installing\n"
            "  python3-numpy python3-torch python3-torchvision python3-onnx, e.g. with\n"
            "  scripts/install-deps.sh\n")
        sys.exit(2)
    return mods["numpy"], mods["torch"], mods["torchvision"], mods["onnx"]


# Set by load_deps() in main(), so that --help works without them.
np = torch = torchvision = onnx = nn = None


def load_deps():
    global np, torch, torchvision, onnx, nn
    np, torch, torchvision, onnx = import_deps()
    nn = torch.nn


# ---------------------------------------------------------------------------------------------
# Files


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path, data):
    """Writes data to a temporary file beside path, then renames it over path."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def npy_bytes(array):
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def json_bytes(obj):
    return (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode()


def paths_for(out_dir, name):
    return {
        "onnx": os.path.join(out_dir, name + ".onnx"),
        "input": os.path.join(out_dir, name + ".input.npy"),
        "output": os.path.join(out_dir, name + ".output.npy"),
        "json": os.path.join(out_dir, name + ".json"),
    }


def remove_stale_temps(out_dir, name):
    """Removes temporary files a killed run left behind for this model."""
    for tmp in glob.glob(os.path.join(glob.escape(out_dir), "." + glob.escape(name) + ".*.tmp")):
        try:
            os.unlink(tmp)
        except OSError:
            pass


def is_cached(out_dir, name, seed):
    p = paths_for(out_dir, name)
    if not all(os.path.isfile(x) for x in p.values()):
        return False
    try:
        with open(p["json"]) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return False
    if (meta.get("seed"), meta.get("opset"), meta.get("script_version")) != \
            (seed, OPSET, SCRIPT_VERSION):
        return False
    # Cheap consistency check: the files are the ones the json describes.
    sizes = meta.get("file_sizes", {})
    for key in ("onnx", "input", "output"):
        if sizes.get(key) != os.path.getsize(p[key]):
            return False
    return True


# ---------------------------------------------------------------------------------------------
# Models


def seeded_normal(seed, stream, shape):
    """float32 N(0,1) from NumPy's PCG64, one independent stream per (seed, stream)."""
    rng = np.random.default_rng([seed, stream])
    return rng.standard_normal(shape, dtype=np.float32)


def randomize_batchnorm(model, gen):
    """Gives every BatchNorm non-trivial running statistics and affine parameters."""
    count = 0
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            c = m.num_features
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(c, generator=gen) + 0.5)   # U(0.5, 1.5)
                if m.affine:
                    m.weight.copy_(torch.rand(c, generator=gen) + 0.5)    # U(0.5, 1.5)
                    m.bias.copy_(torch.randn(c, generator=gen) * 0.1)     # N(0, 0.1)
            count += 1
    return count


def calibrate(model, x, gen):
    """Data-dependent rescaling on a batch of seeded noise images (LSUV-style).

    1. One forward pass rescales every Conv2d / Linear so its output std is TARGET_STD.
       Scaling a layer's weight and bias by s scales its output by exactly s, so a forward hook
       can rescale the parameters and pass the rescaled output on: downstream layers see the
       corrected activations, and one pass calibrates the whole network. BatchNorm layers keep
       their random statistics; their inputs now have unit scale, which is what
       running_var ~ U(0.5, 1.5) assumes, so activations neither vanish nor explode.
    2. The last such layer (the classifier) is then centred: its bias absorbs the per-class
       mean over the batch. A random network maps all noise images to nearly the same logits
       (global pooling averages the input-dependent part away), so without this the output
       would be ~99% a constant and the top-5 would not depend on the input. After centring,
       the output's variation is mostly input-dependent and is rescaled to std TARGET_STD.
    Zero biases met on the way get small random values first (see the hook).
    Returns a dict: layers rescaled, zero biases randomised, whether the classifier was centred.
    """
    state = {"count": 0, "biased": 0, "last": None}

    def hook(module, inputs, output):
        if module.bias is not None and not bool(module.bias.detach().any()):
            # torchvision zero-initialises many biases; all-zero biases would leave bias
            # handling untested (and the exporter merges identical initializers behind
            # Identity nodes). Give them N(0, (0.1 * output std)^2) values.
            std0 = float(output.detach().float().std())
            b = torch.randn(module.bias.shape, generator=gen) * (0.1 * std0)
            with torch.no_grad():
                module.bias.copy_(b)
            shape = [1, -1] + [1] * (output.dim() - 2)
            output = output + b.reshape(shape)
            state["biased"] += 1
        std = float(output.detach().float().std())
        if not math.isfinite(std) or std < 1e-12:
            return None
        s = TARGET_STD / std
        with torch.no_grad():
            module.weight.mul_(s)
            if module.bias is not None:
                module.bias.mul_(s)
        state["count"] += 1
        out = output * s
        state["last"] = (module, out.detach())
        return out

    handles = [m.register_forward_hook(hook) for m in model.modules()
               if isinstance(m, (nn.Conv2d, nn.Linear))]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()

    centred = False
    if state["last"] is not None and state["last"][0].bias is not None:
        module, out = state["last"]
        dims = [d for d in range(out.dim()) if d != 1]
        mean = out.mean(dim=dims, keepdim=True)
        std = float((out - mean).std())
        if math.isfinite(std) and std > 1e-12:
            s = TARGET_STD / std
            with torch.no_grad():
                module.bias.sub_(mean.reshape(-1))
                module.weight.mul_(s)
                module.bias.mul_(s)
            centred = True
    return {"rescaled_layers": state["count"], "randomised_zero_biases": state["biased"],
            "classifier_centred": centred}


def build_model(name, seed):
    torch.manual_seed(seed)
    ctor = getattr(torchvision.models, name)
    model = ctor(weights=None, **MODEL_KWARGS.get(name, {}))
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    n_bn = randomize_batchnorm(model, gen)
    calib = torch.from_numpy(seeded_normal(seed, 2, (CALIB_BATCH,) + INPUT_SHAPE[1:]))
    calib_info = calibrate(model, calib, gen)
    model.eval()
    return model, n_bn, calib_info


def op_counts(model_proto):
    counts = {}
    for node in model_proto.graph.node:
        key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def check_onnx(model_proto):
    """onnx.checker, opset and op-type checks; returns (op counts, list of problems)."""
    problems = []
    onnx.checker.check_model(model_proto)
    opsets = {o.domain: o.version for o in model_proto.opset_import}
    if opsets.get("", opsets.get("ai.onnx")) != OPSET:
        problems.append(f"opset_import is {opsets}, expected {OPSET}")
    counts = op_counts(model_proto)
    unsupported = sorted(set(counts) - SUPPORTED_OPS)
    if unsupported:
        problems.append("operators outside Tessera's supported set: " + ", ".join(unsupported))
    return counts, problems


def export_onnx(model, x):
    assert not model.training
    buf = io.BytesIO()
    torch.onnx.export(
        model, (x,), buf,
        export_params=True,
        opset_version=OPSET,
        do_constant_folding=False,
        input_names=["input"],
        output_names=["output"],
        dynamic_axes=None,
        # PRESERVE on an eval() model exports inference-mode operators exactly like EVAL, but
        # skips the exporter's eval peephole pass, which would fold every BatchNormalization
        # into the Conv before it. Folding is Tessera's job, so the graph keeps them.
        training=torch.onnx.TrainingMode.PRESERVE,
    )
    return buf.getvalue()


def top5(output):
    flat = output.reshape(-1)
    order = np.argsort(-flat, kind="stable")[:6]
    return [int(i) for i in order[:5]], [float(flat[i]) for i in order[:5]], \
        (float(flat[order[4]] - flat[order[5]]) if flat.size > 5 else None)


def export_one(out_dir, name, seed):
    p = paths_for(out_dir, name)
    t0 = time.perf_counter()
    model, n_bn, calib_info = build_model(name, seed)
    t_build = time.perf_counter() - t0

    x_np = seeded_normal(seed, 1, INPUT_SHAPE)
    x = torch.from_numpy(x_np)
    t0 = time.perf_counter()
    with torch.no_grad():
        y = model(x)
    t_run = time.perf_counter() - t0
    y_np = y.detach().numpy().astype(np.float32)

    t0 = time.perf_counter()
    onnx_data = export_onnx(model, x)
    t_export = time.perf_counter() - t0

    t0 = time.perf_counter()
    proto = onnx.load_from_string(onnx_data)
    counts, problems = check_onnx(proto)
    t_check = time.perf_counter() - t0

    out_std = float(y_np.std())
    if not (0.1 <= out_std <= 10.0) or not np.all(np.isfinite(y_np)):
        problems.append(f"output std {out_std:.4g} is outside [0.1, 10] or not finite")

    idx, vals, margin = top5(y_np)
    input_bytes, output_bytes = npy_bytes(x_np), npy_bytes(y_np)
    meta = {
        "model": name,
        "script_version": SCRIPT_VERSION,
        "seed": seed,
        "opset": OPSET,
        "torch_version": torch.__version__,
        "torchvision_version": torchvision.__version__,
        "onnx_version": onnx.__version__,
        "constructor_kwargs": dict(weights=None, **MODEL_KWARGS.get(name, {})),
        "input": {"name": "input", "shape": list(INPUT_SHAPE), "dtype": "float32",
                  "distribution": "N(0,1), numpy default_rng([seed, 1])"},
        "output": {"name": "output", "shape": list(y_np.shape), "dtype": "float32"},
        "output_max_abs": float(np.abs(y_np).max()),
        "output_mean": float(y_np.mean()),
        "output_std": out_std,
        "top5_indices": idx,
        "top5_values": vals,
        "top5_margin": margin,
        "batchnorm_layers": n_bn,
        "calibration": dict(images=CALIB_BATCH, target_std=TARGET_STD, **calib_info),
        "op_counts": counts,
        "num_nodes": len(proto.graph.node),
        "num_initializers": len(proto.graph.initializer),
        "num_parameters": int(sum(p_.numel() for p_ in model.parameters())),
        "onnx_sha256": hashlib.sha256(onnx_data).hexdigest(),
        "file_sizes": {"onnx": len(onnx_data), "input": len(input_bytes),
                       "output": len(output_bytes)},
        "problems": problems,
    }
    if problems:
        return meta, (t_build, t_run, t_export, t_check, 0.0)

    # The json is the cache marker: remove it first, write it last.
    t0 = time.perf_counter()
    try:
        os.unlink(p["json"])
    except FileNotFoundError:
        pass
    atomic_write_bytes(p["onnx"], onnx_data)
    atomic_write_bytes(p["input"], input_bytes)
    atomic_write_bytes(p["output"], output_bytes)
    atomic_write_bytes(p["json"], json_bytes(meta))
    t_write = time.perf_counter() - t0
    return meta, (t_build, t_run, t_export, t_check, t_write)


# ---------------------------------------------------------------------------------------------
# Demo input


def demo_image(seed, size=224):
    """A seeded smooth synthetic RGB image in [0, 1], HWC: low-frequency waves plus blobs."""
    rng = np.random.default_rng([seed, 3])
    yy, xx = np.meshgrid(np.linspace(0.0, 1.0, size), np.linspace(0.0, 1.0, size), indexing="ij")
    img = np.zeros((size, size, 3), dtype=np.float64)
    for c in range(3):
        acc = rng.uniform(-0.5, 0.5) * xx + rng.uniform(-0.5, 0.5) * yy
        for _ in range(4):
            fx, fy = rng.uniform(0.5, 3.0, size=2)
            ph = rng.uniform(0, 2 * math.pi)
            acc += rng.uniform(0.1, 0.3) * np.sin(2 * math.pi * (fx * xx + fy * yy) + ph)
        for _ in range(3):
            cx, cy = rng.uniform(0.2, 0.8, size=2)
            r = rng.uniform(0.05, 0.2)
            acc += rng.uniform(-0.6, 0.6) * np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * r * r))
        img[:, :, c] = acc
    lo, hi = img.min(), img.max()
    return ((img - lo) / (hi - lo)).astype(np.float32)


def demo_cached(out_dir, seed):
    p = paths_for(out_dir, "demo")
    files = [p["input"], p["output"], p["json"], os.path.join(out_dir, "demo.ppm")]
    if not all(os.path.isfile(x) for x in files):
        return False
    try:
        with open(p["json"]) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return False
    return (meta.get("seed"), meta.get("opset"), meta.get("script_version")) == \
        (seed, OPSET, SCRIPT_VERSION)


def write_demo(out_dir, seed):
    """demo.input.npy (normalised NCHW), demo.ppm (the image), demo.output.npy, demo.json.

    The demo model is mobilenet_v2.onnx itself (same seed, same weights); only the input is
    different: a smooth synthetic picture instead of white noise.
    """
    model, _, _ = build_model("mobilenet_v2", seed)
    img = demo_image(seed)
    chw = (img - np.array(IMAGENET_MEAN, np.float32)) / np.array(IMAGENET_STD, np.float32)
    x_np = np.ascontiguousarray(chw.transpose(2, 0, 1)[None]).astype(np.float32)
    with torch.no_grad():
        y_np = model(torch.from_numpy(x_np)).numpy().astype(np.float32)
    idx, vals, margin = top5(y_np)
    ppm = b"P6\n%d %d\n255\n" % (img.shape[1], img.shape[0]) + \
        np.clip(np.rint(img * 255.0), 0, 255).astype(np.uint8).tobytes()
    p = paths_for(out_dir, "demo")
    try:
        os.unlink(p["json"])
    except FileNotFoundError:
        pass
    atomic_write_bytes(os.path.join(out_dir, "demo.ppm"), ppm)
    atomic_write_bytes(p["input"], npy_bytes(x_np))
    atomic_write_bytes(p["output"], npy_bytes(y_np))
    atomic_write_bytes(p["json"], json_bytes({
        "model": "mobilenet_v2", "model_file": "mobilenet_v2.onnx",
        "model_json": "mobilenet_v2.json",
        "script_version": SCRIPT_VERSION, "seed": seed, "opset": OPSET,
        "input": {"name": "input", "shape": list(x_np.shape), "dtype": "float32",
                  "normalisation": {"mean": IMAGENET_MEAN, "std": IMAGENET_STD},
                  "image": "demo.ppm"},
        "output_max_abs": float(np.abs(y_np).max()),
        "top5_indices": idx, "top5_values": vals, "top5_margin": margin,
    }))
    return idx


# ---------------------------------------------------------------------------------------------


def fmt_size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024.0


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Export Tessera's test models (torchvision, seeded random weights) to ONNX.")
    ap.add_argument("--out", required=True, help="output directory (created if missing)")
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS),
                    help="comma-separated list, or 'all' (default: %(default)s; extra: "
                    + ",".join(EXTRA_MODELS) + ")")
    ap.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    ap.add_argument("--demo", action="store_true",
                    help="also write the README demo input (demo.*) for mobilenet_v2")
    ap.add_argument("--force", action="store_true", help="re-export even if cached")
    args = ap.parse_args(argv)
    load_deps()

    if args.models.strip() == "all":
        names = DEFAULT_MODELS + EXTRA_MODELS
    else:
        names = [n.strip() for n in args.models.split(",") if n.strip()]
    known = DEFAULT_MODELS + EXTRA_MODELS
    unknown = [n for n in names if n not in known]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(known)}")
    if args.demo and "mobilenet_v2" not in names:
        names.append("mobilenet_v2")
    missing_arch = [n for n in names if not hasattr(torchvision.models, n)]
    if missing_arch:
        sys.stderr.write(f"export_models: torchvision {torchvision.__version__} lacks "
                         f"{', '.join(missing_arch)}\n")
        return 1

    os.makedirs(args.out, exist_ok=True)
    print(f"export_models: torch {torch.__version__}, torchvision {torchvision.__version__}, "
          f"onnx {onnx.__version__}, opset {OPSET}, seed {args.seed}, "
          f"{torch.get_num_threads()} threads -> {args.out}", flush=True)

    failed = []
    t_all = time.perf_counter()
    for name in names:
        p = paths_for(args.out, name)
        if not args.force and is_cached(args.out, name, args.seed):
            print(f"  {name:20s} cached ({fmt_size(os.path.getsize(p['onnx']))})", flush=True)
            continue
        remove_stale_temps(args.out, name)
        t0 = time.perf_counter()
        try:
            meta, (tb, tr, te, tc, tw) = export_one(args.out, name, args.seed)
        except Exception as e:  # report and carry on with the other models
            print(f"  {name:20s} FAILED: {type(e).__name__}: {e}", flush=True)
            failed.append(name)
            continue
        total = time.perf_counter() - t0
        if meta["problems"]:
            print(f"  {name:20s} FAILED ({total:.1f} s): " + "; ".join(meta["problems"]),
                  flush=True)
            print(f"  {'':20s} ops: {meta['op_counts']}", flush=True)
            failed.append(name)
            continue
        print(f"  {name:20s} {total:6.1f} s (build {tb:.1f}, torch {tr:.2f}, export {te:.1f}, "
              f"check {tc:.1f}, write {tw:.1f})  {fmt_size(meta['file_sizes']['onnx'])}, "
              f"{meta['num_nodes']} nodes, out std {meta['output_std']:.3f}, "
              f"top-5 {meta['top5_indices']}", flush=True)

    if args.demo and "mobilenet_v2" in failed:
        failed.append("demo")
    elif args.demo and not args.force and demo_cached(args.out, args.seed):
        print(f"  {'demo':20s} cached", flush=True)
    elif args.demo:
        remove_stale_temps(args.out, "demo")
        t0 = time.perf_counter()
        idx = write_demo(args.out, args.seed)
        print(f"  {'demo':20s} {time.perf_counter() - t0:6.1f} s  demo.input.npy, demo.ppm "
              f"(model mobilenet_v2.onnx), top-5 {idx}", flush=True)

    print(f"export_models: {len(names) - len(failed)}/{len(names)} ok in "
          f"{time.perf_counter() - t_all:.1f} s", flush=True)
    if failed:
        sys.stderr.write(f"export_models: failed: {', '.join(failed)}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
