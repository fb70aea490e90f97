#include "scheduler/calibrate.h"

#include <cmath>
#include <random>
#include <string>

namespace tessera {

Result<CalibrationTable> calibrate(const Graph& g, Device& device,
                                   const std::vector<std::vector<Tensor>>& samples,
                                   CalibrationMethod method) {
  if (samples.empty()) return invalid_argument("calibration needs at least one input sample");
  const std::vector<ValueId>& gin = g.inputs();
  for (size_t s = 0; s < samples.size(); ++s) {
    const std::string where = "calibration sample " + std::to_string(s);
    if (samples[s].size() != gin.size()) {
      return invalid_argument(where + ": " + std::to_string(samples[s].size()) +
                              " tensors, the model takes " + std::to_string(gin.size()) +
                              " inputs");
    }
    for (size_t i = 0; i < gin.size(); ++i) {
      const Value& v = g.value(gin[i]);
      const Tensor& t = samples[s][i];
      if (!t.defined() || t.dtype() != v.info.dtype || t.shape() != v.info.shape) {
        return invalid_argument(where + ", input " + quote_name(v.name) + ": expects " +
                                dtype_name(v.info.dtype) + v.info.shape.to_string() + ", got " +
                                t.describe());
      }
      if (t.dtype() != DType::kF32) continue;
      const float* x = t.data<float>();
      for (int64_t k = 0; k < t.numel(); ++k) {
        if (!std::isfinite(x[k])) {
          return invalid_argument(where + ", input " + quote_name(v.name) + ": element " +
                                  std::to_string(k) + " is " + std::to_string(x[k]) +
                                  " (calibration inputs must be finite)");
        }
      }
    }
  }
  // The same graph with every f32 activation as an output, compiled in f32: the program keeps
  // each of them (no fusion hides a graph output).
  Graph cg = g;
  std::vector<ValueId> watched;
  for (ValueId v = 0; v < cg.num_values(); ++v) {
    const Value& val = cg.value(v);
    if (val.is_constant || !val.has_info || val.info.dtype != DType::kF32) continue;
    if (val.producer == kNoNode) continue;  // graph inputs: taken from the samples
    watched.push_back(v);
  }
  cg.outputs() = watched;
  std::vector<NodeId> layers(static_cast<size_t>(cg.num_nodes()));
  for (size_t i = 0; i < layers.size(); ++i) layers[i] = static_cast<NodeId>(i);
  CompileOptions options;
  options.precision = Precision::kF32;
  Result<std::unique_ptr<Program>> program = device.compile(cg, layers, options);
  if (!program.ok()) return program.status().with_context("calibration on " + device.name());
  const std::vector<ValueId>& outs = (*program)->output_values();
  std::vector<Histogram> hist(static_cast<size_t>(cg.num_values()));
  std::vector<Tensor> y;
  for (size_t s = 0; s < samples.size(); ++s) {
    for (size_t i = 0; i < gin.size(); ++i) {
      const Tensor& t = samples[s][i];
      if (t.dtype() == DType::kF32) {
        hist[static_cast<size_t>(gin[i])].add(t.data<float>(), static_cast<size_t>(t.numel()));
      }
    }
    y.assign(outs.size(), Tensor());
    Status st = (*program)->run(samples[s], y);
    if (!st.ok()) return st.with_context("calibration sample " + std::to_string(s));
    for (size_t o = 0; o < outs.size(); ++o) {
      hist[static_cast<size_t>(outs[o])].add(y[o].data<float>(), static_cast<size_t>(y[o].numel()));
    }
  }
  CalibrationTable table;
  table.method = calibration_method_name(method);
  table.samples = static_cast<int>(samples.size());
  for (ValueId v = 0; v < g.num_values(); ++v) {
    const Histogram& h = hist[static_cast<size_t>(v)];
    if (h.empty() || h.total() == 0) continue;
    const bool output = g.is_graph_output(v);
    table.ranges[g.value(v).name] = choose_range(h, output ? CalibrationMethod::kMinMax : method);
  }
  return table;
}

Result<std::vector<std::vector<Tensor>>> perturbed_samples(const std::vector<Tensor>& base,
                                                           int count, float sigma, uint64_t seed) {
  if (count < 1) return invalid_argument("perturbed samples: count must be >= 1");
  if (!(sigma >= 0) || !std::isfinite(sigma)) {
    return invalid_argument("perturbed samples: sigma must be finite and >= 0");
  }
  std::vector<std::vector<Tensor>> out;
  for (int i = 0; i < count; ++i) {
    std::mt19937_64 rng(seed + static_cast<uint64_t>(i));
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<Tensor> sample;
    for (const Tensor& t : base) {
      ASSIGN_OR_RETURN(Tensor c, t.clone());
      if (c.dtype() == DType::kF32 && c.numel() > 0) {
        float* x = c.data<float>();
        double sum = 0, sq = 0;
        for (int64_t k = 0; k < c.numel(); ++k) sum += x[k];
        const double mean = sum / static_cast<double>(c.numel());
        for (int64_t k = 0; k < c.numel(); ++k) sq += (x[k] - mean) * (x[k] - mean);
        const auto sd = static_cast<float>(std::sqrt(sq / static_cast<double>(c.numel())));
        for (int64_t k = 0; k < c.numel(); ++k) x[k] += sigma * sd * normal(rng);
      }
      sample.push_back(std::move(c));
    }
    out.push_back(std::move(sample));
  }
  return out;
}

}  // namespace tessera
