// libFuzzer targets for the plain-data JSON readers: plan files (scheduler/plan.h), profile
// files (scheduler/profile.h), platform files (energy/platform.h) and cut profiles
// (scheduler/cut_profile.h). One source, four executables: TESSERA_FUZZ_JSON_KIND is 0 (plan),
// 1 (profile), 2 (platform) or 3 (cutprofile).
//
// Whatever the bytes, the reader must return an error with a message or a value; a value must
// survive writing and reading again unchanged (write -> read -> write gives the same text), and
// a plan's own checks (Plan::validate) must answer with a Status too.
#include <cstdint>
#include <cstdio>
#include <string>

#include "energy/platform.h"
#include "fuzz/fuzz_graph.h"
#include "scheduler/cut_profile.h"
#include "scheduler/plan.h"
#include "scheduler/profile.h"

#ifndef TESSERA_FUZZ_JSON_KIND
#error "define TESSERA_FUZZ_JSON_KIND (0 plan, 1 profile, 2 platform, 3 cutprofile)"
#endif

namespace {

using tessera::fuzz::check_refusal;

template <typename T, typename Read>
void round_trip(const tessera::Result<T>& first, Read read) {
  check_refusal(first.status());
  if (!first.ok()) return;
  const std::string text = first->to_json_text();
  const tessera::Result<T> again = read(text);
  if (!again.ok()) {
    std::fprintf(stderr, "written text does not read back: %s\n%s\n",
                 again.status().to_string().c_str(), text.c_str());
    __builtin_trap();
  }
  if (again->to_json_text() != text) {
    std::fprintf(stderr, "write -> read -> write changed the text:\n%s\n---\n%s\n", text.c_str(),
                 again->to_json_text().c_str());
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  const std::string text(reinterpret_cast<const char*>(data), size);
#if TESSERA_FUZZ_JSON_KIND == 0
  const Result<Plan> plan = Plan::from_json_text(text, "fuzz.plan.json");
  round_trip(plan, [](const std::string& t) { return Plan::from_json_text(t, "again"); });
  if (plan.ok()) {
    check_refusal(plan->validate(plan->num_layers, {}, false));
    check_refusal(plan->validate(plan->num_layers, {"cpu", "reference"}, true));
    (void)plan->notation();
    (void)plan->stage_actors();
  }
#elif TESSERA_FUZZ_JSON_KIND == 1
  const Result<Profile> profile = Profile::from_json_text(text, "fuzz.profile.json");
  round_trip(profile, [](const std::string& t) { return Profile::from_json_text(t, "again"); });
#elif TESSERA_FUZZ_JSON_KIND == 3
  const Result<CutProfile> cuts = CutProfile::from_json_text(text, "fuzz.cuts.json");
  round_trip(cuts, [](const std::string& t) { return CutProfile::from_json_text(t, "again"); });
  if (cuts.ok()) {
    check_refusal(cuts->validate(cuts->num_layers));
    check_refusal(cuts->validate(cuts->num_layers + 1));
    for (int c : cuts->cuts) {
      for (int b : cuts->bits) (void)cuts->find(c, b);
    }
  }
#else
  const Result<Platform> platform = Platform::from_json_text(text, "fuzz.platform.json");
  round_trip(platform, [](const std::string& t) { return Platform::from_json_text(t, "again"); });
#endif
  return 0;
}
