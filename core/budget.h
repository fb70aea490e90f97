// Memory budgets: how much memory work sized by a model file may ask for.
//
// A model file states how large its constants, folded constants and activations are, and a
// hostile one can ask for far more than the machine has: a 223-byte ONNX file whose constant
// folding needs 16 GiB (a Resize of a 2x2 constant by 32768). Each step that allocates in
// proportion to such sizes checks the request against a budget before it allocates, and refuses
// with a ResourceExhausted Status stating what was asked for and the budget:
//
//   constant folding: node 'up' (Resize) makes f32[1, 1, 65536, 65536] (16 GiB), 16 GiB folded
//   in all, over the memory budget of 7.6 GiB (TESSERA_MEMORY_BUDGET)
//
// The default budget is TESSERA_MEMORY_BUDGET when set (a byte count with an optional K, M, G or
// T suffix, powers of 1024: "512M", "8G"), else the machine's physical memory. Callers may pass
// their own budget where an API takes one.
//
// Thread rule: every function here is safe from any thread (the environment is read at each
// call and never written).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace tessera {

// "512M" -> 536870912; "1.5G", "4096", "64K", "2T". The message names the text.
Result<uint64_t> parse_byte_count(std::string_view text);
// 536870912 -> "512 MiB", 1610612736 -> "1.5 GiB", 100 -> "100 B".
std::string format_bytes(uint64_t bytes);

// TESSERA_MEMORY_BUDGET when set and valid, else the physical memory (sysconf), else 8 GiB.
uint64_t default_memory_budget();
// `budget` when not 0, else default_memory_budget().
uint64_t resolve_memory_budget(uint64_t budget);

// OK when `asked` <= `budget`; else ResourceExhausted "WHAT ..., over the memory budget of B".
Status check_memory_budget(uint64_t asked, uint64_t budget, const std::string& what);

}  // namespace tessera
