/* A C program on the C API (api/tessera_c.h), run by tests/api/import_onnx_test.cc: it imports
 * an ONNX model whose inputs have symbolic dimensions, sized by the text form of the shapes,
 * runs it once on the reference device with inputs made by a formula the test repeats, and
 * writes the first output's floats, one a line, to OUT. Before that it checks that the import
 * without shapes fails naming a symbolic dimension, and the same shapes as structs give the same
 * input shapes.
 *
 * usage: tessera_c_import MODEL.onnx SHAPES OUT      (SHAPES: "images=1x3x8x8;mask=1x1x8x8")
 * Exits 0 and prints "c import: ok" on success; prints the error and exits 1 otherwise.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/tessera_c.h"

#define MAX_INPUTS 4
#define MAX_RANK 8

static int fail(const char* what) {
  fprintf(stderr, "c import: %s: %s\n", what, tessera_last_error());
  return 1;
}

/* Element k of input i: what import_onnx_test.cc computes its oracle on. */
static float input_value(size_t i, size_t k) {
  return (float)((k * 37 + i * 11) % 101) / 50.0f - 1.0f;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s MODEL.onnx SHAPES OUT\n", argv[0]);
    return 2;
  }
  if (tessera_c_api_version() < 4) {
    fprintf(stderr, "c import: the library's C API %d has no ONNX import\n",
            tessera_c_api_version());
    return 1;
  }
  tessera_model* m = NULL;
  /* Without shapes, a symbolic height is an error that names it. */
  if (tessera_model_import_onnx(argv[1], NULL, &m) == 0) {
    fprintf(stderr, "c import: an import without shapes succeeded\n");
    return 1;
  }
  if (strstr(tessera_last_error(), "dimension 2 is symbolic") == NULL) {
    return fail("the error names no symbolic dimension");
  }
  if (tessera_model_import_onnx(argv[1], argv[2], &m) != 0) return fail("import");

  const size_t inputs = tessera_model_num_inputs(m);
  if (inputs == 0 || inputs > MAX_INPUTS) return fail("input count");
  int64_t dims[MAX_INPUTS][MAX_RANK];
  size_t ranks[MAX_INPUTS];
  tessera_input_shape structs[MAX_INPUTS];
  for (size_t i = 0; i < inputs; ++i) {
    int32_t dtype = -1;
    if (tessera_model_input_desc(m, i, &dtype, dims[i], MAX_RANK, &ranks[i]) != 0) {
      return fail("input desc");
    }
    if (dtype != TESSERA_DTYPE_F32) return fail("input dtype");
    structs[i].name = tessera_model_input_name(m, i);
    structs[i].dims = dims[i];
    structs[i].rank = ranks[i];
  }
  /* The same shapes as structs import to the same input shapes. */
  tessera_model* again = NULL;
  if (tessera_model_import_onnx_shapes(argv[1], structs, inputs, 1, &again) != 0) {
    return fail("import with structs");
  }
  for (size_t i = 0; i < inputs; ++i) {
    int64_t d2[MAX_RANK];
    size_t r2 = 0;
    int32_t dtype = -1;
    if (tessera_model_input_desc(again, i, &dtype, d2, MAX_RANK, &r2) != 0 || r2 != ranks[i] ||
        memcmp(d2, dims[i], r2 * sizeof(int64_t)) != 0) {
      return fail("struct shapes differ from text shapes");
    }
  }
  tessera_model_free(again);

  tessera_session* s = NULL;
  if (tessera_session_create(m, "reference", &s) != 0) return fail("session");
  for (size_t i = 0; i < inputs; ++i) {
    size_t n = 1;
    for (size_t d = 0; d < ranks[i]; ++d) n *= (size_t)dims[i][d];
    float* x = malloc(n * sizeof(float));
    if (x == NULL) return 1;
    for (size_t k = 0; k < n; ++k) x[k] = input_value(i, k);
    const int rc = tessera_session_set_input_f32(s, structs[i].name, x, dims[i], ranks[i]);
    free(x);
    if (rc != 0) return fail("set input");
  }
  if (tessera_session_run(s) != 0) return fail("run");
  const char* out_name = tessera_model_output_name(m, 0);
  size_t count = 0, rank = 0;
  int64_t out_dims[MAX_RANK];
  if (tessera_session_get_output_f32(s, out_name, NULL, 0, &count, out_dims, MAX_RANK, &rank)) {
    return fail("output size");
  }
  float* y = malloc((count ? count : 1) * sizeof(float));
  if (y == NULL) return 1;
  if (tessera_session_get_output_f32(s, out_name, y, count, &count, out_dims, MAX_RANK, &rank)) {
    return fail("output");
  }
  FILE* f = fopen(argv[3], "w");
  if (f == NULL) return fail("open OUT");
  for (size_t k = 0; k < count; ++k) fprintf(f, "%.9g\n", (double)y[k]);
  fclose(f);
  free(y);
  tessera_session_free(s);
  tessera_model_free(m);
  printf("c import: ok\n");
  return 0;
}
