#!/usr/bin/python3
"""ONNX backend node test cases for Tessera: generate them, report pass rates, keep expectations.

Run with Debian's interpreter (python3-onnx, python3-numpy):

    /usr/bin/python3 scripts/onnx_conformance.py generate --out DIR
    /usr/bin/python3 scripts/onnx_conformance.py report --tests BUILD/tests/tessera_conformance_tests
                                                        [--write-expectations] [--by-case]

generate: writes ONNX's backend node test cases (onnx.backend.test.case.node, the cases ONNX
    ships as onnx/backend/test/data/node; Debian's python3-onnx carries the generators but not the
    data) into DIR/NAME/{model.onnx, test_data_set_N/{input,output}_K.pb}, plus DIR/cases.tsv
    (one line per case: name, the op it tests, "expanded" when the case is the op's function
    body spelled out in other ops). The onnx package's generators use numpy aliases that newer
    numpy removed (np.float, np.bool, ...); they are restored here before the generators run.
    DIR/stamp is written last, with the onnx version, so an interrupted run is redone.

report: runs the conformance test program (tests/conformance/onnx_node_test.cc) with
    TESSERA_CONFORMANCE_REPORT set, which writes every (case, device) outcome: pass, refused (an
    error from import, conversion, compilation or the run, with its message) or wrong (ran, but
    outputs differ from ONNX's). Prints the pass rate per op and device, and totals.
    --write-expectations rewrites tests/data/onnx_conformance_expected.tsv from the outcomes:
    the list of (case, device) pairs that do not pass, with why. Regenerate it after adding an op
    or a kernel; the test fails on any outcome that differs from the list (an unexpected pass
    included), so the list always says what Tessera does.
"""

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPECTATIONS = os.path.join(REPO, "tests", "data", "onnx_conformance_expected.tsv")
FORMAT_VERSION = "2"


def restore_numpy_aliases():
    import numpy as np
    import warnings
    warnings.filterwarnings("ignore")
    for alias, value in (("float", float), ("int", int), ("bool", bool), ("object", object),
                         ("complex", complex), ("str", str)):
        if alias not in np.__dict__:
            setattr(np, alias, value)


def generate(out):
    restore_numpy_aliases()
    import onnx
    from onnx import numpy_helper
    import onnx.backend.test.case.node as node_cases

    stamp = os.path.join(out, "stamp")
    want = "format %s onnx %s\n" % (FORMAT_VERSION, onnx.__version__)
    if os.path.exists(stamp) and open(stamp).read() == want:
        os.utime(stamp)  # the build's stamp of this step
        print("onnx_conformance: cases in %s are up to date" % out)
        return 0
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    lines = []
    seen = set()
    op_of = {}
    for case in node_cases.collect_testcases(None):
        # onnx 1.12 defines a few cases twice (same name, same data): keep the first.
        if case.kind != "node" or case.name in seen:
            continue
        seen.add(case.name)
        graph = case.model.graph
        expanded = case.name.endswith("_expanded")
        # An expanded case tests the op of the case it expands (named without "_expanded").
        op = graph.node[0].op_type if graph.node else "?"
        op_of[case.name] = op
        # Only plain tensors: sequence, map and optional inputs are not Tessera's.
        if any(not v.type.HasField("tensor_type") for v in list(graph.input) + list(graph.output)):
            lines.append([case.name, op, "expanded" if expanded else "-", "non-tensor"])
            continue
        case_dir = os.path.join(out, case.name)
        os.makedirs(case_dir)
        with open(os.path.join(case_dir, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        for i, (inputs, outputs) in enumerate(case.data_sets):
            data_dir = os.path.join(case_dir, "test_data_set_%d" % i)
            os.makedirs(data_dir)
            for j, value in enumerate(inputs):
                with open(os.path.join(data_dir, "input_%d.pb" % j), "wb") as f:
                    f.write(numpy_helper.from_array(value, graph.input[j].name).SerializeToString())
            for j, value in enumerate(outputs):
                with open(os.path.join(data_dir, "output_%d.pb" % j), "wb") as f:
                    f.write(numpy_helper.from_array(value, graph.output[j].name).SerializeToString())
        lines.append([case.name, op, "expanded" if expanded else "-", "tensor"])
    for line in lines:
        if line[2] == "expanded" and line[0][: -len("_expanded")] in op_of:
            line[1] = op_of[line[0][: -len("_expanded")]]
    with open(os.path.join(out, "cases.tsv"), "w") as f:
        f.write("".join("\t".join(line) + "\n" for line in sorted(lines)))
    with open(stamp, "w") as f:
        f.write(want)
    print("onnx_conformance: %d node cases of onnx %s in %s" % (len(lines), onnx.__version__, out))
    return 0


def read_outcomes(path):
    rows = []
    with open(path) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            case, op, device, outcome, reason = (line.rstrip("\n").split("\t") + [""] * 5)[:5]
            rows.append((case, op, device, outcome, reason))
    return rows


def report(tests, write_expectations, by_case, devices):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "outcomes.tsv")
        env = dict(os.environ, TESSERA_CONFORMANCE_REPORT=out)
        if devices:
            env["TESSERA_CONFORMANCE_DEVICES"] = devices
        # The test fails when outcomes differ from the expectations: that is what this updates.
        subprocess.run([tests, "--gtest_brief=1"], env=env, stdout=subprocess.DEVNULL)
        if not os.path.exists(out):
            print("onnx_conformance: %s wrote no outcomes" % tests, file=sys.stderr)
            return 1
        rows = read_outcomes(out)
    order = ["reference", "cpu", "opencl:0", "vulkan:0", "npu:0"]
    devices = sorted({r[2] for r in rows}, key=lambda d: (order.index(d) if d in order else 99, d))
    ops = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0, 0]))
    missing = collections.Counter()
    for case, op, device, outcome, _ in rows:
        if outcome == "missing":
            if device == devices[0]:
                missing[op] += 1
            continue
        cell = ops[op][device]
        cell[1] += 1
        cell[0] += outcome == "pass"
        cell[2] += outcome == "frozen"
    width = max([len(op) for op in ops] + [3])
    print("Cases that pass per op and device, of the cases whose op types Tessera has (+N: cases\n"
          "that pass once their shape/axes/pads/scales/bounds inputs are constants):")
    print("%-*s  %s" % (width, "op", "  ".join("%-14s" % d for d in devices)))
    totals = collections.defaultdict(lambda: [0, 0, 0])
    for op in sorted(ops):
        cells = []
        for d in devices:
            p, n, f = ops[op][d]
            totals[d][0] += p
            totals[d][1] += n
            totals[d][2] += f
            cells.append("%-14s" % (("%d/%d" % (p, n) + (" +%d" % f if f else "")) if n else "-"))
        print("%-*s  %s" % (width, op, "  ".join(cells)))
    print("%-*s  %s" % (width, "all", "  ".join(
        "%-14s" % ("%d/%d %.0f%%" % (p, n, 100.0 * p / n) + (" +%d" % f if f else "") if n else "-")
        for p, n, f in (totals[d] for d in devices))))
    # A case counts under the op it tests: an "_expanded" case that spells LayerNormalization
    # with ops Tessera lacks is listed under LayerNormalization although that op itself runs.
    print("\nCases using op types Tessera lacks, by the op they test (%d cases, not run): %s" % (
        sum(missing.values()), ", ".join("%s x%d" % (op, n) for op, n in sorted(missing.items()))))
    if by_case:
        for case, op, device, outcome, reason in rows:
            if outcome not in ("pass", "missing"):
                print("%s\t%s\t%s\t%s" % (case, device, outcome, reason))
    if write_expectations:
        with open(EXPECTATIONS, "w") as f:
            f.write("# ONNX backend node cases (onnx.backend.test.case.node) that do not pass, per\n"
                    "# device: case, device, outcome (frozen | refused | wrong), why. Every case\n"
                    "# of a supported op not listed here must pass; frozen: passes once its\n"
                    "# inputs 1.. are constants holding the test data's values. Written by\n"
                    "#   /usr/bin/python3 scripts/onnx_conformance.py report --tests "
                    "BUILD/tests/tessera_conformance_tests --write-expectations\n")
            for case, op, device, outcome, reason in sorted(rows):
                if outcome not in ("pass", "missing"):
                    f.write("%s\t%s\t%s\t%s\n" % (case, device, outcome, reason))
        print("onnx_conformance: wrote %s" % EXPECTATIONS)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--out", required=True)
    r = sub.add_parser("report")
    r.add_argument("--tests", required=True, help="the tessera_conformance_tests program")
    r.add_argument("--write-expectations", action="store_true")
    r.add_argument("--by-case", action="store_true", help="also list every case that fails")
    r.add_argument("--devices", default="", help="comma-separated devices (default: the test's)")
    args = ap.parse_args()
    if args.command == "generate":
        return generate(args.out)
    return report(args.tests, args.write_expectations, args.by_case, args.devices)


if __name__ == "__main__":
    sys.exit(main())
