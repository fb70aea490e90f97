"""Tessera: an inference engine for heterogeneous systems.

    import numpy as np, tessera
    tessera.convert("mobilenet_v2.onnx", "mobilenet_v2.tsr")
    model = tessera.Model.load("mobilenet_v2.tsr")
    det = tessera.Model.import_onnx("det.onnx", shapes={"images": (1, 3, 640, 640)})  # no .tsr
    session = tessera.Session(model, device="cpu")          # or plan="plan.json"
    (logits,) = session.run([np.zeros((1, 3, 224, 224), np.float32)])

    prof = tessera.profile("mobilenet_v2.tsr", devices=["cpu:0", "cpu:1"])
    plan = tessera.plan("mobilenet_v2.tsr", prof, planner="pipeline")
    print(tessera.simulate("mobilenet_v2.tsr", plan, prof)["frames_per_s"])
    stream = tessera.Session(model, plan=plan)              # frames overlap across stages
    ids = [stream.submit([frame]) for frame in frames]
    for _ in ids:
        frame_id, outputs = stream.next()                   # in submission order

Errors raise tessera.Error (bad arguments ValueError, missing files FileNotFoundError) with
the engine's message. `python -m tessera ARGS` runs the `tessera` command installed with the
package (bench, plot, ...).
"""
import os as _os

from ._tessera import (Error, Model, Plan, Profile, Session, __version__, convert, devices, plan,
                       profile, simulate)


def tool_path():
    """The path of the `tessera` command installed with this package."""
    return _os.path.join(_os.path.dirname(__file__), "bin", "tessera")


__all__ = [
    "Error", "Model", "Plan", "Profile", "Session", "__version__", "convert", "devices", "plan",
    "profile", "simulate", "tool_path"
]
