#include "agent/core/log_dir_choice.h"

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace trl {

LogDirChoice ChooseLogDir(const std::string& own,
                          const std::string& coordinators,
                          bool workers_of_another_user) {
  LogDirChoice choice;
  if (!own.empty()) {
    choice.dir = own;
    return choice;
  }
  if (coordinators.empty()) return choice;
  if (workers_of_another_user) {
    choice.refused = absl::StrCat(
        "the coordinator's --log_dir ", coordinators,
        " is not used under --worker_user (the agent writes there as root: "
        "only a directory given to this agent is trusted)");
    return choice;
  }
  // The coordinator makes its path absolute; anything else names a place
  // that depends on where this agent was started.
  const std::filesystem::path path(coordinators);
  if (!path.is_absolute()) {
    choice.refused = absl::StrCat("the coordinator's --log_dir ", coordinators,
                                  " is not an absolute path");
    return choice;
  }
  for (const auto& part : path) {
    if (part == "..") {
      choice.refused = absl::StrCat("the coordinator's --log_dir ",
                                    coordinators, " climbs with '..'");
      return choice;
    }
  }
  choice.dir = coordinators;
  choice.from_coordinator = true;
  return choice;
}

}  // namespace trl
