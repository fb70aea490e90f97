/* Drivers that forward to the reference NPU driver (path FORWARD_TO) with one change each, for the
 * NpuProgram::run_timed tests (compiled with one of the FORWARD_* definitions, see
 * tests/CMakeLists.txt). Plain C99, like a vendor's driver could be.
 *
 *   FORWARD_V1_0       presents itself as a HAL 1.0 driver: api_version 1.0 and a table that ends
 *                      before execute_profiled (the slot pointer is still set beyond struct_size,
 *                      so a caller that ignores struct_size would call it).
 *   FORWARD_BAD_COUNT  execute_profiled reports one node more than the subgraph has.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "backends/npu/hal.h"

static const tnpu_driver_api* real = NULL;
static tnpu_driver_api table;

#ifdef FORWARD_BAD_COUNT
static tnpu_status bad_count(tnpu_prepared p, const tnpu_buffer* in, uint32_t ni,
                             const tnpu_buffer* out, uint32_t no, tnpu_execute_profile* prof) {
  const tnpu_status st = real->execute_profiled(p, in, ni, out, no, prof);
  if (st == TNPU_OK) prof->num_nodes += 1;
  return st;
}
#endif

__attribute__((visibility("default"))) const tnpu_driver_api* tessera_npu_get_driver(
    uint32_t requested) {
  if (real == NULL) {
    void* lib = dlopen(FORWARD_TO, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    void* sym = lib ? dlsym(lib, TNPU_ENTRY_SYMBOL) : NULL;
    tnpu_get_driver_fn entry = NULL;
    if (sym == NULL) return NULL;
    memcpy(&entry, &sym, sizeof(entry));
    real = entry(requested);
    if (real == NULL || real->struct_size < sizeof(tnpu_driver_api)) return NULL;
    memcpy(&table, real, sizeof(table));
#if defined(FORWARD_V1_0)
    table.api_version = TNPU_API_VERSION_MAJOR << 16;
    table.struct_size = (uint32_t)offsetof(tnpu_driver_api, execute_profiled);
#elif defined(FORWARD_BAD_COUNT)
    table.execute_profiled = bad_count;
#endif
  }
  return &table;
}
