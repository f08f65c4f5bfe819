#include "common/json_parse.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace falcon::common {
namespace {

using nlohmann::json;

// Builds the document from SAX events, keeping the path to the value being read. Returning false
// from an event stops the parse (the depth limit); nlohmann reports syntax and range errors
// through parse_error.
class DomBuilder : public json::json_sax_t {
 public:
  explicit DomBuilder(size_t max_depth) : max_depth_(max_depth) {}

  bool null() override { return Put(json(nullptr)); }
  bool boolean(bool v) override { return Put(json(v)); }
  bool number_integer(number_integer_t v) override { return Put(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return Put(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return Put(json(v)); }
  bool string(string_t& v) override { return Put(json(std::move(v))); }
  bool binary(binary_t& v) override { return Put(json::binary(v)); }
  bool start_object(std::size_t) override { return Open(json::object()); }
  bool key(string_t& k) override {
    stack_.back().key = std::move(k);
    stack_.back().has_key = true;
    return true;
  }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(json::array()); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    error_position_ = position;
    error_ = e.what();
    return false;
  }

  json TakeRoot() { return std::move(root_); }
  size_t error_position() const { return error_position_; }
  const std::string& error() const { return error_; }

  // "series[0].raw[2]": where the value being read sits ("" at the top level). Every frame but
  // the innermost holds an open child: its last element (array) or its current key (object).
  std::string Path() const {
    std::string path;
    for (size_t i = 0; i < stack_.size(); ++i) {
      const Frame& f = stack_[i];
      const bool inner = i + 1 == stack_.size();
      if (f.value->is_array()) {
        absl::StrAppend(&path, "[", f.value->size() - (inner ? 0 : 1), "]");
      } else if (f.has_key) {
        std::string key = absl::CHexEscape(f.key.substr(0, 64));
        if (f.key.size() > 64) key += "...";
        absl::StrAppend(&path, path.empty() ? "" : ".", key);
      }
    }
    return path;
  }

 private:
  struct Frame {
    json* value;
    std::string key;  // Objects: the key of the value being read.
    bool has_key = false;
  };

  // Stores `v` where the value being read goes; returns where it now lives.
  json* Place(json v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& top = stack_.back();
    if (top.value->is_array()) {
      top.value->push_back(std::move(v));
      return &top.value->back();
    }
    json* slot = &(*top.value)[top.key];
    *slot = std::move(v);
    return slot;
  }

  // The value of the current key (or element) is complete.
  void Done() {
    if (!stack_.empty()) stack_.back().has_key = false;
  }

  bool Put(json v) {
    Place(std::move(v));
    Done();
    return true;
  }

  bool Open(json container) {
    if (stack_.size() >= max_depth_) {
      error_ = absl::StrCat("nested deeper than ", max_depth_, " levels");
      return false;
    }
    json* at = Place(std::move(container));
    stack_.push_back(Frame{at, "", false});
    return true;
  }

  bool Close() {
    stack_.pop_back();
    Done();
    return true;
  }

  const size_t max_depth_;
  json root_;
  std::vector<Frame> stack_;
  size_t error_position_ = 0;
  std::string error_;
};

// nlohmann's message without "[json.exception.KIND.N] " and "parse error at line L, column C: ".
std::string Detail(absl::string_view what) {
  if (absl::StartsWith(what, "[json.exception.")) {
    if (const size_t end = what.find("] "); end != absl::string_view::npos) {
      what.remove_prefix(end + 2);
    }
  }
  if (absl::StartsWith(what, "parse error at ")) {
    if (const size_t colon = what.find(": "); colon != absl::string_view::npos) {
      what.remove_prefix(colon + 2);
    }
  } else if (absl::StartsWith(what, "parse error: ")) {
    what.remove_prefix(13);
  }
  return std::string(what);
}

}  // namespace

absl::StatusOr<json> ParseJson(absl::string_view text, absl::string_view source, size_t max_depth) {
  DomBuilder builder(max_depth);
  bool ok = false;
  try {
    ok = json::sax_parse(text.begin(), text.end(), &builder);
  } catch (const json::exception& e) {  // Not expected with a SAX handler; never let one escape.
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON: ", Detail(e.what())));
  }
  if (ok) return builder.TakeRoot();
  // The byte the parser stopped at (1-based; size + 1 at the end of the input). A depth error
  // comes from an event: the position is where the parser had got to, unknown here, so none.
  std::string where;
  if (builder.error_position() > 0) {
    const size_t byte = std::min<size_t>(builder.error_position(), text.size());
    size_t line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i + 1 < byte; ++i) {
      if (text[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    where = absl::StrCat(" at line ", line, ", column ", builder.error_position() - line_start,
                         " (byte ", builder.error_position(), ")");
  }
  std::string path = builder.Path();
  if (path.size() > 200) path = absl::StrCat(path.substr(0, 200), "...");
  if (!path.empty()) absl::StrAppend(&where, where.empty() ? " at " : ", at ", path);
  return absl::InvalidArgumentError(
      absl::StrCat(source, ": not valid JSON", where, ": ", Detail(builder.error())));
}

}  // namespace falcon::common
