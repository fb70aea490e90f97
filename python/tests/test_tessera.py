"""Tests of the Python package, run by scripts/test.sh after `pip install .` into a venv.

The model is a small ONNX graph built with onnx.helper; the oracle is NumPy.
"""
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tessera

RNG = np.random.default_rng(7)
W1 = RNG.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3
B1 = RNG.standard_normal(8).astype(np.float32) * 0.1
W2 = RNG.standard_normal((5, 8 * 6 * 6)).astype(np.float32) * 0.1
B2 = RNG.standard_normal(5).astype(np.float32) * 0.1


def reference(x):
    """Conv 3x3 (valid) + ReLU + Flatten + Gemm, in NumPy."""
    n, c, h, w = x.shape
    oh, ow = h - 2, w - 2
    y = np.zeros((n, 8, oh, ow), np.float64)
    for i in range(3):
        for j in range(3):
            patch = x[:, :, i:i + oh, j:j + ow].astype(np.float64)
            y += np.einsum("nchw,oc->nohw", patch, W1[:, :, i, j])
    y += B1[None, :, None, None]
    y = np.maximum(y, 0).reshape(n, -1)
    return (y @ W2.T.astype(np.float64) + B2).astype(np.float32)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    d = tmp_path_factory.mktemp("model")
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c"], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Flatten", ["r"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "w2", "b2"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
        [numpy_helper.from_array(W1, "w1"), numpy_helper.from_array(B1, "b1"),
         numpy_helper.from_array(W2, "w2"), numpy_helper.from_array(B2, "b2")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx_path = str(d / "small.onnx")
    onnx.save(m, onnx_path)
    tsr = str(d / "small.tsr")
    tessera.convert(onnx_path, tsr)
    return tsr


def test_version_and_devices():
    assert tessera.__version__ == "0.1.0"
    names = [name for name, _ in tessera.devices()]
    assert "reference" in names and "cpu" in names
    assert "npu:0" in names  # the reference driver is found inside the package


def test_model_descriptions(model_path):
    m = tessera.Model.load(model_path)
    assert m.inputs == [("x", np.dtype("float32"), (1, 3, 8, 8))]
    assert m.outputs[0][0] == "y" and m.outputs[0][2] == (1, 5)
    assert len(m.hash) > 0


@pytest.mark.parametrize("device", ["reference", "cpu", "cpu:0", "npu:0"])
def test_run_matches_numpy(model_path, device):
    m = tessera.Model.load(model_path)
    s = tessera.Session(m, device=device)
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    (y,) = s.run([x])
    assert y.dtype == np.float32 and y.shape == (1, 5)
    tol = 2e-2 if device.startswith("npu") else 1e-4  # the reference NPU computes in fp16
    np.testing.assert_allclose(y, reference(x), rtol=tol, atol=tol)
    # A dict by name, one bare array and a float64 array (converted) give the same outputs.
    np.testing.assert_array_equal(s.run({"x": x})[0], y)
    np.testing.assert_array_equal(s.run(x)[0], y)
    np.testing.assert_allclose(s.run(x.astype(np.float64))[0], y, rtol=1e-6, atol=1e-6)


def test_session_describes_its_kernels(model_path):
    s = tessera.Session(tessera.Model.load(model_path), device="cpu:0")
    d = s.describe()
    assert d.startswith("step 0 on cpu:0:\n"), d
    assert len(d.splitlines()) > 1, d


def test_outputs_own_their_memory(model_path):
    s = tessera.Session(tessera.Model.load(model_path), device="cpu")
    x = np.ones((1, 3, 8, 8), np.float32)
    first = s.run([x])[0]
    kept = first.copy()
    s.run([np.zeros((1, 3, 8, 8), np.float32)])
    np.testing.assert_array_equal(first, kept)  # a later run does not overwrite it


def test_bad_input_raises(model_path):
    m = tessera.Model.load(model_path)
    s = tessera.Session(m, device="cpu")
    with pytest.raises(ValueError, match="expects shape"):
        s.run([np.zeros((1, 3, 9, 8), np.float32)])
    with pytest.raises(ValueError, match="no input 'z'"):
        s.run({"x": np.zeros((1, 3, 8, 8), np.float32), "z": np.zeros(1)})
    with pytest.raises(ValueError, match="1 inputs, got 2"):
        s.run([np.zeros((1, 3, 8, 8), np.float32)] * 2)
    with pytest.raises(FileNotFoundError):
        tessera.Model.load("/nonexistent/model.tsr")
    with pytest.raises(ValueError, match="unknown device 'no_such_device:7'"):
        tessera.Session(m, device="no_such_device:7")
    with pytest.raises(tessera.Error, match="npu:9"):
        tessera.Session(m, device="npu:9")
    with pytest.raises(FileNotFoundError):
        tessera.convert("/nonexistent/model.onnx", "/tmp/never.tsr")


def test_profile_plan_simulate_in_the_library(model_path, tmp_path):
    prof = tessera.profile(model_path, devices=["cpu:0", "cpu:1"], repeat=1, calibration=0,
                           split_layers=1)
    assert prof.devices == ["cpu:0", "cpu:1"]
    assert '"piece_runs"' in prof.to_json()
    with pytest.raises(ValueError, match="split_layers"):
        tessera.profile(model_path, devices=["cpu:0"], split_layers=-1)
    plan = tessera.plan(model_path, prof, planner="pipeline", stages=2)
    assert plan.estimated_period_ms > 0
    sim = tessera.simulate(model_path, plan, prof, frames=50)
    assert sim["frames"] == 50 and sim["frames_per_s"] > 0
    assert set(sim["device_busy_ms"]) <= {"cpu:0", "cpu:1"}
    # Saved and reloaded, the profile plans the same; the tool reads what the library wrote.
    path = str(tmp_path / "profile.json")
    prof.save(path)
    again = tessera.plan(model_path, tessera.Profile.load(path), planner="pipeline", stages=2)
    assert again.notation == plan.notation
    with pytest.raises(ValueError, match="unknown planner 'magic'"):
        tessera.plan(model_path, prof, planner="magic")
    with pytest.raises(ValueError, match="stages applies to the pipeline planner only"):
        tessera.plan(model_path, prof, planner="slice", stages=2)
    plan_path = str(tmp_path / "plan.json")
    plan.save(plan_path)
    out = subprocess.run([tessera.tool_path(), "run", model_path, "--plan", plan_path, "--stream",
                          "4", "-q"], check=True, capture_output=True, text=True).stdout
    assert "frames/s" in out


def test_stream_by_a_plan_matches_sequential(model_path, tmp_path):
    tool = tessera.tool_path()
    profile = str(tmp_path / "profile.json")
    plan_path = str(tmp_path / "plan.json")
    subprocess.run([tool, "profile", model_path, "--devices", "cpu:0,cpu:1", "--repeat", "1",
                    "--calibration-slices", "0", "-q", "-o", profile], check=True, capture_output=True)
    subprocess.run([tool, "plan", model_path, "--profile", profile, "--planner", "pipeline",
                    "--stages", "2", "-o", plan_path], check=True, capture_output=True)
    m = tessera.Model.load(model_path)
    plan = tessera.Plan.load(plan_path)
    assert len(plan.notation) > 0
    seq = tessera.Session(m, device="cpu")
    stream = tessera.Session(m, plan=plan, queue_capacity=2)
    frames = [RNG.standard_normal((1, 3, 8, 8)).astype(np.float32) for _ in range(12)]
    ids = [stream.submit([f]) for f in frames[:3]]
    got = []
    for k in range(len(frames)):
        frame_id, outputs = stream.next()
        got.append((frame_id, outputs[0]))
        if k + 3 < len(frames):
            ids.append(stream.submit([frames[k + 3]]))
    assert [g[0] for g in got] == list(range(len(frames))) == ids
    for f, (_, y) in zip(frames, got):
        np.testing.assert_allclose(y, seq.run([f])[0], rtol=1e-5, atol=1e-5)
    # A plan path works too.
    tessera.Session(m, plan=plan_path).close()


def test_python_m_tessera_runs_the_tool():
    out = subprocess.run([sys.executable, "-m", "tessera", "devices"],
                         check=True, capture_output=True, text=True).stdout
    assert "reference" in out


def test_convert_sizes_symbolic_inputs(tmp_path):
    """input_shapes sets symbolic height and width; left unset, the error names the dimension."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["images"], ["y"])], "symbolic",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 3, "height", "width"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx_path = str(tmp_path / "symbolic.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), onnx_path)
    tsr = str(tmp_path / "symbolic.tsr")
    with pytest.raises(ValueError, match=r"dimension 2 is symbolic \('height'\)"):
        tessera.convert(onnx_path, tsr)
    tessera.convert(onnx_path, tsr, input_shapes={"images": [2, 3, 5, 7]})
    assert tessera.Model.load(tsr).inputs == [("images", np.dtype("float32"), (2, 3, 5, 7))]


# ---- ONNX models imported directly, sized per input -------------------------------------------

WC = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3
BC = RNG.standard_normal(4).astype(np.float32) * 0.1


def masked_conv_reference(images, mask):
    """Relu(Conv 3x3, pad 1) * mask, in NumPy (float64)."""
    n, _, h, w = images.shape
    padded = np.pad(images.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((n, 4, h, w), np.float64)
    for i in range(3):
        for j in range(3):
            y += np.einsum("nchw,oc->nohw", padded[:, :, i:i + h, j:j + w], WC[:, :, i, j])
    y += BC[None, :, None, None]
    return (np.maximum(y, 0) * mask).astype(np.float32)


@pytest.fixture(scope="module")
def symbolic_model(tmp_path_factory):
    """images[N,3,height,width] -> Conv -> Relu -> * mask[N,1,height,width]."""
    graph = helper.make_graph(
        [helper.make_node("Conv", ["images", "wc", "bc"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("Mul", ["r", "mask"], ["y"])],
        "masked_conv",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 3, "height", "width"]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["N", 1, "height", "width"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(WC, "wc"), numpy_helper.from_array(BC, "bc")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = str(tmp_path_factory.mktemp("symbolic") / "masked_conv.onnx")
    onnx.save(m, path)
    return path


@pytest.mark.parametrize("n,h,w", [(1, 9, 7), (2, 5, 13)])
def test_import_onnx_sizes_each_input(symbolic_model, n, h, w):
    shapes = {"images": (n, 3, h, w), "mask": [n, 1, h, w]}
    m = tessera.Model.import_onnx(symbolic_model, shapes=shapes)
    assert m.inputs == [("images", np.dtype("float32"), (n, 3, h, w)),
                        ("mask", np.dtype("float32"), (n, 1, h, w))]
    assert m.outputs[0][2] == (n, 4, h, w)
    assert m.hash == ""
    images = RNG.standard_normal((n, 3, h, w)).astype(np.float32)
    mask = RNG.standard_normal((n, 1, h, w)).astype(np.float32)
    want = masked_conv_reference(images, mask)
    # The text form of the tool's --shape and the bytes of the model import alike.
    text = f"images={n}x3x{h}x{w};mask={n}x1x{h}x{w}"
    with open(symbolic_model, "rb") as f:
        from_bytes = tessera.Model.import_onnx(f.read(), shapes=text)
    for model, device in [(m, "reference"), (m, "cpu"), (from_bytes, "reference")]:
        (y,) = tessera.Session(model, device=device).run({"images": images, "mask": mask})
        assert y.shape == (n, 4, h, w)
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


def test_import_onnx_errors_name_input_and_dimension(symbolic_model):
    ok = {"images": (1, 3, 8, 8), "mask": (1, 1, 8, 8)}
    cases = [
        (None, r"graph input 'images' dimension 2 is symbolic \('height'\)"),
        ({"images": (1, 3, 8, 8)}, r"graph input 'mask' dimension 0 is symbolic \('N'\)"),
        (dict(ok, labels=(1, 5)), r"'labels'.*not a graph input"),
        (dict(ok, mask=(1, 8, 8)), r"graph input 'mask' has rank 4, but a shape of 3"),
        (dict(ok, images=(1, 3, 0, 8)), r"'images': dimension 2 = 0 is not in 1\.\."),
        (dict(ok, mask=(1, 1, 8, -8)), r"'mask': dimension 3 = -8"),
        (dict(ok, images=(1, 4, 8, 8)), r"'images' dimension 1 is 3 in the model, but 4"),
        (dict(ok, images=(1, 3, 8.5, 8)), r"shapes\['images'\]: dimension 2 \(8\.5\) is not"),
        ({"images": "1x3x8x8"}, r"shapes\['images'\]: expected a sequence of ints"),
        ("images=1x3x0x8;mask=1x1x8x8", r"dimension 2 \('0'\) is not an integer"),
        ("images=1x3x8x8;mask", r"'mask': expected NAME=DIMxDIMx"),
        ([1, 3, 8, 8], r"expected a dict"),
    ]
    for shapes, message in cases:
        with pytest.raises(ValueError, match=message):
            tessera.Model.import_onnx(symbolic_model, shapes=shapes)
    with pytest.raises(ValueError, match="default_dim_value = 0"):
        tessera.Model.import_onnx(symbolic_model, shapes=ok, batch=0)
    with pytest.raises(FileNotFoundError):
        tessera.Model.import_onnx("/nonexistent/model.onnx", shapes=ok)
    with pytest.raises(ValueError, match="not a valid ONNX model"):
        tessera.Model.import_onnx(b"not a model")
    # NumPy integers are sizes too.
    m = tessera.Model.import_onnx(symbolic_model,
                                  shapes={k: np.array(v, np.int64) for k, v in ok.items()})
    assert m.inputs[0][2] == (1, 3, 8, 8)


def test_import_onnx_defaults_only_the_batch_with_a_warning(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "batch_only",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = str(tmp_path / "batch_only.onnx")
    onnx.save(model, path)
    with pytest.warns(UserWarning, match=r"dimension 0 is symbolic \('batch'\); using 4"):
        m = tessera.Model.import_onnx(path, batch=4)
    assert m.inputs[0][2] == (4, 2, 3)
    x = RNG.standard_normal((4, 2, 3)).astype(np.float32)
    np.testing.assert_array_equal(tessera.Session(m, device="reference").run(x)[0],
                                  np.maximum(x, 0))
    # convert() sizes by the same rule.
    tsr = str(tmp_path / "batch_only.tsr")
    tessera.convert(path, tsr, input_shapes="x=3x2x3")
    assert tessera.Model.load(tsr).inputs[0][2] == (3, 2, 3)


def test_import_onnx_real_export_with_symbolic_height_and_width(tmp_path):
    """scripts/export_cnn_exports.py's YOLO-style detector, exported by torch with symbolic
    height and width, imported at two sizes: its anchor grid folds at each, and the outputs match
    torch's at that size."""
    torch = pytest.importorskip("torch")
    import importlib.util
    import pathlib
    script = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "export_cnn_exports.py"
    if not script.exists():
        pytest.skip("scripts/export_cnn_exports.py not found next to the tests")
    spec = importlib.util.spec_from_file_location("export_cnn_exports", script)
    exports = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(exports)
    torch.manual_seed(5)
    net = exports.YoloStyle().eval()
    path = str(tmp_path / "yolo_style.onnx")
    with torch.no_grad():
        torch.onnx.export(net, torch.zeros(1, 3, 64, 64), path, opset_version=13,
                          input_names=["images"], dynamic_axes={"images": {2: "height", 3: "width"}},
                          do_constant_folding=False)
    with pytest.raises(ValueError, match=r"'images' dimension 2 is symbolic \('height'\)"):
        tessera.Model.import_onnx(path)
    for h, w in [(64, 96), (96, 48)]:
        m = tessera.Model.import_onnx(path, shapes={"images": (1, 3, h, w)})
        x = RNG.standard_normal((1, 3, h, w)).astype(np.float32)
        with torch.no_grad():
            want = net(torch.from_numpy(x)).numpy()
        (y,) = tessera.Session(m, device="cpu").run(x)
        assert y.shape == want.shape == (1, 3 * (h // 8) * (w // 8) + 3 * (h // 16) * (w // 16), 9)
        np.testing.assert_allclose(y, want, rtol=1e-3, atol=1e-3 * float(np.abs(want).max()))
