#!/usr/bin/env bash
# Builds the libFuzzer target with clang (Debian's gcc has no libFuzzer): every translation unit
# of the ingest path with -fsanitize=fuzzer-no-link,address (coverage and ASan), the target with
# -fsanitize=fuzzer. Usage: build_fuzzer.sh OUT GENDIR SOURCES... (called by the genrule).
set -euo pipefail
out="$1"
gendir="$2"
shift 2
CXX="${FALCON_FUZZ_CXX:-clang++}"
if ! command -v "$CXX" >/dev/null; then
  echo "build_fuzzer: $CXX not found (install clang and libclang-rt-14-dev)" >&2
  exit 1
fi
objdir="$(mktemp -d)"
trap 'rm -rf "$objdir"' EXIT
flags=(-std=c++17 -O1 -fno-omit-frame-pointer -I. -I"$gendir" -w)
srcs=()
for s in "$@"; do
  case "$s" in *.cc) srcs+=("$s") ;; esac
done
compile() {
  local src="$1" san=-fsanitize=fuzzer-no-link,address
  case "$src" in *ingest_fuzzer.cc) san=-fsanitize=fuzzer,address ;; esac
  "$CXX" "${flags[@]}" "$san" -c "$src" -o "$objdir/$(echo "$src" | tr / _).o"
}
fail=0
for src in "${srcs[@]}"; do
  compile "$src" &
  if [ "$(jobs -rp | wc -l)" -ge 2 ]; then wait -n || fail=1; fi
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n || fail=1; done
[ "$fail" -eq 0 ] || { echo "build_fuzzer: compilation failed" >&2; exit 1; }
"$CXX" -fsanitize=fuzzer,address "$objdir"/*.o -o "$out" \
  -lprotobuf -lprometheus-cpp-core -lglog \
  -labsl_statusor -labsl_status -labsl_str_format_internal -labsl_strings \
  -labsl_strings_internal -labsl_synchronization -labsl_graphcycles_internal -labsl_time \
  -labsl_civil_time -labsl_time_zone -labsl_hash -labsl_city -labsl_low_level_hash \
  -labsl_raw_hash_set -labsl_cord -labsl_cordz_info -labsl_cord_internal \
  -labsl_cordz_functions -labsl_cordz_handle -labsl_exponential_biased -labsl_stacktrace \
  -labsl_symbolize -labsl_debugging_internal -labsl_demangle_internal -labsl_malloc_internal \
  -labsl_throw_delegate -labsl_int128 -labsl_base -labsl_spinlock_wait \
  -labsl_raw_logging_internal -labsl_log_severity -lpthread
