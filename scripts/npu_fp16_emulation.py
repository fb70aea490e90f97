#!/usr/bin/env python3
"""An fp16 NPU emulated in ONNX, independent of Tessera: where does fp16 error come from?

The reference NPU driver stores weights and activations in fp16 and accumulates in fp32. This
script builds the same arithmetic from an exported model (docs/models.md) with ONNX Runtime:
BatchNormalization folded into the preceding Conv in fp32, every weight rounded to fp16, and
every layer output (and the model input) rounded to fp16 through a Cast pair. It then runs
seeded N(0, 1) inputs through the fp32 and the emulated model and reports

  * per layer: the relative L2 error of the layer output and its largest |activation| (fp16
    overflows at 65504);
  * the error of the pooled features and of the logits (how much the classifier amplifies);
  * the fp32 top-1 / top-2 margin in logit stds, the fp16 error of that margin, and top-1
    agreement.

Two steps, because Debian's onnx and pip's onnxruntime live in different interpreters:
  /usr/bin/python3 scripts/npu_fp16_emulation.py prepare --model resnet18 --out /tmp/emu
  python3 scripts/npu_fp16_emulation.py measure --model resnet18 --out /tmp/emu --samples 50
Models are read from TESSERA_MODEL_DIR (default ~/.cache/tessera/models).
"""
import argparse
import os
import sys

import numpy as np


def prepare(model_dir, name, out):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    m = onnx.load(os.path.join(model_dir, name + ".onnx"))
    g = m.graph
    inits = {i.name: numpy_helper.to_array(i).copy() for i in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    readers = {}
    for n in g.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    dropped = set()
    for n in g.node:  # fold BatchNormalization into the Conv before it, in fp32
        if n.op_type != "BatchNormalization":
            continue
        conv = producer[n.input[0]]
        if conv.op_type != "Conv" or len(readers[n.input[0]]) != 1:
            sys.exit(f"{name}: BatchNormalization {n.name} does not follow a Conv")
        scale, shift, mean, var = (inits[i] for i in n.input[1:5])
        eps = next((a.f for a in n.attribute if a.name == "epsilon"), 1e-5)
        k = scale / np.sqrt(var + eps)
        w = inits[conv.input[1]]
        inits[conv.input[1]] = (w * k[:, None, None, None]).astype(np.float32)
        if len(conv.input) < 3:
            conv.input.append(conv.output[0] + "_folded_bias")
            inits[conv.input[2]] = np.zeros(w.shape[0], np.float32)
        inits[conv.input[2]] = ((inits[conv.input[2]] - mean) * k + shift).astype(np.float32)
        conv.output[0] = n.output[0]
        dropped.add(n.name)
    nodes = [n for n in g.node if n.name not in dropped]
    used = {i for n in nodes for i in n.input}
    layers = [n.output[0] for n in nodes if n.op_type != "Constant"]

    def build(fp16):
        out_nodes = []
        x = g.input[0].name
        if fp16:
            out_nodes.append(helper.make_node("Cast", [x], [x + "__h"], to=TensorProto.FLOAT16))
            out_nodes.append(helper.make_node("Cast", [x + "__h"], [x + "__r"], to=TensorProto.FLOAT))
        for n in nodes:
            c = onnx.NodeProto()
            c.CopyFrom(n)
            if fp16:
                for k, i in enumerate(c.input):
                    if i == x:
                        c.input[k] = x + "__r"
            if not fp16 or n.op_type == "Constant":
                out_nodes.append(c)
                continue
            y = c.output[0]
            c.output[0] = y + "__raw"
            out_nodes.append(c)
            out_nodes.append(helper.make_node("Cast", [y + "__raw"], [y + "__h"], to=TensorProto.FLOAT16))
            out_nodes.append(helper.make_node("Cast", [y + "__h"], [y], to=TensorProto.FLOAT))
        weights = []
        for k, v in inits.items():
            if k not in used:
                continue
            if fp16 and v.dtype == np.float32:
                v = v.astype(np.float16).astype(np.float32)
            weights.append(numpy_helper.from_array(v, k))
        outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in layers]
        mm = helper.make_model(helper.make_graph(out_nodes, g.name, list(g.input), outs, weights),
                               opset_imports=m.opset_import)
        mm.ir_version = m.ir_version
        onnx.save(mm, os.path.join(out, f"{name}.{'f16' if fp16 else 'f32'}.onnx"))

    build(False)
    build(True)
    with open(os.path.join(out, name + ".layers"), "w") as f:
        f.write("\n".join(layers))
    print(f"{name}: {len(layers)} layers after folding {len(dropped)} BatchNormalizations")


def measure(name, out, samples):
    import onnxruntime as ort

    ort.set_default_logger_severity(3)
    layers = open(os.path.join(out, name + ".layers")).read().split("\n")
    so = ort.SessionOptions()
    # No graph rewrites: they could fuse or drop the rounding casts.
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    run32 = ort.InferenceSession(os.path.join(out, name + ".f32.onnx"), so)
    run16 = ort.InferenceSession(os.path.join(out, name + ".f16.onnx"), so)
    iname = run32.get_inputs()[0].name
    rel, amax = np.zeros(len(layers)), np.zeros(len(layers))
    margins, margin_err, logit_rel, agree = [], [], [], 0
    for s in range(samples):
        x = np.random.default_rng([1000 + s]).standard_normal((1, 3, 224, 224)).astype(np.float32)
        a, b = run32.run(None, {iname: x}), run16.run(None, {iname: x})
        for i, (u, v) in enumerate(zip(a, b)):
            rel[i] += np.linalg.norm(u - v) / max(np.linalg.norm(u), 1e-30) / samples
            amax[i] = max(amax[i], np.abs(u).max(), np.abs(v).max())
        z, zh = a[-1].ravel(), b[-1].ravel()
        top = np.argsort(z)[::-1]
        margins.append((z[top[0]] - z[top[1]]) / z.std())
        margin_err.append(abs((zh[top[0]] - zh[top[1]]) - (z[top[0]] - z[top[1]])) / z.std())
        logit_rel.append(np.linalg.norm(z - zh) / np.linalg.norm(z))
        agree += int(np.argmax(zh) == top[0])
    feat = max(i for i, l in enumerate(layers) if "Flatten" in l or "GlobalAverage" in l)
    print(f"{name}: {samples} inputs, top-1 agreement {agree}/{samples}, "
          f"logits rel err {np.mean(logit_rel):.2e}")
    print(f"  fp32 margin / logit std: min {np.min(margins):.4f} p10 "
          f"{np.percentile(margins, 10):.4f} median {np.median(margins):.4f}")
    print(f"  fp16 margin error / logit std: median {np.median(margin_err):.4f} "
          f"max {np.max(margin_err):.4f}")
    print(f"  pooled features rel err {rel[feat]:.2e} -> logits {rel[-1]:.2e} "
          f"(x{rel[-1] / rel[feat]:.1f} in the classifier)")
    print(f"  largest |activation| {amax.max():.1f} (fp16 max 65504)")
    for i, l in enumerate(layers):
        print(f"  {i:3d} {l[:56]:56s} rel err {rel[i]:.2e}  max|a| {amax[i]:8.2f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("step", choices=["prepare", "measure"])
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True, help="folder for the rewritten models")
    p.add_argument("--samples", type=int, default=50)
    args = p.parse_args()
    model_dir = os.environ.get("TESSERA_MODEL_DIR",
                               os.path.expanduser("~/.cache/tessera/models"))
    os.makedirs(args.out, exist_ok=True)
    if args.step == "prepare":
        prepare(model_dir, args.model, args.out)
    else:
        measure(args.model, args.out, args.samples)


if __name__ == "__main__":
    main()
