#!/usr/bin/env python3
"""Tessera against ONNX Runtime on models that use the ops of issue 26: quantized CNNs (QDQ and
QLinearConv/QLinearMatMul, written by onnxruntime.quantization.quantize_static), a text
recogniser (bidirectional LSTM and GRU) and a model of normalisations, reductions, TopK, ArgMax,
DepthToSpace and a matmul-shaped Einsum.

Run with the python3 that has onnxruntime and onnx (PATH's pyenv python3, not /usr/bin/python3);
the float models are exported with PyTorch by /usr/bin/python3 (--torch-python):

    python3 scripts/check_ort_models.py --tessera build/tools/tessera [--keep DIR]

For each model it converts with `tessera convert`, runs `tessera run` on each --device (default
reference and cpu; the QDQ models also on cpu#int8, the int8 kernels with the model's own scales
and zero points) and ONNX Runtime (CPU provider, ORT_DISABLE_ALL so that ORT runs the graph as
written) on the same seeded input, and prints max |tessera - ort| per output, in units of the
output quantisation step for quantized outputs. Exits 1 if any error is over its bound, 77 (skip)
when numpy, onnxruntime, onnx or torch is missing.
"""
import argparse
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnxruntime import quantization as q
except ImportError as e:  # the ctest registration treats 77 as "skipped"
    print("SKIP: %s (this check needs numpy, onnxruntime and onnx)" % e)
    sys.exit(77)

# Exported by /usr/bin/python3 (torch); writes <out>/<name>.onnx and <name>.input.npy.
EXPORT = r'''
import sys, numpy as np, torch, torch.nn as nn
out = sys.argv[1]
torch.manual_seed(0)

class QCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.c3 = nn.Conv2d(16, 24, 1)
        self.c4 = nn.Conv2d(24, 24, 3, stride=2, padding=1)
        self.w = nn.Parameter(torch.randn(24, 10) * 0.2)
    def forward(self, x):
        x = torch.relu(self.c1(x))
        x = torch.relu(self.c2(x))
        x = torch.relu(self.c3(x))
        x = self.c4(x)
        x = x.mean(dim=(2, 3))
        return torch.matmul(x, self.w)

class TextRec(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 16, 3, padding=1)
        self.lstm = nn.LSTM(16 * 8, 32, bidirectional=True)
        self.gru = nn.GRU(64, 24, bidirectional=True)
        self.gru_fwd = nn.GRU(48, 20)
        self.fc = nn.Linear(20, 11)
        # Initial states as constants (exporters turn zero states into Expand nodes otherwise).
        self.register_buffer("h0", torch.randn(2, 1, 32) * 0.1)
        self.register_buffer("c0", torch.randn(2, 1, 32) * 0.1)
        self.register_buffer("g0", torch.zeros(2, 1, 24))
        self.register_buffer("f0", torch.zeros(1, 1, 20))
    def forward(self, x):
        y = torch.relu(self.conv(x))              # [1, 16, 8, 40]
        y = y.permute(3, 0, 1, 2).reshape(40, 1, 16 * 8)
        y, _ = self.lstm(y, (self.h0, self.c0))
        y, _ = self.gru(y, self.g0)
        y, _ = self.gru_fwd(y, self.f0)
        return self.fc(y).softmax(-1)

class Norms(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm([8, 8])
        self.inorm = nn.InstanceNorm2d(16, affine=True)
        self.ps = nn.PixelShuffle(2)
        with torch.no_grad():
            self.ln.weight.uniform_(0.5, 1.5); self.ln.bias.uniform_(-0.5, 0.5)
            self.inorm.weight.uniform_(0.5, 1.5); self.inorm.bias.uniform_(-0.5, 0.5)
    def forward(self, x):                         # x: [1, 16, 8, 8]
        a = self.ln(x)
        b = self.inorm(x)
        c = self.ps(a + b)                        # [1, 4, 16, 16]
        s = c.sum(dim=1, keepdim=True)
        mx = torch.amax(c, dim=(2, 3))
        mn = torch.amin(c, dim=3)
        v, i = torch.topk(c.reshape(1, 4, 256), 5, dim=-1)
        am = torch.argmax(c.reshape(1, 4, 256), dim=-1)
        e = torch.einsum("bij,bjk->bik", a.reshape(16, 8, 8), b.reshape(16, 8, 8))
        return s, mx, mn, v, i, am, e

def export(name, model, shape, opset):
    model.eval()
    x = torch.randn(*shape)
    torch.onnx.export(model, x, "%s/%s.onnx" % (out, name), opset_version=opset,
                      input_names=["x"], do_constant_folding=True)
    np.save("%s/%s.input.npy" % (out, name), x.numpy())

export("qcnn_float", QCnn(), (1, 3, 32, 32), 13)
export("text_rec", TextRec(), (1, 1, 8, 40), 13)
export("norms", Norms(), (1, 16, 8, 8), 17)
'''


class Reader(q.CalibrationDataReader):
    def __init__(self, shape, n=8):
        rng = np.random.default_rng(1)
        self.data = [{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(n)]

    def get_next(self):
        return self.data.pop() if self.data else None


def quantize(src, dst, fmt, per_channel):
    shape = [d.dim_value for d in onnx.load(src).graph.input[0].type.tensor_type.shape.dim]
    q.quantize_static(src, dst, Reader(shape), quant_format=fmt, per_channel=per_channel,
                      activation_type=q.QuantType.QUInt8, weight_type=q.QuantType.QInt8,
                      op_types_to_quantize=["Conv", "MatMul"])


def output_steps(path):
    """For outputs produced by a DequantizeLinear, the scale of its input (one quantisation step)."""
    m = onnx.load(path)
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    steps = {}
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear" and n.input[1] in inits:
            steps[n.output[0]] = float(np.max(inits[n.input[1]]))
    return [steps.get(o.name) for o in m.graph.output]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--torch-python", default="/usr/bin/python3")
    ap.add_argument("--devices", default="reference,cpu")
    ap.add_argument("--keep", help="write the models and outputs here instead of a temp dir")
    args = ap.parse_args()

    work = args.keep or tempfile.mkdtemp(prefix="tessera_ort_")
    os.makedirs(work, exist_ok=True)
    r = subprocess.run([args.torch_python, "-c", EXPORT, work], capture_output=True, text=True)
    if r.returncode != 0:
        if "No module named 'torch'" in r.stderr:
            print("SKIP: %s has no torch" % args.torch_python)
            sys.exit(77)
        sys.exit("export failed:\n" + r.stderr)
    src = work + "/qcnn_float.onnx"
    quantize(src, work + "/qcnn_qdq.onnx", q.QuantFormat.QDQ, False)
    quantize(src, work + "/qcnn_qdq_per_channel.onnx", q.QuantFormat.QDQ, True)
    quantize(src, work + "/qcnn_qoperator.onnx", q.QuantFormat.QOperator, True)
    cases = [("qcnn_float", "qcnn_float"), ("qcnn_qdq", "qcnn_float"),
             ("qcnn_qdq_per_channel", "qcnn_float"), ("qcnn_qoperator", "qcnn_float"),
             ("text_rec", "text_rec"), ("norms", "norms")]

    failed = False
    print("%-22s %-10s %-8s %12s %12s  %s" % ("model", "device", "output", "max|err|", "bound",
                                              "(max|ort|)"))
    for name, input_of in cases:
        path = "%s/%s.onnx" % (work, name)
        x = np.load("%s/%s.input.npy" % (work, input_of))
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        want = sess.run(None, {sess.get_inputs()[0].name: x})
        steps = output_steps(path)
        tsr = "%s/%s.tsr" % (work, name)
        r = subprocess.run([args.tessera, "convert", path, "-o", tsr], capture_output=True,
                           text=True)
        if r.returncode != 0:
            print("%-22s convert failed: %s" % (name, r.stderr.strip()[-400:]))
            failed = True
            continue
        devices = args.devices.split(",")
        if "qdq" in name:
            devices.append("cpu#int8")  # the QDQ model on the int8 kernels, its own scales
        for dev in devices:
            outs = ["%s/%s.%s.out%d.npy" % (work, name, dev.replace(":", "_"), k)
                    for k in range(len(want))]
            cmd = [args.tessera, "run", tsr, "--input", "%s/%s.input.npy" % (work, input_of),
                   "--device", dev]
            for o in outs:
                cmd += ["--output", o]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print("%-22s %-10s run failed: %s" % (name, dev, r.stderr.strip()[-400:]))
                failed = True
                continue
            for k, w in enumerate(want):
                got = np.load(outs[k])
                if got.shape != w.shape:
                    print("%-22s %-10s out%d shape %s, ORT %s" % (name, dev, k, got.shape, w.shape))
                    failed = True
                    continue
                err = float(np.max(np.abs(got.astype(np.float64) - w.astype(np.float64)))) if w.size else 0.0
                ref = float(np.max(np.abs(w))) if w.size else 0.0
                if steps[k] is not None:
                    # Quantized: within one quantisation step (a rounding tie may go the other way);
                    # on the int8 kernels, which round each layer's integer sum once, two.
                    n = 2 if "int8" in dev else 1
                    bound, unit = n * steps[k] * 1.001, " (%.2f steps)" % (err / steps[k])
                elif w.dtype.kind in "iu":
                    bound, unit = 0.0, ""
                else:
                    bound, unit = 1e-4 * max(1.0, ref), ""
                ok = err <= bound
                failed |= not ok
                print("%-22s %-10s out%-5d %12.3g %12.3g  (%.3g)%s%s" %
                      (name, dev, k, err, bound, ref, unit, "" if ok else "  FAIL"))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
