#include "trainer/model/corpus.h"

#include "absl/strings/str_cat.h"
#include "common/text_file.h"

namespace falcon::trainer::model {

uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t HashCombine(uint64_t a, uint64_t b) {
  return Mix64(Mix64(a) ^ (b + 0x632be59bd9b4e019ULL));
}

absl::StatusOr<Corpus> Corpus::Load(const std::string& path, int64_t min_chars) {
  absl::StatusOr<std::string> text = common::ReadTextFile(path, kMaxCorpusBytes);
  if (absl::IsNotFound(text.status()) || absl::IsPermissionDenied(text.status())) {
    return absl::NotFoundError(absl::StrCat(
        "cannot open training text '", path, "' (the default is Debian's ", kDefaultCorpusPath,
        ", from package base-files; pass --data FILE to use another English text)"));
  }
  if (!text.ok()) {  // A directory, an endless or too large file.
    return absl::InvalidArgumentError(absl::StrCat("training text: ", text.status().message()));
  }
  absl::StatusOr<Corpus> corpus = FromText(*text, min_chars);
  if (!corpus.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("training text '", path, "': ", corpus.status().message()));
  }
  return corpus;
}

absl::StatusOr<Corpus> Corpus::FromText(absl::string_view text, int64_t min_chars) {
  if (static_cast<int64_t>(text.size()) < min_chars || text.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("text has ", text.size(), " bytes; at least ", min_chars, " are needed"));
  }
  Corpus c;
  std::array<bool, 256> seen{};
  for (char ch : text) seen[static_cast<unsigned char>(ch)] = true;
  c.id_of_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    if (!seen[b]) continue;
    c.id_of_[b] = static_cast<int>(c.vocab_.size());
    c.vocab_.push_back(static_cast<unsigned char>(b));
  }
  c.ids_.reserve(text.size());
  for (char ch : text) c.ids_.push_back(c.id_of_[static_cast<unsigned char>(ch)]);
  return c;
}

void Corpus::FillMicroBatch(uint64_t seed, int64_t iteration, int64_t micro, int batch_size,
                            int context, int32_t* context_ids, int32_t* targets) const {
  const uint64_t positions = static_cast<uint64_t>(size() - context);
  const uint64_t base = HashCombine(HashCombine(seed, static_cast<uint64_t>(iteration)),
                                    static_cast<uint64_t>(micro));
  for (int row = 0; row < batch_size; ++row) {
    const uint64_t start = HashCombine(base, static_cast<uint64_t>(row)) % positions;
    for (int j = 0; j < context; ++j) context_ids[row * context + j] = ids_[start + j];
    targets[row] = ids_[start + context];
  }
}

}  // namespace falcon::trainer::model
