// The Python module `tessera._tessera` (pybind11): models (from .tsr files or imported from ONNX,
// sized per input), sessions on a device or a plan, runs and streams with NumPy arrays,
// conversion from ONNX, the device list and plans. The package
// `tessera` (python/tessera/__init__.py) re-exports it.
//
// Arrays: inputs are copied into Tessera's aligned, padded buffers (the CPU kernels may read a
// few bytes past an input, which a NumPy array does not promise); outputs are handed to NumPy
// without a copy (the array owns the output tensor). Errors raise tessera.Error (a RuntimeError)
// whose message is the Status' message; bad arguments raise ValueError, a missing model, plan or
// ONNX file FileNotFoundError. The GIL is released while Tessera computes, so other Python threads
// run.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/internal.h"
#include "api/tessera.h"
#include "backends/registry.h"
#include "energy/platform.h"
#include "graph/format/model_file.h"
#include "graph/onnx/onnx_import.h"
#include "scheduler/cost_model.h"
#include "scheduler/plan.h"
#include "scheduler/planners/planner.h"
#include "scheduler/profile.h"
#include "scheduler/profiler.h"
#include "scheduler/simulator.h"

namespace py = pybind11;

namespace tessera::python {
namespace {

PyObject* g_error = nullptr;  // tessera.Error

[[noreturn]] void raise(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      throw py::value_error(s.message());
    default:
      PyErr_SetString(g_error, s.to_string().c_str());
      throw py::error_already_set();
  }
}

template <typename T>
T unwrap(Result<T> r) {
  if (!r.ok()) raise(r.status());
  return std::move(r).value();
}

// For the calls that read a file: a missing file is FileNotFoundError.
template <typename T>
T unwrap_file(Result<T> r, const std::string& path) {
  if (!r.ok() && r.status().code() == StatusCode::kNotFound) {
    PyErr_SetString(PyExc_FileNotFoundError, (path + ": " + r.status().message()).c_str());
    throw py::error_already_set();
  }
  return unwrap(std::move(r));
}

void check(const Status& s) {
  if (!s.ok()) raise(s);
}

py::dtype numpy_dtype(DType d) {
  switch (d) {
    case DType::kF32:
      return py::dtype::of<float>();
    case DType::kF16:
      return py::dtype("float16");
    case DType::kI8:
      return py::dtype::of<int8_t>();
    case DType::kU8:
      return py::dtype::of<uint8_t>();
    case DType::kI32:
      return py::dtype::of<int32_t>();
    case DType::kI64:
      return py::dtype::of<int64_t>();
    case DType::kBool:
      return py::dtype::of<bool>();
  }
  throw py::value_error("unknown dtype");
}

// A copy of `array` as a tensor of `want` (the model input's dtype): the array is converted to
// that dtype as NumPy would (e.g. float64 -> float32), and its shape must match when given.
Tensor to_tensor(const py::handle& obj, const TensorDesc& want) {
  py::array array = py::array::ensure(obj, py::array::c_style | py::array::forcecast);
  if (!array) throw py::value_error("input " + quote_name(want.name) + " is not an array");
  array = py::array::ensure(array.attr("astype")(numpy_dtype(want.dtype)), py::array::c_style);
  std::vector<int64_t> dims(array.shape(), array.shape() + array.ndim());
  Shape shape(dims);
  if (shape != want.shape) {
    throw py::value_error("input " + quote_name(want.name) + " expects shape " +
                          want.shape.to_string() + ", got " + shape.to_string());
  }
  Tensor t = unwrap(Tensor::create(want.dtype, shape));
  std::memcpy(t.raw(), array.data(), t.byte_size());
  return t;
}

// The tensor as a NumPy array that owns it (no copy).
py::array to_array(Tensor t) {
  auto* owned = new Tensor(std::move(t));
  py::capsule owner(owned, [](void* p) { delete static_cast<Tensor*>(p); });
  std::vector<py::ssize_t> shape(owned->shape().dims().begin(), owned->shape().dims().end());
  return py::array(numpy_dtype(owned->dtype()), shape, owned->raw(), owner);
}

std::vector<Tensor> to_inputs(const Model& model, const py::object& inputs) {
  const auto& descs = model.inputs();
  std::vector<Tensor> out;
  if (py::isinstance<py::dict>(inputs)) {
    py::dict d = inputs.cast<py::dict>();
    for (const TensorDesc& desc : descs) {
      if (!d.contains(desc.name)) throw py::value_error("missing input " + quote_name(desc.name));
      out.push_back(to_tensor(d[py::str(desc.name)], desc));
    }
    if (d.size() != descs.size()) {
      for (auto item : d) {
        const std::string name = py::str(item.first);
        bool known = false;
        for (const TensorDesc& desc : descs) known = known || desc.name == name;
        if (!known) throw py::value_error("the model has no input " + quote_name(name));
      }
    }
    return out;
  }
  if (py::isinstance<py::array>(inputs)) {
    if (descs.size() != 1) {
      throw py::value_error("the model has " + std::to_string(descs.size()) +
                            " inputs: pass a list or a dict");
    }
    out.push_back(to_tensor(inputs, descs[0]));
    return out;
  }
  py::sequence seq = inputs.cast<py::sequence>();
  if (seq.size() != descs.size()) {
    throw py::value_error("the model has " + std::to_string(descs.size()) + " inputs, got " +
                          std::to_string(seq.size()));
  }
  for (size_t i = 0; i < descs.size(); ++i) out.push_back(to_tensor(seq[i], descs[i]));
  return out;
}

py::list to_list(std::vector<Tensor> tensors) {
  py::list out;
  for (Tensor& t : tensors) out.append(to_array(std::move(t)));
  return out;
}

py::list describe(const std::vector<TensorDesc>& descs) {
  py::list out;
  for (const TensorDesc& d : descs) {
    out.append(py::make_tuple(d.name, numpy_dtype(d.dtype), py::tuple(py::cast(d.shape.dims()))));
  }
  return out;
}

// A session and the model it keeps alive.
struct PySession {
  std::shared_ptr<const Model> model;
  std::unique_ptr<Session> session;
};

std::unique_ptr<PySession> make_session(std::shared_ptr<const Model> model,
                                        const std::string& device, const py::object& plan,
                                        int queue_capacity) {
  SessionOptions options;
  options.device = device;
  options.queue_capacity = queue_capacity;
  if (!plan.is_none()) {
    if (py::isinstance<Plan>(plan)) {
      options.plan = plan.cast<Plan>();
    } else {
      options.plan_path = py::str(plan);
    }
  }
  auto s = std::make_unique<PySession>();
  s->model = model;
  {
    py::gil_scoped_release release;
    auto created = Session::create(model, options);
    if (!created.ok()) {
      py::gil_scoped_acquire acquire;
      raise(created.status());
    }
    s->session = std::move(created).value();
  }
  return s;
}

// The whole shapes of named inputs from Python: a dict {name: sequence of ints}, the text form
// "images=1x3x640x640;mask=1x1x640x640", or None.
std::map<std::string, std::vector<int64_t>> to_input_shapes(const py::object& shapes) {
  std::map<std::string, std::vector<int64_t>> out;
  if (shapes.is_none()) return out;
  if (py::isinstance<py::str>(shapes)) {
    check(parse_input_shapes(shapes.cast<std::string>(), &out));
    return out;
  }
  if (!py::isinstance<py::dict>(shapes)) {
    throw py::value_error(
        "shapes: expected a dict {input name: shape} or a string 'name=1x3x640x640;...'");
  }
  for (auto item : shapes.cast<py::dict>()) {
    if (!py::isinstance<py::str>(item.first)) {
      throw py::value_error("shapes: a key is not an input name (str): " +
                            std::string(py::repr(item.first)));
    }
    const std::string name = item.first.cast<std::string>();
    if (!py::isinstance<py::sequence>(item.second) || py::isinstance<py::str>(item.second)) {
      throw py::value_error("shapes[" + quote_name(name) + "]: expected a sequence of ints, got " +
                            std::string(py::repr(item.second)));
    }
    std::vector<int64_t> dims;
    for (py::handle d : item.second.cast<py::sequence>()) {
      // Python ints and NumPy integers; a float or a bool is a mistake, not a size.
      if (py::isinstance<py::bool_>(d) || !py::hasattr(d, "__index__")) {
        throw py::value_error("shapes[" + quote_name(name) + "]: dimension " +
                              std::to_string(dims.size()) + " (" + std::string(py::repr(d)) +
                              ") is not an integer");
      }
      dims.push_back(py::cast<int64_t>(d.attr("__index__")()));
    }
    out.emplace(name, std::move(dims));
  }
  return out;
}

// Passes the importer's warnings to Python's warnings machinery (UserWarning).
void warn_all(const std::vector<std::string>& warnings) {
  for (const std::string& w : warnings) {
    if (PyErr_WarnEx(PyExc_UserWarning, w.c_str(), 2) != 0) throw py::error_already_set();
  }
}

std::shared_ptr<Model> import_model(const py::object& source, const py::object& shapes,
                                    int64_t batch) {
  const ImportOptions options = import_options_for_shapes(to_input_shapes(shapes), batch);
  std::vector<std::string> warnings;
  std::shared_ptr<const Model> model;
  if (py::isinstance<py::bytes>(source) || py::isinstance<py::bytearray>(source)) {
    const std::string bytes =
        py::isinstance<py::bytes>(source)
            ? source.cast<std::string>()
            : std::string(PyByteArray_AsString(source.ptr()),
                          static_cast<size_t>(PyByteArray_Size(source.ptr())));
    Result<std::shared_ptr<const Model>> m = [&] {
      py::gil_scoped_release release;
      return Model::import_onnx_from_memory(bytes.data(), bytes.size(), options, &warnings);
    }();
    model = unwrap(std::move(m));
  } else {
    const std::string path = py::str(source);
    Result<std::shared_ptr<const Model>> m = [&] {
      py::gil_scoped_release release;
      return Model::import_onnx(path, options, &warnings);
    }();
    model = unwrap_file(std::move(m), path);
  }
  warn_all(warnings);
  return std::const_pointer_cast<Model>(model);
}

void convert(const std::string& onnx_path, const std::string& tsr_path,
             const py::object& input_shapes, int64_t batch) {
  const ImportOptions options = import_options_for_shapes(to_input_shapes(input_shapes), batch);
  Result<ImportedModel> imported = [&] {
    py::gil_scoped_release release;
    return convert_onnx(onnx_path, options);
  }();
  ImportedModel m = unwrap_file(std::move(imported), onnx_path);
  warn_all(m.warnings);
  ModelMetadata meta;
  meta.producer = std::string("tessera ") + version_string();
  meta.properties["source"] = onnx_path;
  meta.properties["onnx_opset"] = std::to_string(m.opset);
  check(save_model(m.graph, tsr_path, meta));
}

// A model file with its layer graph and hash, as profiles and plans name it.
struct ModelFile {
  std::shared_ptr<const Model> model;
  std::unique_ptr<LayerGraph> lg;
  std::string hash, name;
};

ModelFile open_model_file(const std::string& path) {
  ModelFile f;
  f.model = unwrap_file(Model::load(path), path);
  f.lg = std::make_unique<LayerGraph>(unwrap(LayerGraph::build(model_graph(*f.model))));
  f.hash = unwrap(model_file_hash(path));
  f.name = std::filesystem::path(path).stem().string();
  return f;
}

Profile profile(const std::string& model_path, const std::vector<std::string>& devices, int repeat,
                int warmup, int calibration, const std::string& platform, int split_layers) {
  ModelFile f = open_model_file(model_path);
  Platform p;
  if (platform.empty()) {
    p = Platform::detect();
  } else {
    p = unwrap(Platform::load_file_or_board(platform));
  }
  ProfileOptions options;
  options.devices = devices;
  options.repeat = repeat;
  options.warmup = warmup;
  options.calibration_slices = calibration;
  if (split_layers < 0) throw py::value_error("split_layers must be >= 0");
  options.split_layers = split_layers;
  Result<Profile> out = [&] {
    py::gil_scoped_release release;
    return profile_model(*f.lg, p, options, f.name, f.hash);
  }();
  return unwrap(std::move(out));
}

Plan plan(const std::string& model_path, const Profile& profile, const PlanRequest& request) {
  ModelFile f = open_model_file(model_path);
  if (profile.model_hash != f.hash) {
    throw py::value_error("the profile is of model " + profile.model_hash + ", not of " +
                          model_path + " (" + f.hash + ")");
  }
  CostModel cm = unwrap(CostModel::build(profile, *f.lg));
  Result<PlanOutcome> out = [&] {
    py::gil_scoped_release release;
    return run_planner(cm, *f.lg, request);
  }();
  PlanOutcome o = unwrap(std::move(out));
  o.plan.model_name = f.name;
  o.plan.model_hash = f.hash;
  return o.plan;
}

py::dict simulate(const std::string& model_path, const Plan& plan, const Profile& profile,
                  const SimulationOptions& options) {
  ModelFile f = open_model_file(model_path);
  CostModel cm = unwrap(CostModel::build(profile, *f.lg));
  SimulationResult r = unwrap(simulate_plan(cm, *f.lg, plan, options));
  py::dict d;
  d["frames"] = r.frames;
  d["period_ms"] = r.period_ms;
  d["frames_per_s"] = r.frames_per_s;
  d["makespan_ms"] = r.makespan_ms;
  d["latency_ms"] = py::dict(py::arg("mean") = r.latency_mean_ms, py::arg("p50") = r.latency_p50_ms,
                             py::arg("p90") = r.latency_p90_ms, py::arg("p99") = r.latency_p99_ms,
                             py::arg("max") = r.latency_max_ms);
  d["energy_per_frame_mj"] = r.energy_per_frame_mj;
  py::dict busy;
  for (const SimulatedDevice& dev : r.devices) busy[py::str(dev.device)] = dev.busy_ms;
  d["device_busy_ms"] = busy;
  return d;
}

}  // namespace

PYBIND11_MODULE(_tessera, m) {
  m.doc() = "Tessera: an inference engine for heterogeneous systems";
  static py::exception<std::runtime_error> error(m, "Error", PyExc_RuntimeError);
  g_error = error.ptr();
  m.attr("__version__") = version_string();

  m.def("convert", &convert, py::arg("onnx_path"), py::arg("tsr_path"),
        py::arg("input_shapes") = py::none(), py::arg("batch") = 1,
        "Converts an ONNX model to a .tsr file (what `tessera convert` does). input_shapes "
        "({name: shape} or 'name=1x3x640x640;...') and batch size the symbolic input dimensions "
        "as Model.import_onnx's shapes and batch do.");
  m.def(
      "devices",
      [] {
        std::vector<std::pair<std::string, std::string>> out;
        for (const DeviceListing& d : list_devices()) out.emplace_back(d.name, d.description);
        return out;
      },
      "The devices this machine offers: (name, description) pairs.");

  py::class_<Model, std::shared_ptr<Model>>(m, "Model")
      .def_static(
          "load",
          [](const std::string& path) {
            return std::const_pointer_cast<Model>(unwrap_file(Model::load(path), path));
          },
          py::arg("path"), "Loads and verifies a .tsr file.")
      .def_static("import_onnx", &import_model, py::arg("source"), py::arg("shapes") = py::none(),
                  py::arg("batch") = 1,
                  "Imports an ONNX model (a path, or the bytes of a serialised ModelProto) as "
                  "`tessera convert` converts it, without a .tsr file. shapes sets the symbolic "
                  "input dimensions per input: {'images': (1, 3, 640, 640)} or the tool's "
                  "'images=1x3x640x640;mask=1x1x640x640'; once any is given, every symbolic "
                  "dimension must be set. batch (>= 1) sizes a symbolic dimension 0 when no "
                  "shape is given. Errors (ValueError) name the input and the dimension: an "
                  "unknown input, a wrong rank, a size below 1, a dimension left symbolic. What "
                  "import decided (a defaulted batch) is issued as a UserWarning.")
      .def_property_readonly(
          "inputs", [](const Model& self) { return describe(self.inputs()); },
          "(name, dtype, shape) of each input")
      .def_property_readonly(
          "outputs", [](const Model& self) { return describe(self.outputs()); },
          "(name, dtype, shape) of each output")
      .def_property_readonly("hash", &Model::hash)
      .def("__repr__", [](const Model& self) {
        return "<tessera.Model " + std::to_string(self.inputs().size()) + " inputs, " +
               std::to_string(self.outputs().size()) + " outputs>";
      });

  py::class_<Plan>(m, "Plan")
      .def_static(
          "load", [](const std::string& path) { return unwrap_file(Plan::load(path), path); },
          py::arg("path"))
      .def_static(
          "from_json",
          [](const std::string& text) { return unwrap(Plan::from_json_text(text, "plan")); },
          py::arg("text"))
      .def("to_json", &Plan::to_json_text)
      .def("save", [](const Plan& self, const std::string& path) { check(self.save(path)); })
      .def_property_readonly("notation", &Plan::notation)
      .def_readonly("estimated_latency_ms", &Plan::estimated_latency_ms)
      .def_readonly("estimated_period_ms", &Plan::estimated_period_ms)
      .def("__repr__", [](const Plan& self) { return "<tessera.Plan " + self.notation() + ">"; });

  py::class_<Profile>(m, "Profile")
      .def_static(
          "load", [](const std::string& path) { return unwrap_file(Profile::load(path), path); },
          py::arg("path"))
      .def("save", [](const Profile& self, const std::string& path) { check(self.save(path)); })
      .def("to_json", &Profile::to_json_text)
      .def_property_readonly("devices",
                             [](const Profile& self) {
                               std::vector<std::string> out;
                               for (const DeviceProfile& d : self.devices) out.push_back(d.device);
                               return out;
                             })
      .def_readonly("model_hash", &Profile::model_hash)
      .def("__repr__", [](const Profile& self) {
        return "<tessera.Profile of " + self.model_name + ", " +
               std::to_string(self.devices.size()) + " devices>";
      });

  m.def("profile", &profile, py::arg("model_path"), py::arg("devices") = std::vector<std::string>{},
        py::arg("repeat") = 5, py::arg("warmup") = 1, py::arg("calibration") = 8,
        py::arg("platform") = "", py::arg("split_layers") = 0,
        "Measures every layer of the model on the devices (default: every device of this "
        "machine, or of `platform`, a platform file or shipped board): what `tessera profile` "
        "does. split_layers=N also times pieces of the N most expensive splittable layers "
        "against the whole layer (`--split-layers`).");
  m.def(
      "plan",
      [](const std::string& model_path, const Profile& prof, const std::string& planner,
         const std::string& objective, const std::vector<std::string>& devices,
         const std::vector<std::string>& prefer, int stages) {
        PlanRequest req;
        req.planner = planner;
        req.objective = objective;
        req.devices = devices;
        req.prefer = prefer;
        req.stages = stages;
        return plan(model_path, prof, req);
      },
      py::arg("model_path"), py::arg("profile"), py::arg("planner") = "slice",
      py::arg("objective") = "", py::arg("devices") = std::vector<std::string>{},
      py::arg("prefer") = std::vector<std::string>{}, py::arg("stages") = 0,
      "Plans the model from its profile with a planner (slice, preferred, hca, exhaustive, "
      "pipeline): what `tessera plan` does.");
  m.def(
      "simulate",
      [](const std::string& model_path, const Plan& p, const Profile& prof, int frames,
         int queue_capacity, const std::map<std::string, double>& load) {
        SimulationOptions o;
        o.frames = frames;
        o.warmup = std::min(20, frames / 5);
        o.queue_capacity = queue_capacity;
        o.load = load;
        return simulate(model_path, p, prof, o);
      },
      py::arg("model_path"), py::arg("plan"), py::arg("profile"), py::arg("frames") = 300,
      py::arg("queue_capacity") = 0, py::arg("load") = std::map<std::string, double>{},
      "A discrete-event run of the plan over the profile's cost model: what `tessera simulate` "
      "does. Returns period, frames/s, latency percentiles, energy and device busy times.");

  py::class_<PySession>(m, "Session")
      .def(py::init([](std::shared_ptr<Model> model, const std::string& device,
                       const py::object& plan, int queue_capacity) {
             return make_session(model, device, plan, queue_capacity);
           }),
           py::arg("model"), py::arg("device") = "cpu", py::arg("plan") = py::none(),
           py::arg("queue_capacity") = 0,
           "A session on `device`, or by `plan` (a Plan or a plan JSON path).")
      .def_property_readonly("device", [](const PySession& s) { return s.session->device_name(); })
      .def_property_readonly("plan", [](const PySession& s) { return s.session->plan(); })
      .def(
          "describe", [](const PySession& s) { return s.session->describe(); },
          "What the compiled programs run: each step's kernels, precisions and layout changes.")
      .def(
          "run",
          [](PySession& s, const py::object& inputs) {
            std::vector<Tensor> in = to_inputs(*s.model, inputs);
            Result<std::vector<Tensor>> out = [&] {
              py::gil_scoped_release release;
              return s.session->run(in);
            }();
            return to_list(unwrap(std::move(out)));
          },
          py::arg("inputs"),
          "Runs one frame: inputs as a list (model order), a dict by name, or one array; returns "
          "the outputs as a list of arrays.")
      .def(
          "submit",
          [](PySession& s, const py::object& inputs) {
            std::vector<Tensor> in = to_inputs(*s.model, inputs);
            Result<uint64_t> id = [&] {
              py::gil_scoped_release release;
              return s.session->submit(in);
            }();
            return unwrap(std::move(id));
          },
          py::arg("inputs"), "Queues one frame of a stream; returns its id (0, 1, ...).")
      .def(
          "next",
          [](PySession& s) {
            Result<Frame> frame = [&] {
              py::gil_scoped_release release;
              return s.session->next();
            }();
            Frame f = unwrap(std::move(frame));
            if (!f.status.ok()) {
              raise(Status(f.status.code(),
                           "frame " + std::to_string(f.id) + ": " + f.status.message()));
            }
            return py::make_tuple(f.id, to_list(std::move(f.outputs)));
          },
          "The next frame in submission order: (id, outputs). Raises the frame's own error.")
      .def("close", [](PySession& s) {
        py::gil_scoped_release release;
        s.session->close();
      });
}

}  // namespace tessera::python
