// The shared secret every RPC carries ("authorization: Bearer TOKEN"), so
// that reaching the coordinator's port is not enough to run commands on
// every node. It comes from --auth_token_file, or TRL_AUTH_TOKEN, or the
// user's ~/.trl/token, which `trl-coord start` creates (mode 0600) when
// nothing else is given; home directories are usually shared by the nodes
// of a cluster. The token is never logged.
#ifndef TRL_COMMON_AUTH_TOKEN_H_
#define TRL_COMMON_AUTH_TOKEN_H_

#include <string>

#include "absl/status/statusor.h"

namespace trl {

// ~/.trl/token
std::string DefaultTokenPath();

// 32 random bytes from /dev/urandom, as 64 hex digits.
absl::StatusOr<std::string> RandomToken();

// `count` bytes from the kernel's random source.
absl::StatusOr<std::string> RandomBytes(size_t count);

struct TokenSource {
  std::string token_file;          // --auth_token_file; "" for the default
  std::string environment;         // TRL_AUTH_TOKEN's value, if set
  bool create_if_missing = false;  // only trl-coord start creates one
  bool environment_set = false;    // TRL_AUTH_TOKEN is set (maybe empty)
};

// Reads the token (creating the default file when allowed). Errors name the
// file and what is wrong with it (missing, readable by others, empty). An
// empty or whitespace token is an error wherever it comes from, never
// "authentication off" (that is --insecure, and only on loopback).
absl::StatusOr<std::string> LoadToken(const TokenSource& source);

// Compares in time that depends only on the lengths, not on where the
// first difference is.
bool TokensEqual(const std::string& expected, const std::string& given);

// The token for a daemon or client: "" with --insecure, else from the
// token file, TRL_AUTH_TOKEN or ~/.trl/token (created when
// `create_if_missing`).
absl::StatusOr<std::string> ResolveAuthToken(const std::string& token_file,
                                             bool insecure,
                                             bool create_if_missing);

// Where ResolveAuthToken takes the token from, for messages: the file's
// path, or "TRL_AUTH_TOKEN" (call before ForgetTokenFromEnvironment).
std::string TokenOrigin(const std::string& token_file);

// The metadata key and value a client sends.
inline constexpr char kAuthMetadataKey[] = "authorization";
std::string BearerValue(const std::string& token);

}  // namespace trl

#endif  // TRL_COMMON_AUTH_TOKEN_H_
