// Command lines shown to anyone who may run `ps` (and in logs) hide the
// values of arguments that look like secrets: `--hub_token X`,
// `--api-key=X`, `HF_TOKEN=X`, whose name contains token, key, secret,
// password or passwd (any case).
#ifndef TRL_COMMON_SECRET_REDACTION_H_
#define TRL_COMMON_SECRET_REDACTION_H_

#include <string>
#include <vector>

namespace trl {

inline constexpr char kRedacted[] = "<redacted>";

// Whether an argument or variable called `name` holds a secret.
bool NameLooksSecret(const std::string& name);

// `argv` with the values of secret-looking arguments replaced by
// kRedacted.
std::vector<std::string> RedactSecrets(const std::vector<std::string>& argv);

}  // namespace trl

#endif  // TRL_COMMON_SECRET_REDACTION_H_
