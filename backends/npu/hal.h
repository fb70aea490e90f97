/* The Tessera NPU HAL: the one C ABI between Tessera and an NPU vendor library.
 *
 * A driver is a shared library exporting one symbol,
 *
 *     const tnpu_driver_api* tessera_npu_get_driver(uint32_t requested_api_version);
 *
 * which returns a table of function pointers (or NULL when it cannot serve that API version).
 * Tessera finds the library by path or through the TESSERA_NPU_DRIVER environment variable and
 * loads it with dlopen. Nothing but plain C crosses this boundary: no C++ types, no exceptions,
 * no allocation ownership transfers (the caller owns what it passes in, the driver owns its
 * handles and the strings it returns).
 *
 * The life of a subgraph on an NPU:
 *
 *   open_device(i)                    one NPU (a driver may expose several)
 *   get_device_info / get_op_support  what it can do: ops with attribute limits, precisions,
 *                                     memory capacity (Tessera turns these into capabilities)
 *   prepare(graph, options)           compile a self-contained subgraph description (ops by ONNX
 *                                     name, shapes, attributes, weights) into a prepared handle;
 *                                     the driver refuses what it cannot run, with a message
 *   get_io_desc(prepared, ...)        the dtype/layout/quantisation each input and output takes
 *                                     at the boundary (the caller converts to and from it)
 *   execute(prepared, in, out)        run on host buffers; the driver converts to its on-chip
 *                                     layout and back
 *   release(prepared); close_device
 *
 * Versioning (the ggml-backend `api_version` + `get_proc_address` habit):
 *   - api_version = (major << 16) | minor. A driver serving major M returns a table whose
 *     major is M; minor versions only append slots at the end of the table, so a newer driver
 *     works with an older Tessera and vice versa. `struct_size` tells how many slots exist.
 *   - Slots marked (optional) may be NULL; use TNPU_HAS_SLOT before calling them. Every other
 *     slot is mandatory: a loader refuses a table with a NULL mandatory slot.
 *   - New functionality goes behind get_proc_address(name) rather than widening this table.
 *   - 1.1 appended execute_profiled (per-node times inside a run). A 1.0 table is shorter, and
 *     TNPU_HAS_SLOT(api, execute_profiled) is false on it.
 *   - Structs passed in or out start with `struct_size`, set by whoever allocates them, so that
 *     both sides can tell which fields the other knows.
 *
 * Errors: every fallible call returns a tnpu_status. The message of the last failure is kept per
 * handle: driver_last_error() for calls without a handle (open_device), device_last_error(dev)
 * for calls on a device (prepare, queries), prepared_last_error(p) for execute. Messages name
 * the node, op, attribute or tensor at fault and stay valid until the next call on that handle.
 *
 * Handles: close_device(NULL) and release(NULL) do nothing. A device must outlive its prepared
 * handles.
 *
 * Threads: a device handle and its prepared handles may be used by one thread at a time;
 * different devices may be used concurrently.
 */
#ifndef TESSERA_NPU_HAL_H_
#define TESSERA_NPU_HAL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- versions ------------------------------------------------------------------------------ */

#define TNPU_API_VERSION_MAJOR 1u
#define TNPU_API_VERSION_MINOR 1u
#define TNPU_API_VERSION ((TNPU_API_VERSION_MAJOR << 16) | TNPU_API_VERSION_MINOR)
#define TNPU_VERSION_MAJOR(v) ((uint32_t)(v) >> 16)
#define TNPU_VERSION_MINOR(v) ((uint32_t)(v)&0xffffu)

/* The symbol every driver exports (declared at the end of this header). */
#define TNPU_ENTRY_SYMBOL "tessera_npu_get_driver"

/* ---- status codes -------------------------------------------------------------------------- */

typedef enum tnpu_status {
  TNPU_OK = 0,
  TNPU_ERR_INVALID_ARGUMENT = 1, /* malformed description, bad buffer size, null pointer */
  TNPU_ERR_UNSUPPORTED = 2,      /* valid, but this NPU cannot do it (op, attribute, precision) */
  TNPU_ERR_OUT_OF_MEMORY = 3,    /* the subgraph does not fit the NPU's memory cap */
  TNPU_ERR_NOT_FOUND = 4,        /* no such device, tensor index, option */
  TNPU_ERR_VERSION = 5,          /* API version mismatch */
  TNPU_ERR_DEVICE = 6,           /* the hardware (or its emulation) failed */
  TNPU_ERR_INTERNAL = 7          /* a bug in the driver */
} tnpu_status;

/* ---- element types, precisions, layouts ------------------------------------------------------ */

typedef enum tnpu_dtype {
  TNPU_DTYPE_F32 = 0,
  TNPU_DTYPE_F16 = 1, /* IEEE half, stored as uint16_t */
  TNPU_DTYPE_I8 = 2,  /* quantised: real = scale * (q - zero_point) */
  TNPU_DTYPE_U8 = 3,
  TNPU_DTYPE_I32 = 4,
  TNPU_DTYPE_I64 = 5
} tnpu_dtype;

/* Compute precisions, as bits of a mask. */
#define TNPU_PRECISION_F32 (1u << 0)
#define TNPU_PRECISION_F16 (1u << 1)
#define TNPU_PRECISION_INT8 (1u << 2) /* int8 activations, int8 per-channel weights, int32 bias */

/* Memory orders of boundary tensors. Row-major in every case; the dims of a tensor description
 * are always given in NCHW (ONNX) order. */
typedef enum tnpu_layout {
  TNPU_LAYOUT_NCHW = 0, /* as the description: dims in order */
  TNPU_LAYOUT_NHWC = 1  /* 4-D tensors with channels innermost; other ranks as NCHW */
} tnpu_layout;

#define TNPU_MAX_RANK 8
#define TNPU_NO_TENSOR UINT32_MAX /* an omitted optional node input */
#define TNPU_NAME_SIZE 64

/* ---- opaque handles -------------------------------------------------------------------------- */

typedef struct tnpu_device_s* tnpu_device;     /* one opened NPU */
typedef struct tnpu_prepared_s* tnpu_prepared; /* one prepared (compiled) subgraph */

/* ---- driver and device information ----------------------------------------------------------- */

typedef struct tnpu_driver_info {
  uint32_t struct_size;
  char name[TNPU_NAME_SIZE];   /* e.g. "tessera-reference-npu" */
  char vendor[TNPU_NAME_SIZE]; /* e.g. "Tessera" */
  uint32_t driver_version;     /* the vendor's own version number */
  uint32_t device_count;       /* devices open_device accepts: 0 .. device_count-1 */
} tnpu_driver_info;

typedef struct tnpu_device_info {
  uint32_t struct_size;
  char name[TNPU_NAME_SIZE]; /* e.g. "reference NPU (fp16/int8, 2 cores)" */
  uint32_t precisions;       /* TNPU_PRECISION_* mask */
  uint32_t default_precision;
  /* The most bytes one prepared subgraph may hold: its weights plus its activations, both in
   * the precision it runs in. prepare() refuses a subgraph over this cap. */
  uint64_t memory_capacity;
  uint32_t num_cores;    /* cores the device computes on */
  uint32_t max_rank;     /* highest tensor rank accepted */
  uint32_t max_batch;    /* highest leading dimension accepted (0: unlimited) */
  uint32_t max_channels; /* highest channel count of any tensor (0: unlimited) */
} tnpu_device_info;

/* What the device supports of one op type. Limits of 0 mean "no limit"; a node that exceeds a
 * limit is refused. Finer rules (padding modes, broadcasting...) are checked by prepare() and,
 * per node, by check_node(). */
typedef struct tnpu_op_support {
  uint32_t struct_size;
  char op_type[TNPU_NAME_SIZE]; /* ONNX op_type: "Conv", "Gemm", "MaxPool"... */
  uint32_t precisions;          /* TNPU_PRECISION_* the op runs in */
  uint32_t max_kernel;          /* largest kernel side (conv, pooling) */
  uint32_t max_stride;
  uint32_t max_dilation;
  uint32_t max_inputs; /* e.g. Concat */
  /* Fused activations the op accepts through its "activation" attribute, as bits of
   * TNPU_ACTIVATION_*. */
  uint32_t fused_activations;
} tnpu_op_support;

#define TNPU_ACTIVATION_RELU (1u << 0)
#define TNPU_ACTIVATION_CLIP (1u << 1) /* includes relu6 */
#define TNPU_ACTIVATION_LEAKY_RELU (1u << 2)
#define TNPU_ACTIVATION_SIGMOID (1u << 3)
#define TNPU_ACTIVATION_HARD_SIGMOID (1u << 4)
#define TNPU_ACTIVATION_HARD_SWISH (1u << 5)
#define TNPU_ACTIVATION_TANH (1u << 6)

/* ---- the subgraph description ---------------------------------------------------------------- */

/* One tensor. Activations have data == NULL; constants (weights, biases, shapes) carry their
 * values, row-major in `dtype`, valid for the duration of the prepare() call only (the driver
 * copies or converts what it keeps). */
typedef struct tnpu_tensor_desc {
  const char* name;
  tnpu_dtype dtype;
  uint32_t rank;
  int64_t dims[TNPU_MAX_RANK]; /* NCHW order for 4-D activations */
  const void* data;            /* constant values, or NULL */
  uint64_t data_bytes;         /* size of data in bytes (0 for activations) */
} tnpu_tensor_desc;

typedef enum tnpu_attr_type {
  TNPU_ATTR_INT = 0,
  TNPU_ATTR_FLOAT = 1,
  TNPU_ATTR_STRING = 2,
  TNPU_ATTR_INTS = 3,
  TNPU_ATTR_FLOATS = 4
} tnpu_attr_type;

/* One ONNX attribute. Fused activations use the Tessera extension attributes "activation"
 * (string: relu | clip | leaky_relu | sigmoid | hard_sigmoid | hard_swish | tanh),
 * "activation_alpha" and "activation_beta" (floats: Clip min/max, LeakyRelu alpha...). */
typedef struct tnpu_attribute {
  const char* name;
  tnpu_attr_type type;
  int64_t i;           /* TNPU_ATTR_INT */
  float f;             /* TNPU_ATTR_FLOAT */
  const char* s;       /* TNPU_ATTR_STRING, NUL-terminated */
  const int64_t* ints; /* TNPU_ATTR_INTS, `count` of them */
  const float* floats; /* TNPU_ATTR_FLOATS, `count` of them */
  uint32_t count;
} tnpu_attribute;

/* One op. Inputs and outputs are indices into tnpu_graph.tensors. */
typedef struct tnpu_node {
  const char* name;
  const char* op_type; /* ONNX op_type */
  const uint32_t* inputs;
  uint32_t num_inputs;
  const uint32_t* outputs;
  uint32_t num_outputs;
  const tnpu_attribute* attrs;
  uint32_t num_attrs;
} tnpu_node;

/* A self-contained subgraph: nodes in topological order, its input tensors (activations the
 * caller provides at execute) and output tensors (activations it reads back). */
typedef struct tnpu_graph {
  uint32_t struct_size;
  const tnpu_tensor_desc* tensors;
  uint32_t num_tensors;
  const tnpu_node* nodes;
  uint32_t num_nodes;
  const uint32_t* inputs;
  uint32_t num_inputs;
  const uint32_t* outputs;
  uint32_t num_outputs;
} tnpu_graph;

/* ---- preparing ------------------------------------------------------------------------------- */

/* Sample inputs for int8 calibration: `num_samples` sets of graph inputs, each a row-major f32
 * NCHW host buffer: sample s, input i is inputs[s * graph.num_inputs + i]. */
typedef struct tnpu_calibration {
  uint32_t num_samples;
  const float* const* inputs;
} tnpu_calibration;

typedef struct tnpu_prepare_options {
  uint32_t struct_size;
  uint32_t precision;    /* one TNPU_PRECISION_* bit; 0: the device default */
  uint64_t memory_limit; /* bytes; 0: the device's capacity. May only lower the cap. */
  uint32_t num_cores;    /* cores to run on; 0: all the device has */
  const tnpu_calibration* calibration; /* required for TNPU_PRECISION_INT8, else ignored */
} tnpu_prepare_options;

/* How one boundary tensor of a prepared subgraph is passed to execute(). */
typedef struct tnpu_io_desc {
  uint32_t struct_size;
  tnpu_dtype dtype; /* F32, F16, or I8/U8 quantised with scale/zero_point */
  tnpu_layout layout;
  uint32_t rank;
  int64_t dims[TNPU_MAX_RANK]; /* NCHW order, as in the description */
  float scale;                 /* quantised dtypes only */
  int32_t zero_point;
  uint64_t bytes; /* exact buffer size execute() expects */
} tnpu_io_desc;

typedef struct tnpu_prepared_info {
  uint32_t struct_size;
  uint32_t precision; /* the TNPU_PRECISION_* bit it runs in */
  uint32_t num_inputs;
  uint32_t num_outputs;
  uint64_t weight_bytes;     /* device memory held by weights */
  uint64_t activation_bytes; /* device memory held by activations (peak working set) */
} tnpu_prepared_info;

/* A host buffer: `bytes` must equal the tensor's tnpu_io_desc.bytes. */
typedef struct tnpu_buffer {
  void* data;
  uint64_t bytes;
} tnpu_buffer;

/* Timings of the last execute() (optional slot get_perf_counters). */
typedef struct tnpu_perf_counters {
  uint32_t struct_size;
  uint64_t total_ns;
  uint64_t input_conversion_ns; /* host layout -> on-chip layout */
  uint64_t compute_ns;
  uint64_t output_conversion_ns; /* on-chip layout -> host layout */
  uint64_t bytes_in;             /* boundary bytes read */
  uint64_t bytes_out;            /* boundary bytes written */
  /* Per-node compute time: the driver fills node_ns[0 .. min(num_node_ns, num_nodes)-1] when
   * the caller points node_ns at an array. */
  uint64_t* node_ns;
  uint32_t num_node_ns;
} tnpu_perf_counters;

/* Per-node timings of one execute (optional slot execute_profiled, HAL 1.1). The caller sets
 * struct_size, node_ns and node_capacity; the driver writes the output fields that lie inside the
 * caller's struct_size (a caller built against an older header gets the prefix it knows) and
 * never touches the bytes after it. */
typedef struct tnpu_execute_profile {
  uint32_t struct_size;
  /* in: an array of node_capacity entries the driver fills with each node's compute time, in
   * the node order of the description (node i of the tnpu_graph is entry i). */
  uint64_t* node_ns;
  uint32_t node_capacity;
  /* out: the number of nodes timed, always the subgraph's node count (also when node_capacity is
   * too small, so that the caller can retry with a bigger array). */
  uint32_t num_nodes;
  /* out: the parts of this execute, as in tnpu_perf_counters. The boundary conversions (host
   * layout -> on-chip layout and back) are charged to no node. */
  uint64_t input_conversion_ns;
  uint64_t compute_ns;
  uint64_t output_conversion_ns;
  uint64_t total_ns;
} tnpu_execute_profile;

/* The smallest tnpu_execute_profile a caller may pass: struct_size up to num_nodes. */
#define TNPU_EXECUTE_PROFILE_MIN_SIZE (offsetof(tnpu_execute_profile, num_nodes) + sizeof(uint32_t))

/* ---- the driver table ------------------------------------------------------------------------ */

typedef struct tnpu_driver_api {
  uint32_t api_version; /* TNPU_API_VERSION the driver implements */
  uint32_t struct_size; /* sizeof(tnpu_driver_api) as the driver was built */

  /* Driver-wide. */
  tnpu_status (*get_driver_info)(tnpu_driver_info* out);
  const char* (*driver_last_error)(void);

  /* Devices. */
  tnpu_status (*open_device)(uint32_t index, tnpu_device* out);
  void (*close_device)(tnpu_device device);
  tnpu_status (*get_device_info)(tnpu_device device, tnpu_device_info* out);
  const char* (*device_last_error)(tnpu_device device);

  /* Capabilities: op types 0 .. get_op_count()-1. */
  uint32_t (*get_op_count)(tnpu_device device);
  tnpu_status (*get_op_support)(tnpu_device device, uint32_t index, tnpu_op_support* out);

  /* Subgraphs. */
  tnpu_status (*prepare)(tnpu_device device, const tnpu_graph* graph,
                         const tnpu_prepare_options* options, tnpu_prepared* out);
  tnpu_status (*get_prepared_info)(tnpu_prepared prepared, tnpu_prepared_info* out);
  tnpu_status (*get_io_desc)(tnpu_prepared prepared, uint32_t is_output, uint32_t index,
                             tnpu_io_desc* out);
  tnpu_status (*execute)(tnpu_prepared prepared, const tnpu_buffer* inputs, uint32_t num_inputs,
                         const tnpu_buffer* outputs, uint32_t num_outputs);
  void (*release)(tnpu_prepared prepared);
  const char* (*prepared_last_error)(tnpu_prepared prepared);

  /* (optional) Whether node `node_index` of `graph` can run, with every attribute and shape
   * checked exactly as prepare() would. TNPU_OK if so; otherwise the status and the reason in
   * device_last_error(device). */
  tnpu_status (*check_node)(tnpu_device device, const tnpu_graph* graph, uint32_t node_index);

  /* (optional) Sets a device option by name, e.g. "memory_capacity_mb" or "num_cores";
   * TNPU_ERR_NOT_FOUND for an unknown key. */
  tnpu_status (*set_device_option)(tnpu_device device, const char* key, const char* value);

  /* (optional) Timings of the last execute() on `prepared`. */
  tnpu_status (*get_perf_counters)(tnpu_prepared prepared, tnpu_perf_counters* out);

  /* (optional) Extension lookup: a driver-specific function by name, or NULL. */
  void* (*get_proc_address)(const char* name);

  /* ---- HAL 1.1 ---- */

  /* (optional) execute() that also times every node of the subgraph inside the run (caches and
   * on-chip memory as the previous nodes left them), for profilers that price layers where they
   * will run. Same buffers and errors as execute(); TNPU_ERR_INVALID_ARGUMENT when `profile` is
   * NULL, its struct_size is below TNPU_EXECUTE_PROFILE_MIN_SIZE, node_ns is NULL or
   * node_capacity is below the node count (num_nodes is still written then). */
  tnpu_status (*execute_profiled)(tnpu_prepared prepared, const tnpu_buffer* inputs,
                                  uint32_t num_inputs, const tnpu_buffer* outputs,
                                  uint32_t num_outputs, tnpu_execute_profile* profile);
} tnpu_driver_api;

/* True when `api` (a table of `api->struct_size` bytes) has the slot `field`. */
#define TNPU_HAS_SLOT(api, field)                                                   \
  ((api)->struct_size >= offsetof(tnpu_driver_api, field) + sizeof((api)->field) && \
   (api)->field != NULL)

/* The size of a version-1.0 table with every mandatory slot. */
#define TNPU_API_V1_MIN_SIZE \
  (offsetof(tnpu_driver_api, prepared_last_error) + sizeof(void (*)(void)))

/* The entry point a driver exports (name TNPU_ENTRY_SYMBOL) and its type. It returns NULL when
 * the driver does not implement the requested major version; the table stays valid until the
 * library is unloaded. */
typedef const tnpu_driver_api* (*tnpu_get_driver_fn)(uint32_t requested_api_version);
const tnpu_driver_api* tessera_npu_get_driver(uint32_t requested_api_version);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TESSERA_NPU_HAL_H_ */
