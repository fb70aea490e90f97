// The C API (core/tessera_c.h) over the C++ API.
#include <cstring>

#include "core/tessera.h"
#include "core/tessera_c.h"

struct tessera_model {
  std::shared_ptr<const tessera::Model> model;
};

struct tessera_session {
  std::unique_ptr<tessera::Session> session;
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

}  // namespace

extern "C" {

const char* tessera_last_error(void) {
  return g_last_error.c_str();
}

int tessera_model_load(const char* path, tessera_model** out) {
  if (path == nullptr || out == nullptr) return fail("tessera_model_load: null argument");
  auto m = tessera::Model::load(path);
  if (!m.ok()) return fail(m.status());
  *out = new tessera_model{std::move(m).value()};
  return ok();
}

void tessera_model_free(tessera_model* model) {
  delete model;
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

int tessera_session_create(const tessera_model* model, const char* device, tessera_session** out) {
  if (model == nullptr || device == nullptr || out == nullptr) {
    return fail("tessera_session_create: null argument");
  }
  auto s = tessera::Session::create(model->model, device);
  if (!s.ok()) return fail(s.status());
  *out = new tessera_session{std::move(s).value()};
  return ok();
}

void tessera_session_free(tessera_session* session) {
  delete session;
}

int tessera_session_set_input_f32(tessera_session* session, const char* name, const float* data,
                                  const int64_t* shape, size_t rank) {
  if (session == nullptr || name == nullptr || (data == nullptr) ||
      (shape == nullptr && rank > 0)) {
    return fail("tessera_session_set_input_f32: null argument");
  }
  if (rank > static_cast<size_t>(tessera::kMaxRank)) return fail("rank exceeds the limit");
  tessera::Shape s(std::vector<int64_t>(shape, shape + rank));
  auto t = tessera::Tensor::create(tessera::DType::kF32, s);
  if (!t.ok()) return fail(t.status());
  std::memcpy(t->raw(), data, t->byte_size());
  tessera::Status st = session->session->set_input(name, *t);
  return st.ok() ? ok() : fail(st);
}

int tessera_session_run(tessera_session* session) {
  if (session == nullptr) return fail("tessera_session_run: null session");
  tessera::Status st = session->session->run();
  return st.ok() ? ok() : fail(st);
}

int tessera_session_get_output_f32(tessera_session* session, const char* name, float* data,
                                   size_t capacity, size_t* count, int64_t* shape, size_t max_rank,
                                   size_t* rank) {
  if (session == nullptr || name == nullptr)
    return fail("tessera_session_get_output_f32: null argument");
  auto t = session->session->output(name);
  if (!t.ok()) return fail(t.status());
  if (t->dtype() != tessera::DType::kF32)
    return fail("output '" + std::string(name) + "' is not f32");
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
}

}  // extern "C"
