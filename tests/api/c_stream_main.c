/* A C program on the C API (api/tessera_c.h), run by tests/api/session_test.cc: it creates a
 * session that runs a model by a plan, streams frames through it, and checks that every frame
 * comes out once, in order, with the outputs of a sequential run of the same input.
 *
 * usage: tessera_c_stream MODEL.tsr PLAN.json FRAMES
 * Exits 0 and prints "c stream: N frames ok" on success; prints the error and exits 1 otherwise.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/tessera_c.h"

#define MAX_ELEMS 4096
#define MAX_FRAMES 64

static int fail(const char* what) {
  fprintf(stderr, "c stream: %s: %s\n", what, tessera_last_error());
  return 1;
}

/* Input of frame f: a ramp that differs per frame. */
static void fill_input(float* x, size_t n, unsigned f) {
  for (size_t i = 0; i < n; ++i) x[i] = (float)sin(0.1 * (double)i + (double)f);
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s MODEL.tsr PLAN.json FRAMES\n", argv[0]);
    return 2;
  }
  const int frames = atoi(argv[3]);
  if (frames < 1 || frames > MAX_FRAMES) return 2;
  if (tessera_c_api_version() != TESSERA_C_API_VERSION) {
    fprintf(stderr, "c stream: library C API %d, headers %d\n", tessera_c_api_version(),
            TESSERA_C_API_VERSION);
    return 1;
  }
  tessera_model* model = NULL;
  if (tessera_model_load(argv[1], &model)) return fail("load");
  tessera_session* seq = NULL;
  tessera_session* stream = NULL;
  if (tessera_session_create(model, "reference", &seq)) return fail("device session");
  if (tessera_session_create_with_plan(model, argv[2], 2, &stream)) return fail("plan session");
  const char* in_name = tessera_model_input_name(model, 0);
  const char* out_name = tessera_model_output_name(model, 0);
  const int64_t shape[2] = {4, 32};
  static float x[MAX_ELEMS];
  static float expected[MAX_FRAMES][MAX_ELEMS];
  static float got[MAX_ELEMS];
  size_t n_out = 0;

  /* The sequential outputs, frame by frame. */
  for (int f = 0; f < frames; ++f) {
    fill_input(x, 4 * 32, (unsigned)f);
    if (tessera_session_set_input(seq, in_name, TESSERA_DTYPE_F32, x, shape, 2)) {
      return fail("set input");
    }
    if (tessera_session_run(seq)) return fail("run");
    size_t bytes = 0, rank = 0;
    int64_t dims[8];
    int32_t dtype;
    if (tessera_session_get_output(seq, out_name, &dtype, expected[f], sizeof(expected[f]), &bytes,
                                   dims, 8, &rank)) {
      return fail("get output");
    }
    if (dtype != TESSERA_DTYPE_F32) return fail("output dtype");
    n_out = bytes / sizeof(float);
  }

  /* The stream: two frames in flight ahead of the one taken out. */
  int submitted = 0;
  for (int received = 0; received < frames; ++received) {
    while (submitted < frames && submitted - received < 3) {
      fill_input(x, 4 * 32, (unsigned)submitted);
      uint64_t id = 0;
      if (tessera_session_set_input(stream, in_name, TESSERA_DTYPE_F32, x, shape, 2)) {
        return fail("set input");
      }
      if (tessera_session_submit(stream, &id)) return fail("submit");
      if (id != (uint64_t)submitted) {
        fprintf(stderr, "c stream: frame id %llu, expected %d\n", (unsigned long long)id,
                submitted);
        return 1;
      }
      ++submitted;
    }
    uint64_t id = 0;
    if (tessera_session_next(stream, &id)) return fail("next");
    if (id != (uint64_t)received) {
      fprintf(stderr, "c stream: got frame %llu, expected %d\n", (unsigned long long)id, received);
      return 1;
    }
    size_t bytes = 0;
    if (tessera_session_get_output(stream, out_name, NULL, got, sizeof(got), &bytes, NULL, 0,
                                   NULL)) {
      return fail("stream output");
    }
    if (bytes != n_out * sizeof(float) || memcmp(got, expected[received], bytes) != 0) {
      fprintf(stderr, "c stream: frame %d differs from the sequential run\n", received);
      return 1;
    }
  }
  uint64_t id = 0;
  if (tessera_session_next(stream, &id) == 0) {
    fprintf(stderr, "c stream: next() with nothing pending succeeded\n");
    return 1;
  }
  tessera_session_close(stream);
  tessera_session_free(stream);
  tessera_session_free(seq);
  tessera_model_free(model);
  printf("c stream: %d frames ok (tessera %s)\n", frames, tessera_version());
  return 0;
}
