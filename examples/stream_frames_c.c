/* Streams frames through a model with Tessera's C API and checks them against a sequential run.
 *
 *   stream_frames_c MODEL.tsr [PLAN.json] [FRAMES]
 *
 * The C counterpart of stream_frames.cc: a device session on `cpu` gives the sequential outputs,
 * a second session runs the model by the plan (or on `cpu` without one); FRAMES frames of a
 * deterministic input go through with two in flight, and every frame must come out once, in
 * order, with the sequential outputs (relative L2 <= 1e-4). The model's first input and output
 * must be float32. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/tessera_c.h"

#define MAX_RANK 8

static int fail(const char* what) {
  fprintf(stderr, "stream_frames_c: %s: %s\n", what, tessera_last_error());
  return 1;
}

static size_t numel(const int64_t* shape, size_t rank) {
  size_t n = 1;
  for (size_t i = 0; i < rank; ++i) n *= (size_t)shape[i];
  return n;
}

static void fill(float* x, size_t n, int f) {
  for (size_t i = 0; i < n; ++i) x[i] = sinf(0.01f * (float)i + (float)f);
}

/* Reads output 0 of `s` into `out` (capacity floats). */
static int read_output(tessera_session* s, const char* name, float* out, size_t capacity) {
  int32_t dtype = 0;
  size_t bytes = 0, rank = 0;
  int64_t dims[MAX_RANK];
  return tessera_session_get_output(s, name, &dtype, out, capacity * sizeof(float), &bytes, dims,
                                    MAX_RANK, &rank);
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    fprintf(stderr, "usage: %s MODEL.tsr [PLAN.json] [FRAMES]\n", argv[0]);
    return 2;
  }
  const char* plan = argc >= 3 ? argv[2] : NULL;
  const int frames = argc >= 4 ? atoi(argv[3]) : 8;
  if (frames < 1 || frames > 1000) return 2;
  if (tessera_c_api_version() < TESSERA_C_API_VERSION) {
    fprintf(stderr, "stream_frames_c: library C API %d is older than the headers' %d\n",
            tessera_c_api_version(), TESSERA_C_API_VERSION);
    return 1;
  }
  printf("tessera %s (C API %d)\n", tessera_version(), tessera_c_api_version());

  tessera_model* model = NULL;
  if (tessera_model_load(argv[1], &model)) return fail("load");
  int32_t in_dtype = 0, out_dtype = 0;
  int64_t in_shape[MAX_RANK], out_shape[MAX_RANK];
  size_t in_rank = 0, out_rank = 0;
  if (tessera_model_input_desc(model, 0, &in_dtype, in_shape, MAX_RANK, &in_rank) ||
      tessera_model_output_desc(model, 0, &out_dtype, out_shape, MAX_RANK, &out_rank)) {
    return fail("describe");
  }
  if (in_dtype != TESSERA_DTYPE_F32 || out_dtype != TESSERA_DTYPE_F32) {
    fprintf(stderr, "stream_frames_c: this example needs a float32 input and output\n");
    return 1;
  }
  const char* in_name = tessera_model_input_name(model, 0);
  const char* out_name = tessera_model_output_name(model, 0);
  const size_t n_in = numel(in_shape, in_rank), n_out = numel(out_shape, out_rank);

  tessera_session* seq = NULL;
  tessera_session* stream = NULL;
  if (tessera_session_create(model, "cpu", &seq)) return fail("cpu session");
  if (plan != NULL ? tessera_session_create_with_plan(model, plan, 0, &stream)
                   : tessera_session_create(model, "cpu", &stream)) {
    return fail("plan session");
  }
  float* x = malloc(n_in * sizeof(float));
  float* want = malloc(n_out * sizeof(float));
  float* got = malloc(n_out * sizeof(float));
  if (x == NULL || want == NULL || got == NULL) return 1;

  int submitted = 0;
  for (int received = 0; received < frames; ++received) {
    while (submitted < frames && submitted - received < 2) {
      uint64_t id = 0;
      fill(x, n_in, submitted);
      if (tessera_session_set_input(stream, in_name, TESSERA_DTYPE_F32, x, in_shape, in_rank) ||
          tessera_session_submit(stream, &id)) {
        return fail("submit");
      }
      ++submitted;
    }
    uint64_t id = 0;
    if (tessera_session_next(stream, &id)) return fail("next");
    if (id != (uint64_t)received) {
      fprintf(stderr, "stream_frames_c: frame %llu came out in place of %d\n",
              (unsigned long long)id, received);
      return 1;
    }
    if (read_output(stream, out_name, got, n_out)) return fail("stream output");
    fill(x, n_in, received);
    if (tessera_session_set_input(seq, in_name, TESSERA_DTYPE_F32, x, in_shape, in_rank) ||
        tessera_session_run(seq) || read_output(seq, out_name, want, n_out)) {
      return fail("sequential run");
    }
    double num = 0, den = 0;
    size_t best = 0;
    for (size_t i = 0; i < n_out; ++i) {
      num += (double)(got[i] - want[i]) * (got[i] - want[i]);
      den += (double)want[i] * want[i];
      if (got[i] > got[best]) best = i;
    }
    const double err = sqrt(num / (den > 0 ? den : 1));
    printf("frame %d: top-1 %zu, relative L2 to the sequential run %.2e\n", received, best, err);
    if (!(err <= 1e-4)) {
      fprintf(stderr, "stream_frames_c: frame %d differs from the sequential run\n", received);
      return 1;
    }
  }
  printf("stream_frames_c: %d frames ok\n", frames);
  free(x);
  free(want);
  free(got);
  tessera_session_free(stream);
  tessera_session_free(seq);
  tessera_model_free(model);
  return 0;
}
