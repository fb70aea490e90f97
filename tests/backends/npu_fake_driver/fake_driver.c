/* Deliberately broken NPU drivers for the loader tests, one library per defect (compiled with
 * one of the FAKE_* definitions, see tests/CMakeLists.txt). Plain C99: it also checks that
 * hal.h compiles as C. */
#include <stddef.h>
#include <string.h>

#include "backends/npu/hal.h"

static tnpu_status info(tnpu_driver_info* out) {
  tnpu_driver_info d;
  memset(&d, 0, sizeof(d));
  d.struct_size = sizeof(d);
  strcpy(d.name, "fake");
  d.device_count = 1;
  memcpy(out, &d, out->struct_size < sizeof(d) ? out->struct_size : sizeof(d));
  return TNPU_OK;
}
static const char* no_error(void) {
  return "";
}
static tnpu_status open_device(uint32_t index, tnpu_device* out) {
  (void)index;
  *out = NULL;
  return TNPU_ERR_DEVICE;
}
static void close_device(tnpu_device d) {
  (void)d;
}
static tnpu_status device_info(tnpu_device d, tnpu_device_info* out) {
  (void)d;
  (void)out;
  return TNPU_ERR_DEVICE;
}
static const char* device_error(tnpu_device d) {
  (void)d;
  return "fake device error";
}
static uint32_t op_count(tnpu_device d) {
  (void)d;
  return 0;
}
static tnpu_status op_support(tnpu_device d, uint32_t i, tnpu_op_support* out) {
  (void)d;
  (void)i;
  (void)out;
  return TNPU_ERR_NOT_FOUND;
}
static tnpu_status prepare(tnpu_device d, const tnpu_graph* g, const tnpu_prepare_options* o,
                           tnpu_prepared* out) {
  (void)d;
  (void)g;
  (void)o;
  *out = NULL;
  return TNPU_ERR_UNSUPPORTED;
}
static tnpu_status prepared_info(tnpu_prepared p, tnpu_prepared_info* out) {
  (void)p;
  (void)out;
  return TNPU_ERR_INTERNAL;
}
static tnpu_status io_desc(tnpu_prepared p, uint32_t o, uint32_t i, tnpu_io_desc* out) {
  (void)p;
  (void)o;
  (void)i;
  (void)out;
  return TNPU_ERR_INTERNAL;
}
static tnpu_status execute(tnpu_prepared p, const tnpu_buffer* in, uint32_t ni,
                           const tnpu_buffer* out, uint32_t no) {
  (void)p;
  (void)in;
  (void)ni;
  (void)out;
  (void)no;
  return TNPU_ERR_INTERNAL;
}
static void release(tnpu_prepared p) {
  (void)p;
}
static const char* prepared_error(tnpu_prepared p) {
  (void)p;
  return "";
}

static tnpu_driver_api table = {TNPU_API_VERSION,
                                sizeof(tnpu_driver_api),
                                info,
                                no_error,
                                open_device,
                                close_device,
                                device_info,
                                device_error,
                                op_count,
                                op_support,
                                prepare,
                                prepared_info,
                                io_desc,
                                execute,
                                release,
                                prepared_error,
                                NULL,
                                NULL,
                                NULL,
                                NULL,
                                NULL};

#ifndef FAKE_NO_ENTRY
__attribute__((visibility("default"))) const tnpu_driver_api* tessera_npu_get_driver(
    uint32_t requested) {
  (void)requested;
#if defined(FAKE_RETURNS_NULL)
  return NULL;
#elif defined(FAKE_WRONG_VERSION)
  table.api_version = (2u << 16) | 3u;
#elif defined(FAKE_NULL_SLOT)
  table.execute = NULL;
  table.prepare = NULL;
#elif defined(FAKE_SHORT_TABLE)
  table.struct_size = (uint32_t)offsetof(tnpu_driver_api, prepare);
#endif
  return &table;
}
#else
__attribute__((visibility("default"))) int some_other_symbol(void) {
  return (int)table.struct_size;
}
#endif
