// `falconctl settings set [JOB] KEY=VALUE ...`: KEY is a field name of falcon.v1.Settings
// (control.proto), VALUE parsed by the field's type (bool: true/false/1/0/yes/no/on/off; numbers
// in decimal). Ranges are the controller's to check (it answers INVALID_ARGUMENT naming the field).
#ifndef FALCON_CLI_CTL_SETTINGS_KV_H_
#define FALCON_CLI_CTL_SETTINGS_KV_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/falcon/v1/control.pb.h"

namespace falcon::cli::ctl {

// Sets one field from "KEY=VALUE". Errors: kInvalidArgument naming KEY (unknown key, "job", or a
// value that does not parse as the field's type, with the accepted form).
absl::Status ApplySetting(absl::string_view key_value, falcon::v1::Settings* settings);

// The settable keys, in field order.
std::vector<std::string> SettingKeys();

// "KEY  VALUE" rows for `settings get`; unset fields print "(unset)".
std::vector<std::pair<std::string, std::string>> SettingRows(const falcon::v1::Settings& s);

}  // namespace falcon::cli::ctl

#endif  // FALCON_CLI_CTL_SETTINGS_KV_H_
