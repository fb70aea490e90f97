#!/usr/bin/env python3
"""One-node ONNX models of Tessera's element-wise, comparison and shape-building ops, with inputs
and the outputs of independent oracles (numpy, PyTorch), for tests/models/op_oracle_test.cc.

For each case NAME it writes NAME.onnx, NAME.in0.npy, NAME.in1.npy, ... (the graph inputs in
order) and NAME.out.npy, and lists the case in MANIFEST ("NAME NUM_INPUTS OPSET EXPECT", EXPECT
the op the converted graph must hold, or "-"). It also exports PyTorch's GELU modules (exact and
tanh-approximated, at opset 17, where they are spelled with Erf or Tanh), which Tessera must fuse
into one Gelu node.

    /usr/bin/python3 scripts/op_oracles.py --out DIR
"""
import argparse
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import torch

rng = np.random.default_rng(2026)
manifest = []

NP_TO_ONNX = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
              np.dtype(np.int32): TensorProto.INT32, np.dtype(np.bool_): TensorProto.BOOL}


def save(out, name, model, inputs, expected, expect_op, opset):
    if opset <= onnx.defs.onnx_opset_version():  # this onnx package knows the opset's ops
        onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, name + ".onnx"))
    for i, x in enumerate(inputs):
        np.save(os.path.join(out, f"{name}.in{i}.npy"), x)
    np.save(os.path.join(out, name + ".out.npy"), expected)
    manifest.append(f"{name} {len(inputs)} {opset} {expect_op}")


def one_node(out, name, op, inputs, expected, attrs=None, initializers=(), opset=17):
    """inputs: arrays fed at run time; initializers: (name, array) constant inputs after them."""
    in_names = [f"x{i}" for i in range(len(inputs))]
    graph_inputs = [helper.make_tensor_value_info(n, NP_TO_ONNX[x.dtype], list(x.shape))
                    for n, x in zip(in_names, inputs)]
    inits = [numpy_helper.from_array(a, n) for n, a in initializers]
    node = helper.make_node(op, in_names + [n for n, _ in initializers], ["y"], name=name,
                            **(attrs or {}))
    y = helper.make_tensor_value_info("y", NP_TO_ONNX[expected.dtype], list(expected.shape))
    graph = helper.make_graph([node], name, graph_inputs, [y], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    save(out, name, model, inputs, expected, op, opset)


def f32(*shape, lo=-4.0, hi=4.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def unary(out):
    x = f32(2, 13, 7, 9)
    pos = f32(2, 13, 7, 9, lo=0.01, hi=4.0)
    t = torch.from_numpy
    cases = {
        "Sqrt": (pos, np.sqrt(pos)),
        "Exp": (x, np.exp(x)),
        "Log": (pos, np.log(pos)),
        "Erf": (x, torch.erf(t(x)).numpy()),
        "Abs": (x, np.abs(x)),
        "Neg": (x, -x),
        "Reciprocal": (x, np.reciprocal(x)),
        "Softplus": (x, torch.nn.functional.softplus(t(x)).numpy()),
    }
    for op, (inp, want) in cases.items():
        one_node(out, op, op, [inp], want.astype(np.float32))
    # Mish arrived in opset 18, Gelu in opset 20.
    one_node(out, "Mish", "Mish", [x], torch.nn.functional.mish(t(x)).numpy(), opset=18)
    one_node(out, "Gelu", "Gelu", [x], torch.nn.functional.gelu(t(x)).numpy(), opset=20)
    one_node(out, "Gelu_tanh", "Gelu", [x],
             torch.nn.functional.gelu(t(x), approximate="tanh").numpy(),
             attrs={"approximate": "tanh"}, opset=20)


def binary(out):
    a, b = f32(2, 13, 7, 9), f32(13, 1, 9)
    c = f32(7, 1)
    one_node(out, "Min3", "Min", [a, b, c], np.minimum(np.minimum(a, b), c))
    one_node(out, "Max3", "Max", [a, b, c], np.maximum(np.maximum(a, b), c))
    one_node(out, "Sum3", "Sum", [a, b, c], (a + b + c).astype(np.float32))
    ia, ib = rng.integers(-50, 50, (3, 13)).astype(np.int64), rng.integers(-50, 50, (13,)).astype(np.int64)
    one_node(out, "Max_i64", "Max", [ia, ib], np.maximum(ia, ib))
    ties = b.copy()
    one_node(out, "Equal", "Equal", [np.broadcast_to(ties, (2, 13, 7, 9)).copy(), ties],
             np.ones((2, 13, 7, 9), dtype=np.bool_))
    one_node(out, "Less", "Less", [a, b], np.less(a, b))
    one_node(out, "Greater", "Greater", [a, b], np.greater(a, b))
    one_node(out, "Greater_i64", "Greater", [ia, ib], np.greater(ia, ib))
    cond = rng.integers(0, 2, (2, 1, 7, 9)).astype(np.bool_)
    one_node(out, "Where", "Where", [cond, a, b], np.where(cond, a, b))
    slope = f32(13, 1, 1, lo=0.0, hi=0.5)
    one_node(out, "PRelu", "PRelu", [a], torch.nn.functional.prelu(
        torch.from_numpy(a), torch.from_numpy(slope.reshape(13))).numpy(),
        initializers=[("slope", slope)])
    base = f32(2, 13, 7, 9, lo=0.1, hi=3.0)
    expo = f32(9, lo=-2.0, hi=2.0)
    one_node(out, "Pow", "Pow", [base, expo], np.power(base, expo))
    one_node(out, "Pow_cube", "Pow", [a], np.power(a, np.float32(3)),
             initializers=[("three", np.array(3.0, dtype=np.float32))])


def shapes(out):
    x = f32(13, 1, 1)
    shape = np.array([2, 13, 7, 9], dtype=np.int64)
    one_node(out, "Expand", "Expand", [x], np.broadcast_to(x, shape).copy(),
             initializers=[("shape", shape)])
    t = f32(1, 3, 5, 7)
    reps = np.array([2, 1, 3, 2], dtype=np.int64)
    one_node(out, "Tile", "Tile", [t], np.tile(t, reps), initializers=[("repeats", reps)])
    # Range and ConstantOfShape with constant inputs fold away at import; the model then holds
    # a constant feeding an Add with a run-time input.
    for name, nodes, inits, want_of in [
        ("Range", [helper.make_node("Range", ["start", "limit", "delta"], ["r"])],
         [("start", np.array(1, dtype=np.int64)), ("limit", np.array(40, dtype=np.int64)),
          ("delta", np.array(3, dtype=np.int64))],
         lambda v: v + np.arange(1, 40, 3, dtype=np.int64)),
        ("ConstantOfShape",
         [helper.make_node("ConstantOfShape", ["shape"], ["r"],
                           value=numpy_helper.from_array(np.array([7], dtype=np.int64)))],
         [("shape", np.array([13], dtype=np.int64))],
         lambda v: v + np.full((13,), 7, dtype=np.int64)),
    ]:
        v = rng.integers(-100, 100, (13,)).astype(np.int64)
        nodes = nodes + [helper.make_node("Add", ["v", "r"], ["y"])]
        graph = helper.make_graph(
            nodes, name, [helper.make_tensor_value_info("v", TensorProto.INT64, [13])],
            [helper.make_tensor_value_info("y", TensorProto.INT64, [13])],
            initializer=[numpy_helper.from_array(a, n) for n, a in inits])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        save(out, name, model, [v], want_of(v), "Add", 17)


def gelu_patterns(out):
    for name, approx in [("gelu_erf_pattern", "none"), ("gelu_tanh_pattern", "tanh")]:
        module = torch.nn.Sequential(torch.nn.Linear(9, 9), torch.nn.GELU(approximate=approx))
        torch.manual_seed(7)
        for p in module.parameters():
            torch.nn.init.uniform_(p, -1.0, 1.0)
        x = f32(3, 9, lo=-3.0, hi=3.0)
        with torch.no_grad():
            want = module(torch.from_numpy(x)).numpy()
        path = os.path.join(out, name + ".onnx")
        torch.onnx.export(module, torch.from_numpy(x), path, opset_version=17,
                          input_names=["x0"], output_names=["y"])
        np.save(os.path.join(out, f"{name}.in0.npy"), x)
        np.save(os.path.join(out, name + ".out.npy"), want)
        manifest.append(f"{name} 1 17 Gelu")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    unary(args.out)
    binary(args.out)
    shapes(args.out)
    gelu_patterns(args.out)
    with open(os.path.join(args.out, "MANIFEST"), "w") as f:
        f.write("\n".join(manifest) + "\n")
    print(f"wrote {len(manifest)} cases to {args.out}")


if __name__ == "__main__":
    main()
