/* Tessera's C API: a minimal, stable surface over the C++ API for other languages.
 *
 * Every function returns 0 on success and non-zero on failure; tessera_last_error() then
 * describes the failure of the last call on this thread. Handles are opaque.
 *
 *   tessera_model* m; tessera_session* s;
 *   if (tessera_model_load("m.tsr", &m) || tessera_session_create(m, "reference", &s)) {
 *     fprintf(stderr, "%s\n", tessera_last_error());
 *   }
 */
#ifndef TESSERA_C_H_
#define TESSERA_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TESSERA_C_API_VERSION 1

typedef struct tessera_model tessera_model;
typedef struct tessera_session tessera_session;

/* The message of the last failure on this thread ("" if none). Valid until the next call. */
const char* tessera_last_error(void);

int tessera_model_load(const char* path, tessera_model** out);
void tessera_model_free(tessera_model* model);
size_t tessera_model_num_inputs(const tessera_model* model);
size_t tessera_model_num_outputs(const tessera_model* model);
/* Name of input/output i, or NULL if out of range. Owned by the model. */
const char* tessera_model_input_name(const tessera_model* model, size_t i);
const char* tessera_model_output_name(const tessera_model* model, size_t i);

/* Creates a session on a device ("reference", "cpu", ...). The model may be freed afterwards. */
int tessera_session_create(const tessera_model* model, const char* device, tessera_session** out);
void tessera_session_free(tessera_session* session);

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
