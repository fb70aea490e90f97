#!/usr/bin/python3
"""Export real-world CNN shapes (detection, segmentation) as ONNX, for the import table.

Run with Debian's interpreter (python3-torch, python3-torchvision):

    /usr/bin/python3 scripts/export_cnn_exports.py --out DIR [--models a,b] [--size 320]

Writes DIR/NAME.onnx (torch.onnx.export, opset 13, seeded random weights, eval mode, symbolic
height and width so that `--shape` has to size them) and DIR/NAME.input.npy (N(0,1), seeded,
1x3xSIZExSIZE). Models: torchvision's lraspp_mobilenet_v3_large, deeplabv3_mobilenet_v3_large,
fcn_resnet50 (segmentation), ssdlite320_mobilenet_v3_large and retinanet_resnet50_fpn
(detection, exported whole: their post-processing uses ops Tessera lacks), and yolo_style: a
small YOLO-like detector written here (conv backbone, two heads, and the anchor-grid decode of
YOLOv5 built with arange/meshgrid at the fixed input size, which folds to constants).
"""

import argparse
import os
import sys

import numpy as np
import torch
import torch.nn as nn


class YoloStyle(nn.Module):
    """Conv-BN-SiLU backbone, stride 8 and 16 heads, YOLOv5's grid decode."""

    def __init__(self, classes=4, anchors=3):
        super().__init__()

        def cbs(cin, cout, stride):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
                                 nn.BatchNorm2d(cout), nn.SiLU())

        self.stem = nn.Sequential(cbs(3, 16, 2), cbs(16, 32, 2), cbs(32, 32, 1), cbs(32, 64, 2))
        self.down = nn.Sequential(cbs(64, 64, 1), cbs(64, 128, 2))
        self.no = classes + 5
        self.na = anchors
        self.heads = nn.ModuleList([nn.Conv2d(64, self.na * self.no, 1),
                                    nn.Conv2d(128, self.na * self.no, 1)])
        self.strides = (8, 16)
        self.register_buffer("anchor_wh", torch.tensor(
            [[[10., 13.], [16., 30.], [33., 23.]], [[30., 61.], [62., 45.], [59., 119.]]]))

    def forward(self, x):
        p8 = self.stem(x)
        p16 = self.down(p8)
        out = []
        for i, feat in enumerate((p8, p16)):
            y = self.heads[i](feat)
            bs, _, ny, nx = y.shape
            y = y.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).sigmoid()
            yv, xv = torch.meshgrid(torch.arange(ny, dtype=torch.float32),
                                    torch.arange(nx, dtype=torch.float32), indexing="ij")
            grid = torch.stack((xv, yv), 2).view(1, 1, ny, nx, 2)
            anchor = self.anchor_wh[i].view(1, self.na, 1, 1, 2)
            xy = (y[..., 0:2] * 2 - 0.5 + grid) * self.strides[i]
            wh = (y[..., 2:4] * 2) ** 2 * anchor
            out.append(torch.cat((xy, wh, y[..., 4:]), -1).view(bs, -1, self.no))
        return torch.cat(out, 1)


def build(name):
    import torchvision.models.detection as det
    import torchvision.models.segmentation as seg
    if name == "yolo_style":
        return YoloStyle()
    if name in ("lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large", "fcn_resnet50"):
        m = getattr(seg, name)(weights=None, weights_backbone=None, num_classes=21)

        class Out(nn.Module):  # the dict output as one tensor
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, x):
                return self.m(x)["out"]
        return Out(m)
    if name in ("ssdlite320_mobilenet_v3_large", "retinanet_resnet50_fpn"):
        return getattr(det, name)(weights=None, weights_backbone=None, num_classes=5)
    raise SystemExit("unknown model " + name)


ALL = ["lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large", "fcn_resnet50",
       "ssdlite320_mobilenet_v3_large", "retinanet_resnet50_fpn", "yolo_style"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default=",".join(ALL))
    ap.add_argument("--size", type=int, default=320)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.models.split(","):
        i = ALL.index(name) if name in ALL else len(ALL)  # each model's own seed, run alone or not
        torch.manual_seed(i)
        m = build(name).eval()
        x = torch.from_numpy(np.random.default_rng(i).standard_normal(
            (1, 3, args.size, args.size)).astype(np.float32))
        path = os.path.join(args.out, name + ".onnx")
        detection = name.startswith(("ssd", "retina"))
        with torch.no_grad():
            torch.onnx.export(m, ([x[0]],) if detection else x, path, opset_version=13,
                              input_names=["images"],
                              dynamic_axes={"images": {1: "height", 2: "width"} if detection
                                            else {2: "height", 3: "width"}},
                              do_constant_folding=False)
        np.save(os.path.join(args.out, name + ".input.npy"), x[0].numpy() if detection else x.numpy())
        print("exported", path, file=sys.stderr)


if __name__ == "__main__":
    main()
