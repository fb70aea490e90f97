// Benchmarks for the cpu backend.
//
//   BM_Layer/<device>/<model layer>   one layer of MobileNetV2, ResNet-18/50, VGG-16 or
//                                     SqueezeNet (real shapes, batch 1) compiled alone on the
//                                     device, with the variant the cpu device selects;
//                                     counters: GFLOP/s (direct-convolution FLOPs).
//   BM_ConvVariant/<variant>/<model layer>/<threads>
//                                     the same layer's kernel alone (NHWC in and out, no program
//                                     copy-in/out) forced onto one convolution kernel variant of
//                                     the cpu device (kConvKernels: tessera direct, winograd,
//                                     tessera gemm, openblas gemm, xnnpack) on a pool of 1 or 2
//                                     pinned threads;
//                                     variants that cannot run a layer are skipped; the CPU
//                                     column is the process's CPU time (all threads: at 1
//                                     thread less disturbed by a busy machine than wall time).
//   BM_Model/<device>/<model>         whole-model latency from TESSERA_MODEL_DIR (the exported
//                                     ONNX files), imported and optimised as `tessera convert`.
//   BM_Gemm/<M>/<N>/<K>/<kc>/<threads>
//                                     Tessera's AVX-512 GEMM (backends/cpu/gemm.h) alone, B packed
//                                     once, A read in place, relu epilogue; kc 0 = cache-derived;
//                                     CPU column: the process's CPU time, as BM_ConvVariant.
//   BM_ResidualBlock/<model layer>/<fused|unfused>/<threads>
//                                     a block's last convolution (no activation) + Add(+relu)
//                                     of a shortcut R (a depthwise 3x3 of a second input), as a
//                                     program on the cpu device. "fused": R is computed first,
//                                     so the Add runs inside the convolution
//                                     (CpuProgram::fuse_residual_adds); "unfused": R after the
//                                     convolution, so it cannot. Same work otherwise.
//   BM_LayoutConversion/<nchw_to_nhwc|nhwc_to_nchw>/<C>x<H*W>/<threads>
//                                     the NCHW <-> NHWC conversion a program runs at a slice
//                                     boundary (model input, a cut inside MobileNetV2), inside
//                                     one pool run; counter: GB/s (bytes read + written).
//   BM_Fc/<variant>/1x<K>x<N>/<threads>
//                                     one batch-1 fully connected layer (Gemm, W [N, K], bias,
//                                     relu) on each implementation: the cpu device's kernel
//                                     variants (tessera_gemv_f32, xnnpack_fully_connected_nc_f32)
//                                     and OpenBLAS sgemv / sgemm (M = 1) on each thread's half of
//                                     W's rows; counter GB/s: weight bytes streamed per second.
//   BM_FcInt8/<variant>/1x<K>x<N>/<threads>
//                                     the same layer in an int8 program's form: x in u8 (a
//                                     ReLU output's grid), weights s8 per output column, y f32,
//                                     on Tessera's int8 GEMV (tessera_gemv_int8, AVX512_VNNI) or
//                                     oneDNN's int8 matmul (onednn_matmul_int8); GB/s as BM_Fc
//                                     over the int8 weight bytes.
//   BM_MemRead/<MB>/<threads>/<streams>
//                                     achievable read bandwidth: a buffer larger than the caches
//                                     summed by 1 or 2 pool threads, each its contiguous half,
//                                     read as 1 or 8 streams at once (as the GEMV reads).
//   BM_FmaPeak/<threads>              this machine's FP32 FMA peak: independent FMA chains, one
//                                     per thread; counter: GFLOP/s.
//   BM_PoolDispatch/<what>/<threads>[/<idle us>]
//                                     the fixed cost of the device thread pool: `handoff` is an
//                                     empty ThreadPool::run (the user thread hands a job to the
//                                     pinned leader and waits); `parallel_for` is one empty
//                                     parallel_for with one item per thread inside a run, back
//                                     to back as consecutive kernels are (counter us/call);
//                                     `after_idle_us` is one run of one empty parallel_for
//                                     after the pool sat idle that long (the wake-up of
//                                     sleeping threads; manual time covers the run only).
//   BM_CpuKernel/<threads>t/<op case>/<native|reference>
//                                     one cpu-device kernel on its own (no program copy-in/out):
//                                     Tessera's kernel for ops XNNPACK lacks, in the layout it
//                                     picks for NHWC-fed inputs, against the reference fallback
//                                     the device would otherwise run (logical order, leader thread;
//                                     the conversions it would also need are not counted).
// Run: ./build/benchmarks/tessera_bench --benchmark_filter=Layer
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>
#include <thread>

#include "api/tessera.h"
#include "backends/cpu/cpu_program.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/layout.h"
#include "backends/cpu/onednn.h"
#include "backends/cpu/openblas.h"
#include "backends/cpu/simd.h"
#include "backends/registry.h"
#include "core/npy.h"
#include "graph/layer_graph.h"
#include "graph/onnx/onnx_import.h"
#include "graph/passes.h"
#include "scheduler/profiler.h"

namespace tessera {
namespace {

Tensor random(const Shape& s, uint32_t seed) {
  Tensor t = Tensor::create(DType::kF32, s).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (float& v : t.span<float>()) v = d(rng);
  return t;
}

// One conv layer: x [1, cin, hw, hw], k x k, stride, groups, padding (-1: k / 2), fused relu.
struct ConvLayer {
  const char* name;
  int64_t cin, cout, hw, k, stride, group;
  int64_t pad = -1;
};

// MobileNetV2, ResNet-18/50, VGG-16, SqueezeNet 1.1 and AlexNet layer shapes (224x224 input;
// padding k / 2 unless given). The RGB stems (3 input channels) are the models' own.
const ConvLayer kLayers[] = {
    {"mobilenet_v2/conv0_3x3s2", 3, 32, 224, 3, 2, 1},
    {"mobilenet_v2/dw_3x3_112", 32, 32, 112, 3, 1, 32},
    {"mobilenet_v2/project_1x1_112", 32, 16, 112, 1, 1, 1},
    {"mobilenet_v2/expand_1x1_112", 16, 96, 112, 1, 1, 1},
    {"mobilenet_v2/dw_3x3s2_112", 96, 96, 112, 3, 2, 96},
    {"mobilenet_v2/project_1x1_56", 144, 24, 56, 1, 1, 1},
    {"mobilenet_v2/expand_1x1_56", 24, 144, 56, 1, 1, 1},
    {"mobilenet_v2/dw_3x3s2_56", 144, 144, 56, 3, 2, 144},
    {"mobilenet_v2/project_1x1_14", 384, 64, 14, 1, 1, 1},
    {"mobilenet_v2/last_1x1_7", 320, 1280, 7, 1, 1, 1},
    {"resnet50/conv1_7x7s2", 3, 64, 224, 7, 2, 1},
    {"resnet50/res2_3x3_56", 64, 64, 56, 3, 1, 1},
    {"resnet50/res2_1x1_56", 64, 256, 56, 1, 1, 1},
    {"resnet50/res3_3x3_28", 128, 128, 28, 3, 1, 1},
    {"resnet50/res4_3x3_14", 256, 256, 14, 3, 1, 1},
    {"resnet50/res5_1x1_7", 512, 2048, 7, 1, 1, 1},
    {"resnet50/res2_1x1_56_reduce", 256, 64, 56, 1, 1, 1},
    {"resnet50/res3_1x1_28", 128, 512, 28, 1, 1, 1},
    {"resnet50/res3_1x1_28_reduce", 512, 128, 28, 1, 1, 1},
    {"resnet50/res3_3x3s2_56", 128, 128, 56, 3, 2, 1},
    {"resnet50/res4_1x1_14", 256, 1024, 14, 1, 1, 1},
    {"resnet50/res4_1x1_14_reduce", 1024, 256, 14, 1, 1, 1},
    {"resnet50/res5_3x3_7", 512, 512, 7, 3, 1, 1},
    {"resnet50/res5_1x1_7_reduce", 2048, 512, 7, 1, 1, 1},
    {"resnet18/layer1_3x3_56", 64, 64, 56, 3, 1, 1},
    {"resnet18/layer2_3x3s2_56", 64, 128, 56, 3, 2, 1},
    {"resnet18/layer2_3x3_28", 128, 128, 28, 3, 1, 1},
    {"resnet18/layer3_3x3_14", 256, 256, 14, 3, 1, 1},
    {"resnet18/layer4_3x3_7", 512, 512, 7, 3, 1, 1},
    {"vgg16/conv1_1_3x3_224", 3, 64, 224, 3, 1, 1},
    {"vgg16/conv1_2_3x3_224", 64, 64, 224, 3, 1, 1},
    {"vgg16/conv2_2_3x3_112", 128, 128, 112, 3, 1, 1},
    {"vgg16/conv3_2_3x3_56", 256, 256, 56, 3, 1, 1},
    {"vgg16/conv4_2_3x3_28", 512, 512, 28, 3, 1, 1},
    {"vgg16/conv5_2_3x3_14", 512, 512, 14, 3, 1, 1},
    {"squeezenet1_1/fire2_expand3x3_55", 16, 64, 55, 3, 1, 1},
    {"squeezenet1_1/fire2_expand1x1_55", 16, 64, 55, 1, 1, 1},
    {"squeezenet1_1/fire9_expand3x3_13", 64, 256, 13, 3, 1, 1},
    {"squeezenet1_1/conv1_3x3s2_224", 3, 64, 224, 3, 2, 1, 0},
    {"squeezenet1_1/fire5_squeeze1x1_27", 256, 32, 27, 1, 1, 1},
    {"squeezenet1_1/classifier_1x1_13", 512, 1000, 13, 1, 1, 1},
    {"resnet18/layer2_1x1s2_56", 64, 128, 56, 1, 2, 1},
    {"resnet50/res4_1x1s2_28", 512, 1024, 28, 1, 2, 1},
    {"alexnet/conv1_11x11s4_224", 3, 64, 224, 11, 4, 1, 2},
    {"alexnet/conv2_5x5_27", 64, 192, 27, 5, 1, 1},
    {"alexnet/conv3_3x3_13", 192, 384, 13, 3, 1, 1},
    // More few-channel layers (the direct kernel's domain): the stems of ShuffleNetV2 and
    // MobileNetV3-Small (24 and 16 output channels), GoogLeNet's 16-channel 3x3.
    {"shufflenet_v2/conv1_3x3s2", 3, 24, 224, 3, 2, 1},
    {"mobilenet_v3_small/conv0_3x3s2", 3, 16, 224, 3, 2, 1},
    {"googlenet/inception3a_3x3_28", 16, 32, 28, 3, 1, 1},
};

// The one-node graph of a layer (fused relu), shape-inferred.
Result<Graph> layer_graph(const ConvLayer& l) {
  Graph g;
  const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{1, l.cin, l.hw, l.hw}});
  g.inputs().push_back(x);
  Node n;
  n.name = l.name;
  n.kind = OpKind::kConv;
  n.attrs.set("strides", std::vector<int64_t>{l.stride, l.stride});
  const int64_t p = l.pad >= 0 ? l.pad : l.k / 2;
  n.attrs.set("pads", std::vector<int64_t>{p, p, p, p});
  n.attrs.set("group", l.group);
  n.attrs.set("activation", std::string("relu"));
  n.inputs = {x, g.add_constant("w", random(Shape{l.cout, l.cin / l.group, l.k, l.k}, 1)),
              g.add_constant("b", random(Shape{l.cout}, 2))};
  n.outputs = {g.add_value("y")};
  g.outputs().push_back(n.outputs[0]);
  g.add_node(n);
  RETURN_IF_ERROR(g.infer_shapes());
  return g;
}

// Runs a compiled layer until the benchmark stops; counter GFLOP/s of direct convolution.
void run_layer(benchmark::State& state, const Graph& g, const ConvLayer& l, Program& prog) {
  std::vector<Tensor> in = {random(g.value(g.inputs()[0]).info.shape, 3)}, out(1);
  const Shape& ys = g.value(g.outputs()[0]).info.shape;
  const double flops =
      2.0 * static_cast<double>(ys.numel()) * static_cast<double>(l.cin / l.group * l.k * l.k);
  for (auto _ : state) {
    Status st = prog.run(in, out);
    if (!st.ok()) return state.SkipWithError(st.to_string().c_str());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Binds a kernel built for node 0 of `g` to a random input (NHWC when the kernel wants it, as
// from a convolution) and times run() alone (no program copy-in/out). Returns the output tensor;
// on failure the benchmark is skipped and the error returned.
Result<Tensor> time_kernel(benchmark::State& state, const Graph& g, cpu::Kernel& k,
                           cpu::ThreadPool& pool) {
  using namespace tessera::cpu;
  const Node& node = g.node(0);
  const Shape& xs = g.value(node.inputs[0]).info.shape;
  const size_t ni = node.inputs.size();
  std::vector<Layout> available(ni, Layout::kNCHW), wanted(ni), produced(1);
  available[0] = xs.rank() == 4 ? Layout::kNHWC : Layout::kNCHW;
  k.choose_layouts(available, wanted, produced);
  const TensorInfo& yi = g.value(node.outputs[0]).info;
  Tensor xt = random(xs, 7), yt = Tensor::create(DType::kF32, yi.shape).value();
  std::vector<Operand> ins(ni), outs(1);
  ins[0] = Operand{xt.raw(), DType::kF32, xs, xs.rank() == 4 ? wanted[0] : Layout::kNCHW};
  for (size_t i = 1; i < ni; ++i) {
    const Value& v = g.value(node.inputs[i]);
    ins[i] = Operand{const_cast<void*>(v.data.raw()),
                     v.data.dtype(),
                     v.data.shape(),
                     Layout::kNCHW,
                     true,
                     &v.data};
  }
  outs[0] =
      Operand{yt.raw(), DType::kF32, yi.shape, yi.shape.rank() == 4 ? produced[0] : Layout::kNCHW};
  Status st = k.bind(ins, outs, pool);
  if (!st.ok()) {
    state.SkipWithError(st.to_string().c_str());
    return st;
  }
  for (auto _ : state) {
    st = pool.run([&] { return k.run(pool); });
    if (!st.ok()) {
      state.SkipWithError(st.to_string().c_str());
      return st;
    }
  }
  state.SetLabel(k.describe());
  return yt;
}

void BM_Layer(benchmark::State& state, std::string device, ConvLayer l) {
  auto g = layer_graph(l);
  if (!g.ok()) return state.SkipWithError(g.status().to_string().c_str());
  auto dev = open_device(device);
  if (!dev.ok()) return state.SkipWithError(dev.status().to_string().c_str());
  const NodeId layers[] = {0};
  auto prog = (*dev)->compile(*g, layers);
  if (!prog.ok()) return state.SkipWithError(prog.status().to_string().c_str());
  state.SetLabel((*prog)->describe());
  run_layer(state, *g, l, **prog);
}

// The kernel alone (time_kernel: NHWC in and out, no layout conversions), so that GFLOP/s
// compare the convolution variants themselves.
void BM_ConvVariant(benchmark::State& state, const char* variant, ConvLayer l, int threads) {
  auto g = layer_graph(l);
  if (!g.ok()) return state.SkipWithError(g.status().to_string().c_str());
  std::vector<int> cores;
  for (int c = 0; c < threads; ++c) cores.push_back(c);
  auto pool = cpu::ThreadPool::create(cpu::CoreSet(cores));
  if (!pool.ok()) return state.SkipWithError(pool.status().to_string().c_str());
  const Node& node = g->node(0);
  NodeContext nc(*g, node);
  cpu::KernelRequest req{*g, node, nc.ctx(), **pool};
  auto k = cpu::build_kernel(req, variant);
  if (!k.ok()) return state.SkipWithError(k.status().to_string().c_str());
  if (!time_kernel(state, *g, **k, **pool).ok()) return;
  const Shape& ys = g->value(g->outputs()[0]).info.shape;
  state.counters["GFLOP/s"] = benchmark::Counter(
      2e-9 * static_cast<double>(ys.numel()) * static_cast<double>(l.cin / l.group * l.k * l.k),
      benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Model(benchmark::State& state, std::string device, std::string model) {
  const char* dir = std::getenv("TESSERA_MODEL_DIR");
  const std::string base = std::string(dir ? dir : "") + "/" + model;
  auto imported = convert_onnx(base + ".onnx");
  if (!imported.ok()) return state.SkipWithError(imported.status().to_string().c_str());
  auto m = Model::from_graph(std::move(imported->graph));
  if (!m.ok()) return state.SkipWithError(m.status().to_string().c_str());
  auto session = Session::create(*m, device);
  if (!session.ok()) return state.SkipWithError(session.status().to_string().c_str());
  auto input = read_npy(base + ".input.npy");
  if (!input.ok()) return state.SkipWithError("missing input");
  std::vector<Tensor> in = {*input};
  for (auto _ : state) {
    auto out = (*session)->run(in);
    if (!out.ok()) return state.SkipWithError(out.status().to_string().c_str());
  }
  state.counters["peak_MiB"] = static_cast<double>((*session)->peak_memory_bytes()) / (1 << 20);
}

// The cost of per-layer timing: the whole model compiled once on `device`, each iteration one
// plain run() and one run_timed() in alternating order; counters: the median of each (ms) and
// their ratio. The profiler's in-chain layer times come from run_timed, plans run with run().
void BM_RunTimedCost(benchmark::State& state, std::string device, std::string model) {
  const char* dir = std::getenv("TESSERA_MODEL_DIR");
  auto imported = convert_onnx(std::string(dir ? dir : "") + "/" + model + ".onnx");
  if (!imported.ok()) return state.SkipWithError(imported.status().to_string().c_str());
  auto lg = LayerGraph::build(imported->graph);
  if (!lg.ok()) return state.SkipWithError(lg.status().to_string().c_str());
  auto dev = open_device(device);
  if (!dev.ok()) return state.SkipWithError(dev.status().to_string().c_str());
  auto prog = SliceProgram::compile(*lg, **dev, 0, lg->num_layers());
  if (!prog.ok()) return state.SkipWithError(prog.status().to_string().c_str());
  std::vector<double> plain, timed, layer_ms;
  using Clock = std::chrono::steady_clock;
  bool timed_first = false;
  for (auto _ : state) {
    for (int k = 0; k < 2; ++k) {
      const bool timed_run = (k == 0) == timed_first;
      const auto t0 = Clock::now();
      const Status st = timed_run ? prog->run_timed(&layer_ms) : prog->run();
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (!st.ok()) return state.SkipWithError(st.to_string().c_str());
      (timed_run ? timed : plain).push_back(ms);
    }
    timed_first = !timed_first;
  }
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  const double p = median(plain), q = median(timed);
  state.counters["run_ms"] = p;
  state.counters["run_timed_ms"] = q;
  state.counters["timed/run"] = q / p;
}

// The end of a residual block: conv(x) (layer `l`, no activation) + R, R = relu(depthwise
// 3x3(s)) of a second input s of the conv output's shape; `relu` on the Add (the ResNets) or not
// (MobileNetV2). `fused`: R's layer comes first, so the Add fuses into the convolution.
void BM_ResidualBlock(benchmark::State& state, ConvLayer l, bool relu, bool fused, int threads) {
  const int64_t ho = (l.hw + 2 * (l.k / 2) - l.k) / l.stride + 1;
  Graph g;
  const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{1, l.cin, l.hw, l.hw}});
  const ValueId sv = g.add_value("s", TensorInfo{DType::kF32, Shape{1, l.cout, ho, ho}});
  g.inputs() = {x, sv};
  Node conv;
  conv.name = "conv";
  conv.kind = OpKind::kConv;
  conv.attrs.set("strides", std::vector<int64_t>{l.stride, l.stride});
  const int64_t p = l.k / 2;
  conv.attrs.set("pads", std::vector<int64_t>{p, p, p, p});
  conv.inputs = {x, g.add_constant("w", random(Shape{l.cout, l.cin, l.k, l.k}, 1)),
                 g.add_constant("b", random(Shape{l.cout}, 2))};
  conv.outputs = {g.add_value("y")};
  Node dw;
  dw.name = "shortcut";
  dw.kind = OpKind::kConv;
  dw.attrs.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  dw.attrs.set("group", l.cout);
  dw.attrs.set("activation", std::string("relu"));
  dw.inputs = {sv, g.add_constant("dw", random(Shape{l.cout, 1, 3, 3}, 3))};
  dw.outputs = {g.add_value("r")};
  Node add;
  add.name = "add";
  add.kind = OpKind::kAdd;
  if (relu) add.attrs.set("activation", std::string("relu"));
  add.inputs = {conv.outputs[0], dw.outputs[0]};
  add.outputs = {g.add_value("out")};
  g.outputs() = {add.outputs[0]};
  std::vector<NodeId> layers;
  if (fused) layers.push_back(g.add_node(dw));
  layers.push_back(g.add_node(conv));
  if (!fused) layers.push_back(g.add_node(dw));
  layers.push_back(g.add_node(add));
  if (Status st = g.infer_shapes(); !st.ok()) return state.SkipWithError(st.to_string().c_str());
  std::vector<int> cores;
  for (int c = 0; c < threads; ++c) cores.push_back(c);
  auto pool = cpu::ThreadPool::create(cpu::CoreSet(cores));
  if (!pool.ok()) return state.SkipWithError(pool.status().to_string().c_str());
  auto prog = cpu::CpuProgram::compile(g, layers, std::move(*pool));
  if (!prog.ok()) return state.SkipWithError(prog.status().to_string().c_str());
  const std::string desc = (*prog)->describe();
  if ((desc.find("fused into") != std::string::npos) != fused)
    return state.SkipWithError(("unexpected fusion: " + desc).c_str());
  // The program takes its inputs in first-use order.
  std::vector<Tensor> in;
  for (ValueId v : (*prog)->input_values())
    in.push_back(random(g.value(v).info.shape, v == x ? 4 : 5));
  std::vector<Tensor> out(1);
  for (auto _ : state) {
    Status st = (*prog)->run(in, out);
    if (!st.ok()) return state.SkipWithError(st.to_string().c_str());
  }
}

// One op on real shapes (ShuffleNetV2, DenseNet, GoogLeNet, MobileNetV2 heads; LRN as in
// AlexNet's original; ConvTranspose as in an FCN upsampler).
struct KernelCase {
  const char* name;
  OpKind op;
  Shape x;
  std::vector<std::pair<const char*, AttributeValue>> attrs;
  std::vector<Tensor> constants;  // inputs 1.. (an undefined tensor: omitted)
};

Tensor i64s(std::vector<int64_t> v) {
  return Tensor::from_int64s(Shape{static_cast<int64_t>(v.size())}, v);
}
Tensor f32s(std::vector<float> v) {
  return Tensor::from_floats(Shape{static_cast<int64_t>(v.size())}, v);
}

std::vector<KernelCase> kernel_cases() {
  using Ints = std::vector<int64_t>;
  const Tensor none = Tensor::create(DType::kF32, Shape{0}).value();
  return {
      {"shufflenet_shuffle_transpose_58x28",
       OpKind::kTranspose,
       Shape{1, 2, 58, 28, 28},
       {{"perm", Ints{0, 2, 1, 3, 4}}},
       {}},
      {"nhwc_to_nchw_transpose_64x56",
       OpKind::kTranspose,
       Shape{1, 64, 56, 56},
       {{"perm", Ints{0, 2, 3, 1}}},
       {}},
      {"shufflenet_channel_slice_116x28",
       OpKind::kSlice,
       Shape{1, 116, 28, 28},
       {},
       {i64s({58}), i64s({116}), i64s({1})}},
      {"pad_1_64x56", OpKind::kPad, Shape{1, 64, 56, 56}, {}, {i64s({0, 0, 1, 1, 0, 0, 1, 1})}},
      {"reflect_pad_3_32x112",
       OpKind::kPad,
       Shape{1, 32, 112, 112},
       {{"mode", std::string("reflect")}},
       {i64s({0, 0, 3, 3, 0, 0, 3, 3})}},
      {"resize_nearest_2x_64x28",
       OpKind::kResize,
       Shape{1, 64, 28, 28},
       {},
       {none, f32s({1, 1, 2, 2})}},
      {"resize_linear_2x_64x28",
       OpKind::kResize,
       Shape{1, 64, 28, 28},
       {{"mode", std::string("linear")}},
       {none, f32s({1, 1, 2, 2})}},
      {"gather_channels_256x14",
       OpKind::kGather,
       Shape{1, 256, 14, 14},
       {{"axis", int64_t{1}}},
       {i64s([] {
         Ints v;
         for (int64_t c = 255; c >= 0; c -= 2) v.push_back(c);
         return v;
       }())}},
      {"reducemean_hw_1280x7",
       OpKind::kReduceMean,
       Shape{1, 1280, 7, 7},
       {{"axes", Ints{2, 3}}},
       {}},
      {"lrn_5_64x56", OpKind::kLRN, Shape{1, 64, 56, 56}, {{"size", int64_t{5}}}, {}},
      {"convtranspose_4x4s2_64x28",
       OpKind::kConvTranspose,
       Shape{1, 64, 28, 28},
       {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}},
       {random(Shape{64, 32, 4, 4}, 5), random(Shape{32}, 6)}},
  };
}

void BM_CpuKernel(benchmark::State& state, int threads, KernelCase c, bool native) {
  using namespace tessera::cpu;
  Graph g;
  Node n;
  n.name = c.name;
  n.kind = c.op;
  for (const auto& [k, v] : c.attrs) n.attrs.set(k, v);
  const ValueId x = g.add_value("x", TensorInfo{DType::kF32, c.x});
  g.inputs().push_back(x);
  n.inputs = {x};
  for (size_t i = 0; i < c.constants.size(); ++i) {
    n.inputs.push_back(g.add_constant("c" + std::to_string(i), c.constants[i]));
  }
  n.outputs = {g.add_value("y")};
  g.outputs().push_back(n.outputs[0]);
  g.add_node(n);
  if (!g.infer_shapes().ok()) return state.SkipWithError("shape inference failed");
  std::vector<int> ids;
  for (int i = 0; i < threads; ++i) ids.push_back(i);
  auto pool = ThreadPool::create(CoreSet(ids));
  if (!pool.ok()) return state.SkipWithError(pool.status().to_string().c_str());
  const Node& node = g.node(0);
  NodeContext nc(g, node);
  KernelRequest req{g, node, nc.ctx(), **pool};
  Result<std::unique_ptr<Kernel>> k =
      native ? build_kernel(req) : Result<std::unique_ptr<Kernel>>(make_reference_kernel(node));
  if (!k.ok()) return state.SkipWithError(k.status().to_string().c_str());
  if (native && (*k)->is_reference()) return state.SkipWithError("no native kernel");
  Result<Tensor> yt = time_kernel(state, g, **k, **pool);
  if (!yt.ok()) return;
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(c.x.numel() * 4 + yt->byte_size()));
}

void BM_Gemm(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2), kc = state.range(3);
  const int threads = static_cast<int>(state.range(4));
  if (!cpu::gemm_available()) return state.SkipWithError("no AVX-512F");
  std::vector<int> ids;
  for (int i = 0; i < threads; ++i) ids.push_back(i);
  auto pool = cpu::ThreadPool::create(cpu::CoreSet(ids));
  if (!pool.ok()) return state.SkipWithError(pool.status().to_string().c_str());
  const Tensor a = random(Shape{m, k}, 1), b = random(Shape{k, n}, 2), bias = random(Shape{n}, 3);
  Tensor c = Tensor::create(DType::kF32, Shape{m, n}).value();
  cpu::Gemm gemm(cpu::PackedB::pack(b.data<float>(), k, n, n, kc));
  gemm.bind(m, threads, false);
  const cpu::GemmA src{a.data<float>(), k, {}};
  const cpu::GemmEpilogue ep{bias.data<float>(), true, 0.f, INFINITY};
  for (auto _ : state) {
    Status st = (*pool)->run([&] {
      gemm.run(**pool, src, c.data<float>(), n, ep);
      return Status();
    });
    if (!st.ok()) return state.SkipWithError(st.to_string().c_str());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2e-9 * static_cast<double>(m * n * k),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
// ResNet-50 1x1 shapes (pixels x Cout x Cin) and im2col depths, kc 0 and fixed; then the
// small-M layers whose work split balances columns against rows (SqueezeNet's 13x13 classifier,
// ResNet's 7x7 and 14x14 layers: 3x3 as im2col, 1x1 expand) and a large-M control.
BENCHMARK(BM_Gemm)
    ->ArgsProduct({{3136}, {256}, {64}, {0}, {1, 2}})
    ->ArgsProduct({{3136}, {64}, {256}, {0, 128, 192, 256}, {1}})
    ->ArgsProduct({{784}, {128}, {512}, {0, 128, 192, 256, 384, 512}, {1}})
    ->ArgsProduct({{196}, {1024}, {256}, {0}, {1, 2}})
    ->ArgsProduct({{49}, {512}, {2048}, {0}, {1, 2}})
    ->ArgsProduct({{784}, {128}, {1152}, {0, 192, 384}, {1}})
    ->ArgsProduct({{169}, {1000}, {512}, {0}, {1, 2}})
    ->ArgsProduct({{49}, {512}, {4608}, {0}, {1, 2}})
    ->ArgsProduct({{196}, {256}, {2304}, {0}, {1, 2}})
    ->ArgsProduct({{49}, {2048}, {512}, {0}, {1, 2}})
    ->ArgsProduct({{3136}, {64}, {64}, {0}, {1, 2}})
    // Batch-1 fully connected layers (AlexNet / VGG-16 classifiers), against BM_Fc.
    ->ArgsProduct({{1}, {4096}, {9216, 4096, 25088}, {0}, {1, 2}})
    ->ArgsProduct({{1}, {1000}, {4096}, {0}, {1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

Result<std::unique_ptr<cpu::ThreadPool>> pool_of(int threads) {
  std::vector<int> ids;
  for (int i = 0; i < threads; ++i) ids.push_back(i);
  return cpu::ThreadPool::create(cpu::CoreSet(ids));
}

// Inside one run of `pool`: fn(t, begin, end) on each of its `threads` threads for the thread's
// contiguous share [begin, end) of [0, total).
Status run_thread_shares(cpu::ThreadPool& pool, int threads, int64_t total,
                         const std::function<void(size_t, int64_t, int64_t)>& fn) {
  return pool.run([&] {
    pool.parallel_for(static_cast<size_t>(threads), 1, [&](size_t lo, size_t hi) {
      for (size_t t = lo; t < hi; ++t) {
        fn(t, total * static_cast<int64_t>(t) / threads,
           total * static_cast<int64_t>(t + 1) / threads);
      }
    });
    return Status();
  });
}

// ---- Fully connected layers at batch 1 and memory bandwidth ----------------------------------

// One fully connected layer x[1, k] -> relu(x * W^T + b), W [n, k] as PyTorch exports it (Gemm,
// transB = 1), on one implementation, inside one pool run per iteration like a program's layer:
// a cpu-device kernel variant (tessera_gemv_f32, xnnpack_fully_connected_nc_f32), or OpenBLAS's
// sgemv / sgemm (M = 1) on each thread's contiguous half of the rows of W, then bias + relu.
// Counter GB/s: the weight bytes read per second (at batch 1 the layer streams them once).
// x[1, k] -> relu(x * W^T + b), W [n, k] random, as one Gemm node (node 0).
Graph fc_graph(int64_t k, int64_t n) {
  Graph g;
  const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{1, k}});
  g.inputs().push_back(x);
  Node node;
  node.name = "fc";
  node.kind = OpKind::kGemm;
  node.attrs.set("transB", int64_t{1});
  node.attrs.set("activation", std::string("relu"));
  node.inputs = {x, g.add_constant("w", random(Shape{n, k}, 1)),
                 g.add_constant("b", random(Shape{n}, 2))};
  node.outputs = {g.add_value("y")};
  g.outputs().push_back(node.outputs[0]);
  g.add_node(node);
  return g;
}

void BM_Fc(benchmark::State& state, std::string variant, int64_t k, int64_t n, int threads) {
  using namespace tessera::cpu;
  Graph g = fc_graph(k, n);
  if (!g.infer_shapes().ok()) return state.SkipWithError("shape inference failed");
  const Node& node = g.node(0);
  auto pool = pool_of(threads);
  if (!pool.ok()) return state.SkipWithError(pool.status().to_string().c_str());
  if (variant.starts_with("openblas")) {
    if (!openblas().available()) return state.SkipWithError("no OpenBLAS");
    using Sgemv = void (*)(int, int, int, int, float, const float*, int, const float*, int, float,
                           float*, int);
    void* lib = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);
    auto sgemv = lib != nullptr ? reinterpret_cast<Sgemv>(dlsym(lib, "cblas_sgemv")) : nullptr;
    if (sgemv == nullptr) return state.SkipWithError("no cblas_sgemv");
    const float* w = g.value(node.inputs[1]).data.data<float>();
    const float* b = g.value(node.inputs[2]).data.data<float>();
    const Tensor xt = random(Shape{1, k}, 7);
    std::vector<float> y(static_cast<size_t>(n));
    const bool gemv = variant == "openblas_sgemv";
    for (auto _ : state) {
      Status st = run_thread_shares(**pool, threads, n, [&](size_t, int64_t r0, int64_t r1) {
        const int rows = static_cast<int>(r1 - r0);
        if (gemv) {
          sgemv(kRowMajor, kNoTrans, rows, static_cast<int>(k), 1.f, w + r0 * k,
                static_cast<int>(k), xt.data<float>(), 1, 0.f, y.data() + r0, 1);
        } else {
          openblas().sgemm(kRowMajor, kNoTrans, kTrans, 1, rows, static_cast<int>(k), 1.f,
                           xt.data<float>(), static_cast<int>(k), w + r0 * k, static_cast<int>(k),
                           0.f, y.data() + r0, rows);
        }
        for (int64_t j = r0; j < r1; ++j) {
          y[static_cast<size_t>(j)] = std::max(y[static_cast<size_t>(j)] + b[j], 0.f);
        }
      });
      if (!st.ok()) return state.SkipWithError(st.to_string().c_str());
    }
    state.SetLabel(variant);
  } else {
    NodeContext nc(g, g.node(0));
    KernelRequest req{g, g.node(0), nc.ctx(), **pool};
    auto kern = build_kernel(req, variant.c_str());
    if (!kern.ok()) return state.SkipWithError(kern.status().to_string().c_str());
    if (!time_kernel(state, g, **kern, **pool).ok()) return;
  }
  state.counters["GB/s"] = benchmark::Counter(4e-9 * static_cast<double>(k * n),
                                              benchmark::Counter::kIsIterationInvariantRate);
}

// BM_Fc's layer in an int8 program's form (see the header comment).
void BM_FcInt8(benchmark::State& state, std::string variant, int64_t k, int64_t n, int threads) {
  using namespace tessera::cpu;
  Graph g = fc_graph(k, n);
  if (!g.infer_shapes().ok()) return state.SkipWithError("shape inference failed");
  const Node& node = g.node(0);
  const ValueId x = node.inputs[0];
  auto pool = pool_of(threads);
  if (!pool.ok()) return state.SkipWithError(pool.status().to_string().c_str());
  std::vector<QuantParam> quant(static_cast<size_t>(g.num_values()));
  const QuantParam qx{0.02f, true, 0};
  quant[static_cast<size_t>(x)] = qx;
  NodeContext nc(g, g.node(0));
  KernelRequest req{g, g.node(0), nc.ctx(), **pool};
  Result<std::unique_ptr<Kernel>> kern = variant == "tessera_gemv_int8"
                                             ? make_int8_gemv(req, quant)
                                             : make_onednn_int8_kernel(req, quant);
  if (!kern.ok()) return state.SkipWithError(kern.status().to_string().c_str());
  if (*kern == nullptr) return state.SkipWithError("the variant declines this layer here");
  std::vector<uint8_t> xq(static_cast<size_t>(k) + 64);
  std::mt19937 rng(5);
  for (uint8_t& b : xq) b = static_cast<uint8_t>(rng());
  std::vector<float> y(static_cast<size_t>(n));
  Operand xin{xq.data(), DType::kF32, Shape{1, k}, Layout::kNCHW};
  xin.int8 = true;
  xin.quant = qx;
  std::vector<Operand> ins = {xin, constant_operand(g.value(node.inputs[1]).data),
                              constant_operand(g.value(node.inputs[2]).data)};
  std::vector<Operand> outs = {Operand{y.data(), DType::kF32, Shape{1, n}, Layout::kNCHW}};
  Status st = (*kern)->bind(ins, outs, **pool);
  if (!st.ok()) return state.SkipWithError(st.to_string().c_str());
  for (auto _ : state) {
    st = (*pool)->run([&] { return (*kern)->run(**pool); });
    if (!st.ok()) return state.SkipWithError(st.to_string().c_str());
  }
  state.SetLabel((*kern)->describe());
  state.counters["GB/s"] = benchmark::Counter(1e-9 * static_cast<double>(k * n),
                                              benchmark::Counter::kIsIterationInvariantRate);
}

// This machine's achievable read bandwidth: `mb` MB (larger than the caches: from memory)
// summed by the pool's threads, each its own contiguous part, read as `streams` consecutive
// pieces at once (as the GEMV reads a panel: one core keeps more memory reads in flight with
// several streams). Counter GB/s.
#if TESSERA_X86_64
template <int S>
TESSERA_AVX512 float sum_floats(const float* p, int64_t n) {
  cpu::F32x16 a[S] = {};
  const int64_t seg = n / S / 16 * 16;
  for (int64_t i = 0; i < seg; i += 16) {
    for (int u = 0; u < S; ++u) a[u] += cpu::load16(p + u * seg + i);
  }
  float s = 0;
  for (int64_t i = S * seg; i < n; ++i) s += p[i];
  for (int u = 0; u < S; ++u) {
    for (int l = 0; l < 16; ++l) s += a[u][l];
  }
  return s;
}

#endif  // TESSERA_X86_64

void BM_MemRead(benchmark::State& state) {
  const int64_t n = state.range(0) * (1 << 20) / 4;
  const int threads = static_cast<int>(state.range(1));
  const bool streams8 = state.range(2) == 8;
#if TESSERA_X86_64
  if (!cpu::has_avx512()) return state.SkipWithError("no AVX-512F");
  auto pool = pool_of(threads);
  if (!pool.ok()) return state.SkipWithError(pool.status().to_string().c_str());
  std::vector<float> buf(static_cast<size_t>(n), 1.f);
  std::vector<float> sums(static_cast<size_t>(threads));
  for (auto _ : state) {
    Status st = run_thread_shares(**pool, threads, n, [&](size_t t, int64_t i0, int64_t i1) {
      sums[t] = streams8 ? sum_floats<8>(buf.data() + i0, i1 - i0)
                         : sum_floats<1>(buf.data() + i0, i1 - i0);
    });
    if (!st.ok()) return state.SkipWithError(st.to_string().c_str());
    benchmark::DoNotOptimize(sums.data());
  }
  state.counters["GB/s"] = benchmark::Counter(4e-9 * static_cast<double>(n),
                                              benchmark::Counter::kIsIterationInvariantRate);
#else
  (void)n;
  (void)threads;
  (void)streams8;
  state.SkipWithError("AVX-512 only (x86-64 builds)");
#endif
}

// ---- Thread-pool dispatch ----------------------------------------------------------------------

void BM_PoolHandoff(benchmark::State& state) {
  auto pool = pool_of(static_cast<int>(state.range(0)));
  if (!pool.ok()) return state.SkipWithError(pool.status().to_string().c_str());
  for (auto _ : state) {
    Status st = (*pool)->run([] { return Status(); });
    if (!st.ok()) return state.SkipWithError(st.to_string().c_str());
  }
}
BENCHMARK(BM_PoolHandoff)->Name("BM_PoolDispatch/handoff")->Arg(1)->Arg(2)->UseRealTime();

// Per iteration one run of kCalls empty parallel_for calls; reported per call.
void BM_PoolParallelFor(benchmark::State& state) {
  constexpr int kCalls = 100;
  const int threads = static_cast<int>(state.range(0));
  auto pool = pool_of(threads);
  if (!pool.ok()) return state.SkipWithError(pool.status().to_string().c_str());
  std::atomic<size_t> items{0};
  for (auto _ : state) {
    Status st = (*pool)->run([&] {
      for (int i = 0; i < kCalls; ++i) {
        (*pool)->parallel_for(static_cast<size_t>(threads), 1, [&](size_t b, size_t e) {
          items.fetch_add(e - b, std::memory_order_relaxed);
        });
      }
      return Status();
    });
    if (!st.ok()) return state.SkipWithError(st.to_string().c_str());
  }
  state.counters["us/call"] = benchmark::Counter(
      static_cast<double>(kCalls) * 1e-6,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_PoolParallelFor)->Name("BM_PoolDispatch/parallel_for")->Arg(1)->Arg(2)->UseRealTime();

void BM_LayoutConversion(benchmark::State& state) {
  const bool to_nhwc = state.range(0) != 0;
  const int64_t c = state.range(1), hw = state.range(2);
  auto pool = pool_of(static_cast<int>(state.range(3)));
  if (!pool.ok()) return state.SkipWithError(pool.status().to_string().c_str());
  std::vector<float> src(static_cast<size_t>(c * hw)), dst(src.size() + 16);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i % 251);
  for (auto _ : state) {
    Status st = (*pool)->run([&] {
      if (to_nhwc) {
        nchw_to_nhwc(src.data(), dst.data(), 1, c, hw, pool->get());
      } else {
        nhwc_to_nchw(src.data(), dst.data(), 1, c, hw, pool->get());
      }
      return Status();
    });
    if (!st.ok()) return state.SkipWithError(st.to_string().c_str());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(c * hw) * 8 * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}
void layout_conversion_args(benchmark::internal::Benchmark* b) {
  // (to_nhwc, C, H*W): the RGB model input, MobileNetV2 cuts at 112x112x32, 14x14x384, 7x7x1280.
  const int64_t shapes[][3] = {{1, 3, 224 * 224}, {1, 32, 112 * 112}, {0, 32, 112 * 112},
                               {0, 384, 196},     {1, 384, 196},      {0, 1280, 49}};
  for (const auto& s : shapes) {
    for (int64_t threads : {1, 2}) b->Args({s[0], s[1], s[2], threads});
  }
}
BENCHMARK(BM_LayoutConversion)->Apply(layout_conversion_args)->UseRealTime();

// One run of one empty parallel_for after `idle_us` of idle pool; times the run only.
void BM_PoolAfterIdle(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const auto idle = std::chrono::microseconds(state.range(1));
  auto pool = pool_of(threads);
  if (!pool.ok()) return state.SkipWithError(pool.status().to_string().c_str());
  for (auto _ : state) {
    std::this_thread::sleep_for(idle);
    const auto t0 = std::chrono::steady_clock::now();
    Status st = (*pool)->run([&] {
      (*pool)->parallel_for(static_cast<size_t>(threads), 1, [](size_t, size_t) {});
      return Status();
    });
    const auto t1 = std::chrono::steady_clock::now();
    if (!st.ok()) return state.SkipWithError(st.to_string().c_str());
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
  }
}
BENCHMARK(BM_PoolAfterIdle)
    ->Name("BM_PoolDispatch/after_idle_us")
    ->ArgsProduct({{1, 2}, {100, 5000}})
    ->Iterations(200)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// 16 independent accumulator chains of 16-float vectors (the compiler emits FMAs with -mfma;
// with the portable build flags it emits mul+add, so the kernel is built for AVX-512 here; other
// architectures get their baseline vectors: four NEON registers per chain on aarch64).
#if TESSERA_X86_64
#define TESSERA_FMA_PEAK_TARGET __attribute__((target("avx512f,fma")))
#else
#define TESSERA_FMA_PEAK_TARGET
#endif
TESSERA_FMA_PEAK_TARGET double fma_chains(int64_t iters) {
  typedef float v16 __attribute__((vector_size(64)));
  v16 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = v16{} + static_cast<float>(i);
  const v16 a = v16{} + 0.999999f, b = v16{} + 1e-7f;
  for (int64_t it = 0; it < iters; ++it) {
    for (int i = 0; i < 16; ++i) acc[i] = acc[i] * a + b;
  }
  float s = 0;
  for (int i = 0; i < 16; ++i) s += acc[i][0];
  return s;
}

void BM_FmaPeak(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const int64_t iters = 1 << 22;
  for (auto _ : state) {
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&] { benchmark::DoNotOptimize(fma_chains(iters)); });
    for (auto& t : ts) t.join();
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(static_cast<double>(threads) * iters * 16 * 16 * 2 * 1e-9,
                         benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_FmaPeak)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_MemRead)
    ->ArgsProduct({{512}, {1, 2}, {1, 8}})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

const char* const kModels[] = {"mobilenet_v2",  "resnet18", "resnet50",
                               "squeezenet1_1", "vgg16",    "alexnet"};

int register_all() {
  for (int threads : {1, 2}) {
    for (const KernelCase& c : kernel_cases()) {
      for (bool native : {true, false}) {
        benchmark::RegisterBenchmark((std::string("BM_CpuKernel/") + std::to_string(threads) +
                                      "t/" + c.name + (native ? "/native" : "/reference"))
                                         .c_str(),
                                     BM_CpuKernel, threads, c, native)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
    }
  }
  for (size_t v = 0; v < cpu::kNumConvKernels; ++v) {
    const char* variant = cpu::kConvKernels[v].variant;
    for (const ConvLayer& l : kLayers) {
      for (int threads : {1, 2}) {
        benchmark::RegisterBenchmark((std::string("BM_ConvVariant/") + variant + "/" + l.name +
                                      "/" + std::to_string(threads))
                                         .c_str(),
                                     BM_ConvVariant, variant, l, threads)
            ->Unit(benchmark::kMicrosecond)
            ->MeasureProcessCPUTime()
            ->UseRealTime();
      }
    }
  }
  // The convolutions that end residual blocks (the Add fuses into them), with the Add's relu
  // except in MobileNetV2.
  for (const char* name :
       {"resnet50/res2_1x1_56", "resnet50/res4_1x1_14", "resnet18/layer1_3x3_56",
        "resnet18/layer4_3x3_7", "resnet18/layer2_1x1s2_56", "mobilenet_v2/project_1x1_14"}) {
    const ConvLayer* l = nullptr;
    for (const ConvLayer& c : kLayers) {
      if (std::string(c.name) == name) l = &c;
    }
    const bool relu = std::string(name).rfind("mobilenet_v2", 0) != 0;
    for (int threads : {1, 2}) {
      for (bool fused : {true, false}) {
        benchmark::RegisterBenchmark((std::string("BM_ResidualBlock/") + name +
                                      (fused ? "/fused/" : "/unfused/") + std::to_string(threads))
                                         .c_str(),
                                     BM_ResidualBlock, *l, relu, fused, threads)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
    }
  }
  // AlexNet's and VGG-16's classifier layers (k, n) and SqueezeNet-sized odd ones.
  const std::pair<int64_t, int64_t> fc_shapes[] = {
      {9216, 4096}, {4096, 4096}, {4096, 1000}, {25088, 4096}, {512, 1000}};
  for (const auto& [k, n] : fc_shapes) {
    for (const char* variant : {"tessera_gemv_f32", "xnnpack_fully_connected_nc_f32",
                                "openblas_sgemv", "openblas_sgemm"}) {
      for (int threads : {1, 2}) {
        benchmark::RegisterBenchmark((std::string("BM_Fc/") + variant + "/1x" + std::to_string(k) +
                                      "x" + std::to_string(n) + "/" + std::to_string(threads))
                                         .c_str(),
                                     BM_Fc, variant, k, n, threads)
            ->Unit(benchmark::kMicrosecond)
            ->MeasureProcessCPUTime()
            ->UseRealTime();
      }
    }
    for (const char* variant : {"tessera_gemv_int8", "onednn_matmul_int8"}) {
      for (int threads : {1, 2}) {
        benchmark::RegisterBenchmark(
            (std::string("BM_FcInt8/") + variant + "/1x" + std::to_string(k) + "x" +
             std::to_string(n) + "/" + std::to_string(threads))
                .c_str(),
            BM_FcInt8, variant, k, n, threads)
            ->Unit(benchmark::kMicrosecond)
            ->MeasureProcessCPUTime()
            ->UseRealTime();
      }
    }
  }
  for (const char* dev : {"cpu", "cpu:0", "reference"}) {
    for (const ConvLayer& l : kLayers) {
      benchmark::RegisterBenchmark((std::string("BM_Layer/") + dev + "/" + l.name).c_str(),
                                   BM_Layer, dev, l)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
    for (const char* m : kModels) {
      if (std::string(dev) != "reference") {
        benchmark::RegisterBenchmark((std::string("BM_RunTimedCost/") + dev + "/" + m).c_str(),
                                     BM_RunTimedCost, dev, m)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
      benchmark::RegisterBenchmark((std::string("BM_Model/") + dev + "/" + m).c_str(), BM_Model,
                                   dev, m)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  return 0;
}
const int kRegistered = register_all();

}  // namespace
}  // namespace tessera

BENCHMARK_MAIN();
