#include "common/secret_redaction.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace trl {

bool NameLooksSecret(const std::string& name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (const char* word : {"token", "key", "secret", "password", "passwd"}) {
    if (absl::StrContains(lower, word)) return true;
  }
  return false;
}

std::vector<std::string> RedactSecrets(const std::vector<std::string>& argv) {
  std::vector<std::string> shown;
  bool value_next = false;
  for (const std::string& arg : argv) {
    if (value_next) {
      value_next = false;
      if (!absl::StartsWith(arg, "-")) {
        shown.push_back(kRedacted);
        continue;
      }
    }
    const size_t equals = arg.find('=');
    const bool is_flag = absl::StartsWith(arg, "-");
    if (equals != std::string::npos && equals > 0) {
      // --name=value, or NAME=value (an environment-style assignment).
      if (NameLooksSecret(arg.substr(0, equals))) {
        shown.push_back(arg.substr(0, equals + 1) + kRedacted);
        continue;
      }
    } else if (is_flag && NameLooksSecret(arg)) {
      value_next = true;  // --name value
    }
    shown.push_back(arg);
  }
  return shown;
}

}  // namespace trl
