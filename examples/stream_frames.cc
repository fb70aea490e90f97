// Streams frames through a model with Tessera's C++ API and checks them against a sequential run.
//
//   stream_frames MODEL.tsr [PLAN.json] [FRAMES]
//
// Loads the model, makes a device session on `cpu` (the sequential outputs) and a session that
// runs the model by the plan (or on `cpu` when no plan is given), submits FRAMES frames of a
// deterministic input with two in flight, and checks that every frame comes out once, in order,
// with the sequential outputs (relative L2 <= 1e-4). Prints each frame's top-1 class.
// Build: examples/CMakeLists.txt (find_package(Tessera)) or examples/Makefile (pkg-config).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>
#include <vector>

#include "api/tessera.h"

namespace {

int fail(const std::string& what, const tessera::Status& s) {
  std::fprintf(stderr, "stream_frames: %s: %s\n", what.c_str(), s.to_string().c_str());
  return 1;
}

// Frame f's input: a smooth pattern that differs per frame.
std::vector<tessera::Tensor> make_inputs(const tessera::Model& model, int f) {
  std::vector<tessera::Tensor> inputs;
  for (const tessera::TensorDesc& d : model.inputs()) {
    std::vector<float> x(static_cast<size_t>(d.shape.numel()));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.01f * static_cast<float>(i) + f);
    inputs.push_back(tessera::Tensor::from_floats(d.shape, x));
  }
  return inputs;
}

double relative_l2(const tessera::Tensor& got, const tessera::Tensor& want) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double d = got.data<float>()[i] - want.data<float>()[i];
    num += d * d;
    den += static_cast<double>(want.data<float>()[i]) * want.data<float>()[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

int64_t top1(const tessera::Tensor& t) {
  int64_t best = 0;
  for (int64_t i = 1; i < t.numel(); ++i) {
    if (t.data<float>()[i] > t.data<float>()[best]) best = i;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: %s MODEL.tsr [PLAN.json] [FRAMES]\n", argv[0]);
    return 2;
  }
  const std::string plan_path = argc >= 3 ? argv[2] : "";
  const int frames = argc >= 4 ? std::atoi(argv[3]) : 8;
  if (frames < 1) return 2;
  std::printf("tessera %s\n", tessera::version_string());

  auto model = tessera::Model::load(argv[1]);
  if (!model.ok()) return fail("load", model.status());
  for (const tessera::TensorDesc& d : (*model)->inputs()) {
    if (d.dtype != tessera::DType::kF32) {
      return fail("input", tessera::invalid_argument("this example feeds float32 inputs"));
    }
  }
  auto sequential = tessera::Session::create(*model, "cpu");
  if (!sequential.ok()) return fail("cpu session", sequential.status());
  tessera::SessionOptions options;
  options.device = "cpu";
  options.plan_path = plan_path;
  auto stream = tessera::Session::create(*model, options);
  if (!stream.ok()) return fail("plan session", stream.status());
  std::printf("streaming %d frames by %s\n", frames, (*stream)->device_name().c_str());

  std::vector<std::vector<tessera::Tensor>> inputs;
  for (int f = 0; f < frames; ++f) inputs.push_back(make_inputs(**model, f));
  int submitted = 0;
  for (int received = 0; received < frames; ++received) {
    while (submitted < frames && submitted - received < 2) {
      auto id = (*stream)->submit(inputs[static_cast<size_t>(submitted)]);
      if (!id.ok()) return fail("submit", id.status());
      ++submitted;
    }
    auto frame = (*stream)->next();
    if (!frame.ok()) return fail("next", frame.status());
    if (!frame->status.ok()) return fail("frame " + std::to_string(frame->id), frame->status);
    if (frame->id != static_cast<uint64_t>(received)) {
      return fail("order",
                  tessera::internal_error("frame " + std::to_string(frame->id) +
                                          " came out in place of " + std::to_string(received)));
    }
    auto want = (*sequential)->run(inputs[static_cast<size_t>(received)]);
    if (!want.ok()) return fail("sequential run", want.status());
    const double err = relative_l2(frame->outputs[0], (*want)[0]);
    std::printf("frame %d: top-1 %lld, relative L2 to the sequential run %.2e\n", received,
                static_cast<long long>(top1(frame->outputs[0])), err);
    if (!(err <= 1e-4)) {
      return fail("outputs", tessera::internal_error("frame differs from the sequential run"));
    }
  }
  std::printf("stream_frames: %d frames ok\n", frames);
  return 0;
}
