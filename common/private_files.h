// Files a daemon or the demo keeps for one user, safe from the other users
// of a shared machine: a per-user directory (mode 0700, checked before it
// is trusted), files written through a fresh temp file (mkstemp: O_EXCL, no
// link followed) renamed into place, files read back only when they are
// regular files of ours that nobody else may write, and job ids checked
// before they become part of a path.
#ifndef TRL_COMMON_PRIVATE_FILES_H_
#define TRL_COMMON_PRIVATE_FILES_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trl {

// $HOME/.trl/run, else $XDG_RUNTIME_DIR/trl-launch (which goes at logout);
// created (mode 0700) when missing, and refused, naming the
// path and the reason, when it is not a directory of ours that only we may
// enter and write.
absl::StatusOr<std::string> PrivateDirectory();

// Creates `dir` (mode 0700) if missing, parents included, and checks it as
// PrivateDirectory does.
absl::Status EnsurePrivateDirectory(const std::string& dir);

// Replaces `path` with `contents`: written to a new temp file beside it
// (mkstemp, `mode`), fsync'd and renamed over `path`. A link planted at
// `path` is replaced, never followed.
absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents,
                                 mode_t mode = 0600);

// The contents of `path`, if it is a regular file (a link is not
// followed) owned by this user, that neither group nor others may write,
// and at most `max_bytes` long. NotFound when it does not exist.
absl::StatusOr<std::string> ReadPrivateFile(const std::string& path,
                                            size_t max_bytes);

// A job id that may become a directory name: 1-128 characters of
// [A-Za-z0-9._-], not "." or "..".
bool IsValidJobId(const std::string& id);

}  // namespace trl

#endif  // TRL_COMMON_PRIVATE_FILES_H_
