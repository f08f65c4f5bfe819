// The training text of the reference char-level language model: a real English text read at run
// time (by default the GPL-3 licence every Debian machine has in /usr/share/common-licenses),
// its character vocabulary, and deterministic sampling of (context, next character) examples.
//
// Sampling is counter-based: example `row` of micro-batch `micro` of iteration `iteration` depends
// only on (seed, iteration, micro, row), never on the parallel layout, so every DP x PP layout
// (and every S2/S3/S4 plan) sees exactly the same global batches.
//
// Immutable after Load: thread-safe.
#ifndef FALCON_TRAINER_MODEL_CORPUS_H_
#define FALCON_TRAINER_MODEL_CORPUS_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace falcon::trainer::model {

// Default text: present on every Debian system (package base-files).
inline constexpr char kDefaultCorpusPath[] = "/usr/share/common-licenses/GPL-3";
// The largest training text Load reads (the corpus keeps 4 bytes per character).
inline constexpr uint64_t kMaxCorpusBytes = uint64_t{64} << 20;

class Corpus {
 public:
  // Reads `path`. kNotFound when it cannot be opened (the message names the path and says where
  // the default comes from); kInvalidArgument when it is a directory, larger than
  // kMaxCorpusBytes (an endless /dev/zero aborted with bad_alloc) or holds fewer than `min_chars`
  // bytes.
  static absl::StatusOr<Corpus> Load(const std::string& path, int64_t min_chars = 1024);
  // Builds a corpus from text in memory (tests). kInvalidArgument when shorter than `min_chars`.
  static absl::StatusOr<Corpus> FromText(absl::string_view text, int64_t min_chars = 1024);

  // Number of distinct bytes in the text: the model's vocabulary size, >= 1.
  int vocab_size() const { return static_cast<int>(vocab_.size()); }
  int64_t size() const { return static_cast<int64_t>(ids_.size()); }
  // Token id of byte `c`, or -1 when `c` is not in the text.
  int IdOf(unsigned char c) const { return id_of_[c]; }
  // Byte of token `id`, [0, vocab_size()).
  unsigned char CharOf(int id) const { return vocab_[id]; }
  const std::vector<int32_t>& ids() const { return ids_; }

  // Fills one micro-batch of `batch_size` examples: `context` row-major [batch_size x context]
  // token ids (the `context` characters before the target) and `targets` [batch_size] (the next
  // character). Requires context >= 1 and size() > context. Deterministic in (seed, iteration,
  // micro, row).
  void FillMicroBatch(uint64_t seed, int64_t iteration, int64_t micro, int batch_size, int context,
                      int32_t* context_ids, int32_t* targets) const;

 private:
  Corpus() = default;
  std::vector<unsigned char> vocab_;
  std::array<int, 256> id_of_{};
  std::vector<int32_t> ids_;
};

// splitmix64 finalizer: a stable 64-bit mix used for seeding and sampling.
uint64_t Mix64(uint64_t x);
// Mix of several values, order-sensitive.
uint64_t HashCombine(uint64_t a, uint64_t b);

}  // namespace falcon::trainer::model

#endif  // FALCON_TRAINER_MODEL_CORPUS_H_
