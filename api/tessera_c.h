/* Tessera's C API: a small, stable surface over the C++ API for other languages.
 *
 * Every function returns 0 on success and non-zero on failure; tessera_last_error() then
 * describes the failure of the last call on this thread. Handles are opaque. A session handle is
 * used by one thread at a time.
 *
 *   tessera_model* m; tessera_session* s;
 *   if (tessera_model_load("m.tsr", &m) || tessera_session_create(m, "reference", &s)) {
 *     fprintf(stderr, "%s\n", tessera_last_error());
 *   }
 *
 * An ONNX model loads directly, sized per input:
 *   tessera_model_import_onnx("detector.onnx", "images=1x3x640x640", &m);
 *
 * Streaming by a plan: set the inputs, tessera_session_submit() (repeat: each submit takes the
 * inputs as they are then), and tessera_session_next() makes the next frame's outputs the ones
 * tessera_session_get_output() reads.
 */
#ifndef TESSERA_C_H_
#define TESSERA_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2: plan sessions, streaming, tensors of any dtype, run-time version queries.
 * 3: input and output descriptions (dtype and shape) of a model.
 * 4: ONNX models imported directly, their symbolic input dimensions sized per input. */
#define TESSERA_C_API_VERSION 4

/* Element types (the values of Tessera's DType). Functions take and return them as int32_t, so
 * that a value from another language that is none of these is an error, not undefined
 * behaviour. */
typedef enum tessera_dtype {
  TESSERA_DTYPE_F32 = 0,
  TESSERA_DTYPE_F16 = 1,
  TESSERA_DTYPE_I8 = 2,
  TESSERA_DTYPE_U8 = 3,
  TESSERA_DTYPE_I32 = 4,
  TESSERA_DTYPE_I64 = 5,
  TESSERA_DTYPE_BOOL = 6
} tessera_dtype;

/* The library's version ("0.1.0") and C API version, at run time. */
const char* tessera_version(void);
int tessera_c_api_version(void);

typedef struct tessera_model tessera_model;
typedef struct tessera_session tessera_session;

/* The message of the last failure on this thread ("" if none). Valid until the next call. */
const char* tessera_last_error(void);

int tessera_model_load(const char* path, tessera_model** out);
void tessera_model_free(tessera_model* model);

/* Imports an ONNX model as `tessera convert` converts it (import, shape inference, the graph
 * passes), without a .tsr file. `shapes` sets the symbolic input dimensions as the tool's
 * --shape does, in one string: "images=1x3x640x640;mask=1x1x640x640" (entries separated by ';',
 * each NAME=DIMxDIMx...; NULL or "" gives none). Once any shape is given, every symbolic
 * dimension of every input must be set by one; with none, a symbolic dimension 0 (the batch) is
 * 1 (a warning, see tessera_model_warning) and any other is an error. Errors name the input and
 * the dimension in tessera_last_error(): an input the model lacks, a shape of the wrong rank or
 * disagreeing with a fixed dimension, a dimension that is not an integer >= 1, a dimension left
 * symbolic. The model has no hash, so a plan's model hash is not checked against it (its layer
 * count still is). Imports share no state: any thread may call them. */
int tessera_model_import_onnx(const char* path, const char* shapes, tessera_model** out);

/* The same from `size` bytes of a serialised ONNX ModelProto (copied; `data` may go after). */
int tessera_model_import_onnx_memory(const void* data, size_t size, const char* shapes,
                                     tessera_model** out);

/* One input's whole shape, for tessera_model_import_onnx_shapes(). This layout is fixed: a later
 * C API version adds functions, never fields. */
typedef struct tessera_input_shape {
  const char* name;    /* graph input name */
  const int64_t* dims; /* `rank` dims, each >= 1 */
  size_t rank;
} tessera_input_shape;

/* tessera_model_import_onnx() with the shapes as `num_shapes` structs (`shapes` may be NULL when
 * there are none) and `batch`, the size of a symbolic dimension 0 that no shape sets when none
 * is given (the tool's --batch; >= 1). */
int tessera_model_import_onnx_shapes(const char* path, const tessera_input_shape* shapes,
                                     size_t num_shapes, int64_t batch, tessera_model** out);

/* What import decided for the caller, one line each (a symbolic batch set to the default,
 * graph inputs with initializers taken as constants): their count, and line i (NULL if out of
 * range; owned by the model). A model loaded from a .tsr file has none. */
size_t tessera_model_num_warnings(const tessera_model* model);
const char* tessera_model_warning(const tessera_model* model, size_t i);
size_t tessera_model_num_inputs(const tessera_model* model);
size_t tessera_model_num_outputs(const tessera_model* model);
/* Name of input/output i, or NULL if out of range. Owned by the model. */
const char* tessera_model_input_name(const tessera_model* model, size_t i);
const char* tessera_model_output_name(const tessera_model* model, size_t i);

/* The dtype (a tessera_dtype value) and shape of input/output i: `*rank` receives its rank and
 * up to `max_rank` dims are written to `shape`. Fails when i is out of range or the rank exceeds
 * max_rank. */
int tessera_model_input_desc(const tessera_model* model, size_t i, int32_t* dtype, int64_t* shape,
                             size_t max_rank, size_t* rank);
int tessera_model_output_desc(const tessera_model* model, size_t i, int32_t* dtype, int64_t* shape,
                              size_t max_rank, size_t* rank);

/* Creates a session on a device ("reference", "cpu", ...). The model may be freed afterwards. */
int tessera_session_create(const tessera_model* model, const char* device, tessera_session** out);
void tessera_session_free(tessera_session* session);

/* Creates a session that runs the model by the plan in `plan_path` (from `tessera plan`);
 * `queue_capacity` 0 keeps the plan's. */
int tessera_session_create_with_plan(const tessera_model* model, const char* plan_path,
                                     int queue_capacity, tessera_session** out);

/* Copies a tensor of `dtype` (a tessera_dtype value) and the given shape (`data` holds numel *
 * element size bytes) into the named input. */
int tessera_session_set_input(tessera_session* session, const char* name, int32_t dtype,
                              const void* data, const int64_t* shape, size_t rank);
/* Reads the named output of the last run or next frame: its dtype, rank and dims (up to
 * max_rank); `*bytes` receives its size and, if `data` is not NULL, up to `capacity` bytes are
 * copied (an error when the output is larger). */
int tessera_session_get_output(tessera_session* session, const char* name, int32_t* dtype,
                               void* data, size_t capacity, size_t* bytes, int64_t* shape,
                               size_t max_rank, size_t* rank);

/* Streaming: queues one frame of the inputs as set now (waiting while the pipeline is full) and
 * sets `*frame` to its id (0, 1, ...). */
int tessera_session_submit(tessera_session* session, uint64_t* frame);
/* Waits for the next frame in submission order and sets `*frame` to its id; its outputs become
 * readable with tessera_session_get_output(). Fails with that frame's own error when the frame
 * failed (`*frame` is still set), and when nothing is pending. */
int tessera_session_next(tessera_session* session, uint64_t* frame);
/* Cancels the frames in flight; those already submitted still come out of next(). */
void tessera_session_close(tessera_session* session);

/* Copies a float32 tensor of the given shape into the named input. */
int tessera_session_set_input_f32(tessera_session* session, const char* name, const float* data,
                                  const int64_t* shape, size_t rank);
int tessera_session_run(tessera_session* session);
/* Reads the named float32 output: its rank and dims (up to max_rank) and, if `data` is not NULL,
 * copies up to `capacity` floats. `*count` receives the element count. */
int tessera_session_get_output_f32(tessera_session* session, const char* name, float* data,
                                   size_t capacity, size_t* count, int64_t* shape, size_t max_rank,
                                   size_t* rank);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_C_H_ */
