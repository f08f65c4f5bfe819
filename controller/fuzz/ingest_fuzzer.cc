// libFuzzer target for the ingest path (built with clang -fsanitize=fuzzer,address by the
// :ingest_fuzzer genrule; run for a bounded time by :ingest_fuzzer_test).
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "controller/fuzz/ingest_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::Status s = falcon::controller::fuzz::FuzzIngestOnce(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!s.ok()) {
    std::fprintf(stderr, "ingest invariant broken: %s\n", std::string(s.message()).c_str());
    std::abort();
  }
  return 0;
}
