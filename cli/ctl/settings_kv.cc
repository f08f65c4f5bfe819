#include "cli/ctl/settings_kv.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"

namespace falcon::cli::ctl {
namespace {

using google::protobuf::FieldDescriptor;

}  // namespace

std::vector<std::string> SettingKeys() {
  std::vector<std::string> keys;
  const auto* d = falcon::v1::Settings::descriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    if (d->field(i)->name() != "job") keys.push_back(d->field(i)->name());
  }
  return keys;
}

absl::Status ApplySetting(absl::string_view key_value, falcon::v1::Settings* settings) {
  const size_t eq = key_value.find('=');
  if (eq == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("'", key_value, "' is not KEY=VALUE"));
  }
  const std::string key(absl::StripAsciiWhitespace(key_value.substr(0, eq)));
  const std::string value(absl::StripAsciiWhitespace(key_value.substr(eq + 1)));
  const auto* f = falcon::v1::Settings::descriptor()->FindFieldByName(key);
  if (f == nullptr || key == "job") {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown setting '", key, "'; settable: ", absl::StrJoin(SettingKeys(), ", ")));
  }
  const auto* r = settings->GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_BOOL: {
      const std::string v = absl::AsciiStrToLower(value);
      if (v == "true" || v == "1" || v == "yes" || v == "on") {
        r->SetBool(settings, f, true);
      } else if (v == "false" || v == "0" || v == "no" || v == "off") {
        r->SetBool(settings, f, false);
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat(key, ": '", value, "' is not a boolean (true or false)"));
      }
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      double v = 0;
      if (!absl::SimpleAtod(value, &v) || !std::isfinite(v)) {
        return absl::InvalidArgumentError(
            absl::StrCat(key, ": '", value, "' is not a finite number"));
      }
      r->SetDouble(settings, f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      uint64_t v = 0;
      if (value.empty() || value[0] == '-' || value[0] == '+' || !absl::SimpleAtoi(value, &v) ||
          v > std::numeric_limits<uint32_t>::max()) {
        return absl::InvalidArgumentError(
            absl::StrCat(key, ": '", value, "' is not a non-negative 32-bit integer"));
      }
      r->SetUInt32(settings, f, static_cast<uint32_t>(v));
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(key, ": type not settable from falconctl"));
  }
}

std::vector<std::pair<std::string, std::string>> SettingRows(const falcon::v1::Settings& s) {
  std::vector<std::pair<std::string, std::string>> rows;
  const auto* d = s.GetDescriptor();
  const auto* r = s.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->name() == "job") continue;
    std::string v = "(unset)";
    if (r->HasField(s, f)) {
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_BOOL:
          v = r->GetBool(s, f) ? "true" : "false";
          break;
        case FieldDescriptor::CPPTYPE_DOUBLE:
          v = absl::StrCat(r->GetDouble(s, f));
          break;
        case FieldDescriptor::CPPTYPE_UINT32:
          v = absl::StrCat(r->GetUInt32(s, f));
          break;
        default:
          v = "?";
      }
    }
    rows.emplace_back(f->name(), v);
  }
  return rows;
}

}  // namespace falcon::cli::ctl
