// SplitMix64's output function (Steele, Lea and Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014): a bijective 64-bit mix, for stable hashes and seeded per-key
// randomness where the key, not a generator's state, must decide the value (communicator ids,
// the fleet simulator's noise).
#ifndef FALCON_COMMON_SPLIT_MIX_H_
#define FALCON_COMMON_SPLIT_MIX_H_

#include <cstdint>

namespace falcon::common {

constexpr uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace falcon::common

#endif  // FALCON_COMMON_SPLIT_MIX_H_
