/* Imports an ONNX model with Tessera's C API, its symbolic input dimensions sized per input, and
 * checks a run on a device against the reference device.
 *
 *   import_onnx_c MODEL.onnx "images=1x3x640x640;mask=1x1x640x640" [DEVICE]
 *
 * Prints the import warnings and the input shapes, fills every float32 input with a
 * deterministic ramp, runs it on DEVICE (default cpu) and on `reference`, and requires the first
 * output to agree (relative L2 <= 1e-4). Exits 1 with Tessera's message (which names the input
 * and the dimension) when the shapes do not fit the model. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/tessera_c.h"

#define MAX_RANK 8

static int fail(const char* what) {
  fprintf(stderr, "import_onnx_c: %s: %s\n", what, tessera_last_error());
  return 1;
}

/* Runs the model on `device` with the ramp inputs; the first output goes to *out (malloc'd). */
static int run(const tessera_model* m, const char* device, float** out, size_t* count) {
  tessera_session* s = NULL;
  if (tessera_session_create(m, device, &s) != 0) return fail(device);
  for (size_t i = 0; i < tessera_model_num_inputs(m); ++i) {
    int32_t dtype = -1;
    int64_t dims[MAX_RANK];
    size_t rank = 0, n = 1;
    if (tessera_model_input_desc(m, i, &dtype, dims, MAX_RANK, &rank) != 0) return fail("desc");
    if (dtype != TESSERA_DTYPE_F32) {
      fprintf(stderr, "import_onnx_c: input %zu is not float32\n", i);
      return 1;
    }
    for (size_t d = 0; d < rank; ++d) n *= (size_t)dims[d];
    float* x = malloc((n ? n : 1) * sizeof(float));
    if (x == NULL) return 1;
    for (size_t k = 0; k < n; ++k) x[k] = (float)sin(0.01 * (double)k + (double)i);
    const int rc = tessera_session_set_input_f32(s, tessera_model_input_name(m, i), x, dims, rank);
    free(x);
    if (rc != 0) return fail("set input");
  }
  if (tessera_session_run(s) != 0) return fail("run");
  const char* name = tessera_model_output_name(m, 0);
  int64_t dims[MAX_RANK];
  size_t rank = 0;
  if (tessera_session_get_output_f32(s, name, NULL, 0, count, dims, MAX_RANK, &rank) != 0) {
    return fail("output");
  }
  *out = malloc((*count ? *count : 1) * sizeof(float));
  if (*out == NULL) return 1;
  if (tessera_session_get_output_f32(s, name, *out, *count, count, dims, MAX_RANK, &rank) != 0) {
    return fail("output");
  }
  tessera_session_free(s);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: %s MODEL.onnx SHAPES [DEVICE]\n", argv[0]);
    return 2;
  }
  const char* device = argc == 4 ? argv[3] : "cpu";
  tessera_model* m = NULL;
  if (tessera_model_import_onnx(argv[1], argv[2], &m) != 0) return fail("import");
  for (size_t i = 0; i < tessera_model_num_warnings(m); ++i) {
    printf("warning: %s\n", tessera_model_warning(m, i));
  }
  for (size_t i = 0; i < tessera_model_num_inputs(m); ++i) {
    int32_t dtype = -1;
    int64_t dims[MAX_RANK];
    size_t rank = 0;
    if (tessera_model_input_desc(m, i, &dtype, dims, MAX_RANK, &rank) != 0) return fail("desc");
    printf("input %s:", tessera_model_input_name(m, i));
    for (size_t d = 0; d < rank; ++d) printf("%s%lld", d ? "x" : " ", (long long)dims[d]);
    printf("\n");
  }
  float *got = NULL, *want = NULL;
  size_t n_got = 0, n_want = 0;
  if (run(m, device, &got, &n_got) != 0 || run(m, "reference", &want, &n_want) != 0) return 1;
  if (n_got != n_want) {
    fprintf(stderr, "import_onnx_c: %zu outputs on %s, %zu on reference\n", n_got, device, n_want);
    return 1;
  }
  double err = 0, ref = 0;
  for (size_t k = 0; k < n_got; ++k) {
    err += ((double)got[k] - want[k]) * ((double)got[k] - want[k]);
    ref += (double)want[k] * want[k];
  }
  const double rel = sqrt(err / (ref > 0 ? ref : 1));
  printf("import_onnx_c: output %s (%zu values) on %s vs reference: relative L2 %.2e\n",
         tessera_model_output_name(m, 0), n_got, device, rel);
  free(got);
  free(want);
  tessera_model_free(m);
  return rel <= 1e-4 ? 0 : 1;
}
