// The C API (api/tessera_c.h) over the C++ API. No exception crosses the C boundary: the body of
// every entry point that can throw (argument checks included: building a message allocates) runs
// inside guarded(), which turns any exception into an error code and tessera_last_error().
#include <cstring>
#include <exception>

#include <map>
#include <string>
#include <vector>

#include "api/tessera.h"
#include "api/tessera_c.h"

struct tessera_model {
  std::shared_ptr<const tessera::Model> model;
  std::vector<std::string> warnings;  // of ONNX import
};

struct tessera_session {
  std::unique_ptr<tessera::Session> session;
  std::vector<tessera::Tensor> inputs;   // by model input; undefined until set
  std::vector<tessera::Tensor> outputs;  // of the last run or next frame
};

namespace {

thread_local std::string g_last_error;

int fail(const tessera::Status& s) {
  g_last_error = s.to_string();
  return 1;
}

int fail(const std::string& msg) {
  g_last_error = msg;
  return 1;
}

int ok() {
  g_last_error.clear();
  return 0;
}

// Runs `body` (returning 0 or a fail()), turning any exception into an error naming `what`.
template <typename F>
int guarded(const char* what, F&& body) noexcept {
  try {
    return body();
  } catch (...) {
    try {
      return fail(tessera::status_from_current_exception(what));
    } catch (...) {
      // No memory even for the message: a short string fits the string's own storage.
      g_last_error.assign("out of memory");
      return 1;
    }
  }
}

bool valid_dtype(int d) {
  return d >= 0 && d < tessera::kNumDTypes;
}

tessera_session* make_session(std::unique_ptr<tessera::Session> s) {
  auto* h = new tessera_session{std::move(s), {}, {}};
  h->inputs.resize(h->session->model().inputs().size());
  return h;
}

int set_input(tessera_session* session, const char* name, tessera::DType dtype, const void* data,
              const int64_t* shape, size_t rank) {
  if (rank > static_cast<size_t>(tessera::kMaxRank)) return fail("rank exceeds the limit");
  tessera::Shape s(std::vector<int64_t>(shape, shape + rank));
  const auto& descs = session->session->model().inputs();
  size_t index = descs.size();
  for (size_t i = 0; i < descs.size(); ++i) {
    if (descs[i].name == name) index = i;
  }
  if (index == descs.size()) return fail("the model has no input '" + std::string(name) + "'");
  const tessera::TensorDesc& d = descs[index];
  if (dtype != d.dtype || !(s == d.shape)) {
    return fail("input " + tessera::quote_name(d.name) + " expects " +
                tessera::dtype_name(d.dtype) + d.shape.to_string() + ", got " +
                tessera::dtype_name(dtype) + s.to_string());
  }
  auto t = tessera::Tensor::create(dtype, s);
  if (!t.ok()) return fail(t.status());
  if (t->byte_size() > 0) std::memcpy(t->raw(), data, t->byte_size());
  session->inputs[index] = std::move(*t);
  return ok();
}

int check_inputs_set(const tessera_session* session) {
  for (size_t i = 0; i < session->inputs.size(); ++i) {
    if (!session->inputs[i].defined()) {
      return fail("input " + tessera::quote_name(session->session->model().inputs()[i].name) +
                  " was not set");
    }
  }
  return 0;
}

const tessera::Tensor* find_output(const tessera_session* session, const char* name) {
  const auto& descs = session->session->model().outputs();
  for (size_t i = 0; i < descs.size() && i < session->outputs.size(); ++i) {
    if (descs[i].name == name) return &session->outputs[i];
  }
  return nullptr;
}

// The model of an ONNX import (from the file `path`, or the bytes `data`), or its error.
int import_onnx(const char* where, const char* path, const void* data, size_t size,
                const tessera::ImportOptions& options, tessera_model** out) {
  std::vector<std::string> warnings;
  auto m = path != nullptr
               ? tessera::Model::import_onnx(path, options, &warnings)
               : tessera::Model::import_onnx_from_memory(data, size, options, &warnings);
  if (!m.ok()) return fail(m.status().with_context(where));
  *out = new tessera_model{std::move(m).value(), std::move(warnings)};
  return ok();
}

// Options from the text form of the shapes (NULL: none).
int parse_shapes(const char* where, const char* shapes, tessera::ImportOptions* options) {
  std::map<std::string, std::vector<int64_t>> parsed;
  if (shapes != nullptr) {
    const tessera::Status st = tessera::parse_input_shapes(shapes, &parsed);
    if (!st.ok()) return fail(st.with_context(where));
  }
  *options = tessera::import_options_for_shapes(std::move(parsed));
  return 0;
}

}  // namespace

extern "C" {

const char* tessera_last_error(void) {
  return g_last_error.c_str();
}

const char* tessera_version(void) {
  return tessera::version_string();
}

int tessera_c_api_version(void) {
  return TESSERA_C_API_VERSION;
}

int tessera_model_load(const char* path, tessera_model** out) {
  return guarded("tessera_model_load", [&] {
    if (path == nullptr || out == nullptr) return fail("tessera_model_load: null argument");
    auto m = tessera::Model::load(path);
    if (!m.ok()) return fail(m.status());
    *out = new tessera_model{std::move(m).value(), {}};
    return ok();
  });
}

void tessera_model_free(tessera_model* model) {
  delete model;
}

int tessera_model_import_onnx(const char* path, const char* shapes, tessera_model** out) {
  constexpr const char* kWhere = "tessera_model_import_onnx";
  return guarded(kWhere, [&] {
    if (path == nullptr || out == nullptr) return fail(std::string(kWhere) + ": null argument");
    tessera::ImportOptions options;
    if (parse_shapes(kWhere, shapes, &options) != 0) return 1;
    return import_onnx(kWhere, path, nullptr, 0, options, out);
  });
}

int tessera_model_import_onnx_memory(const void* data, size_t size, const char* shapes,
                                     tessera_model** out) {
  constexpr const char* kWhere = "tessera_model_import_onnx_memory";
  return guarded(kWhere, [&] {
    if (data == nullptr || out == nullptr) return fail(std::string(kWhere) + ": null argument");
    tessera::ImportOptions options;
    if (parse_shapes(kWhere, shapes, &options) != 0) return 1;
    return import_onnx(kWhere, nullptr, data, size, options, out);
  });
}

int tessera_model_import_onnx_shapes(const char* path, const tessera_input_shape* shapes,
                                     size_t num_shapes, int64_t batch, tessera_model** out) {
  constexpr const char* kWhere = "tessera_model_import_onnx_shapes";
  return guarded(kWhere, [&] {
    if (path == nullptr || out == nullptr || (shapes == nullptr && num_shapes > 0)) {
      return fail(std::string(kWhere) + ": null argument");
    }
    std::map<std::string, std::vector<int64_t>> given;
    for (size_t i = 0; i < num_shapes; ++i) {
      const tessera_input_shape& s = shapes[i];
      const std::string entry = std::string(kWhere) + ": shapes[" + std::to_string(i) + "]";
      if (s.name == nullptr) return fail(entry + " has no name");
      if (s.dims == nullptr && s.rank > 0)
        return fail(entry + " (" + tessera::quote_name(s.name) + ") has no dims");
      if (s.rank > static_cast<size_t>(tessera::kMaxRank)) {
        return fail(entry + " (" + tessera::quote_name(s.name) + ") has rank " +
                    std::to_string(s.rank) + ", over the limit " +
                    std::to_string(tessera::kMaxRank));
      }
      if (!given.emplace(s.name, std::vector<int64_t>(s.dims, s.dims + s.rank)).second) {
        return fail(entry + ": a shape for input " + tessera::quote_name(s.name) +
                    " was already given");
      }
    }
    // The importer checks every size (each dim, the batch) and names what is wrong.
    return import_onnx(kWhere, path, nullptr, 0,
                       tessera::import_options_for_shapes(std::move(given), batch), out);
  });
}

size_t tessera_model_num_warnings(const tessera_model* model) {
  return model ? model->warnings.size() : 0;
}

const char* tessera_model_warning(const tessera_model* model, size_t i) {
  if (model == nullptr || i >= model->warnings.size()) return nullptr;
  return model->warnings[i].c_str();
}

size_t tessera_model_num_inputs(const tessera_model* model) {
  return model ? model->model->inputs().size() : 0;
}

size_t tessera_model_num_outputs(const tessera_model* model) {
  return model ? model->model->outputs().size() : 0;
}

const char* tessera_model_input_name(const tessera_model* model, size_t i) {
  if (model == nullptr || i >= model->model->inputs().size()) return nullptr;
  return model->model->inputs()[i].name.c_str();
}

const char* tessera_model_output_name(const tessera_model* model, size_t i) {
  if (model == nullptr || i >= model->model->outputs().size()) return nullptr;
  return model->model->outputs()[i].name.c_str();
}

namespace {

int describe(const char* where, const tessera_model* model, bool input, size_t i, int32_t* dtype,
             int64_t* shape, size_t max_rank, size_t* rank) {
  return guarded(where, [&] {
    if (model == nullptr || dtype == nullptr || rank == nullptr || (shape == nullptr && max_rank)) {
      return fail(std::string(where) + ": null argument");
    }
    const auto& descs = input ? model->model->inputs() : model->model->outputs();
    if (i >= descs.size()) {
      return fail(std::string(where) + ": index " + std::to_string(i) +
                  " out of range (the model has " + std::to_string(descs.size()) +
                  (input ? " inputs)" : " outputs)"));
    }
    const tessera::TensorDesc& d = descs[i];
    const size_t r = static_cast<size_t>(d.shape.rank());
    if (r > max_rank) {
      return fail(std::string(where) + ": " + tessera::quote_name(d.name) + " has rank " +
                  std::to_string(d.shape.rank()) + ", more than max_rank " +
                  std::to_string(max_rank));
    }
    *dtype = static_cast<int32_t>(d.dtype);
    *rank = r;
    for (size_t k = 0; k < r; ++k) shape[k] = d.shape.dims()[k];
    return ok();
  });
}

}  // namespace

int tessera_model_input_desc(const tessera_model* model, size_t i, int32_t* dtype, int64_t* shape,
                             size_t max_rank, size_t* rank) {
  return describe("tessera_model_input_desc", model, true, i, dtype, shape, max_rank, rank);
}

int tessera_model_output_desc(const tessera_model* model, size_t i, int32_t* dtype, int64_t* shape,
                              size_t max_rank, size_t* rank) {
  return describe("tessera_model_output_desc", model, false, i, dtype, shape, max_rank, rank);
}

int tessera_session_create(const tessera_model* model, const char* device, tessera_session** out) {
  return guarded("tessera_session_create", [&] {
    if (model == nullptr || device == nullptr || out == nullptr) {
      return fail("tessera_session_create: null argument");
    }
    auto s = tessera::Session::create(model->model, device);
    if (!s.ok()) return fail(s.status());
    *out = make_session(std::move(s).value());
    return ok();
  });
}

int tessera_session_create_with_plan(const tessera_model* model, const char* plan_path,
                                     int queue_capacity, tessera_session** out) {
  return guarded("tessera_session_create_with_plan", [&] {
    if (model == nullptr || plan_path == nullptr || out == nullptr) {
      return fail("tessera_session_create_with_plan: null argument");
    }
    if (queue_capacity < 0) {
      return fail("tessera_session_create_with_plan: negative queue capacity");
    }
    tessera::SessionOptions options;
    options.plan_path = plan_path;
    options.queue_capacity = queue_capacity;
    auto s = tessera::Session::create(model->model, options);
    if (!s.ok()) return fail(s.status());
    *out = make_session(std::move(s).value());
    return ok();
  });
}

void tessera_session_free(tessera_session* session) {
  delete session;
}

int tessera_session_set_input(tessera_session* session, const char* name, int32_t dtype,
                              const void* data, const int64_t* shape, size_t rank) {
  return guarded("tessera_session_set_input", [&] {
    if (session == nullptr || name == nullptr || data == nullptr ||
        (shape == nullptr && rank > 0)) {
      return fail("tessera_session_set_input: null argument");
    }
    if (!valid_dtype(dtype)) {
      return fail("tessera_session_set_input: unknown dtype " + std::to_string(dtype));
    }
    return set_input(session, name, static_cast<tessera::DType>(dtype), data, shape, rank);
  });
}

int tessera_session_set_input_f32(tessera_session* session, const char* name, const float* data,
                                  const int64_t* shape, size_t rank) {
  return guarded("tessera_session_set_input_f32", [&] {
    if (session == nullptr || name == nullptr || data == nullptr ||
        (shape == nullptr && rank > 0)) {
      return fail("tessera_session_set_input_f32: null argument");
    }
    return set_input(session, name, tessera::DType::kF32, data, shape, rank);
  });
}

int tessera_session_run(tessera_session* session) {
  return guarded("tessera_session_run", [&] {
    if (session == nullptr) return fail("tessera_session_run: null session");
    if (check_inputs_set(session) != 0) return 1;
    auto out = session->session->run(session->inputs);
    if (!out.ok()) return fail(out.status());
    session->outputs = std::move(*out);
    return ok();
  });
}

int tessera_session_submit(tessera_session* session, uint64_t* frame) {
  return guarded("tessera_session_submit", [&] {
    if (session == nullptr || frame == nullptr)
      return fail("tessera_session_submit: null argument");
    if (check_inputs_set(session) != 0) return 1;
    auto id = session->session->submit(session->inputs);
    if (!id.ok()) return fail(id.status());
    *frame = *id;
    return ok();
  });
}

int tessera_session_next(tessera_session* session, uint64_t* frame) {
  return guarded("tessera_session_next", [&] {
    if (session == nullptr || frame == nullptr) return fail("tessera_session_next: null argument");
    auto f = session->session->next();
    if (!f.ok()) return fail(f.status());
    *frame = f->id;
    session->outputs.clear();
    if (!f->status.ok()) return fail(f->status);
    session->outputs = std::move(f->outputs);
    return ok();
  });
}

void tessera_session_close(tessera_session* session) {
  // void: an exception here (a thread that cannot be joined) is left in tessera_last_error().
  (void)guarded("tessera_session_close", [&] {
    if (session != nullptr) session->session->close();
    return 0;
  });
}

int tessera_session_get_output(tessera_session* session, const char* name, int32_t* dtype,
                               void* data, size_t capacity, size_t* bytes, int64_t* shape,
                               size_t max_rank, size_t* rank) {
  return guarded("tessera_session_get_output", [&] {
    if (session == nullptr || name == nullptr) {
      return fail("tessera_session_get_output: null argument");
    }
    const tessera::Tensor* t = find_output(session, name);
    if (t == nullptr || !t->defined()) {
      return fail("no output '" + std::string(name) + "' (run or take a frame with next first)");
    }
    if (dtype) *dtype = static_cast<int32_t>(t->dtype());
    if (bytes) *bytes = t->byte_size();
    if (rank) *rank = static_cast<size_t>(t->rank());
    if (shape) {
      for (size_t i = 0; i < max_rank && i < static_cast<size_t>(t->rank()); ++i) {
        shape[i] = t->dim(static_cast<int>(i));
      }
    }
    if (data != nullptr) {
      if (capacity < t->byte_size()) {
        return fail("output '" + std::string(name) + "' has " + std::to_string(t->byte_size()) +
                    " bytes, the buffer holds " + std::to_string(capacity));
      }
      if (t->byte_size() > 0) std::memcpy(data, t->raw(), t->byte_size());
    }
    return ok();
  });
}

int tessera_session_get_output_f32(tessera_session* session, const char* name, float* data,
                                   size_t capacity, size_t* count, int64_t* shape, size_t max_rank,
                                   size_t* rank) {
  return guarded("tessera_session_get_output_f32", [&] {
    if (session == nullptr || name == nullptr) {
      return fail("tessera_session_get_output_f32: null argument");
    }
    const tessera::Tensor* t = find_output(session, name);
    if (t == nullptr || !t->defined()) {
      return fail("no output '" + std::string(name) + "' (run or take a frame with next first)");
    }
    if (t->dtype() != tessera::DType::kF32) {
      return fail("output '" + std::string(name) + "' is not f32");
    }
    const size_t n = static_cast<size_t>(t->numel());
    if (count) *count = n;
    if (rank) *rank = static_cast<size_t>(t->rank());
    if (shape) {
      for (size_t i = 0; i < max_rank && i < static_cast<size_t>(t->rank()); ++i) {
        shape[i] = t->dim(static_cast<int>(i));
      }
    }
    if (data != nullptr) {
      if (capacity < n) {
        return fail("output '" + std::string(name) + "' has " + std::to_string(n) +
                    " elements, buffer holds " + std::to_string(capacity));
      }
      std::memcpy(data, t->raw(), n * sizeof(float));
    }
    return ok();
  });
}

}  // extern "C"
