#include "common/where_ranks_stand.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace trl {

std::string WhereRanksStand(
    const std::vector<std::pair<int, std::string>>& rank_and_where) {
  std::map<std::string, std::vector<int>> by_where;
  for (const auto& [rank, where] : rank_and_where) {
    by_where[where].push_back(rank);
  }
  std::vector<std::pair<std::string, std::vector<int>>> groups(by_where.begin(),
                                                               by_where.end());
  std::stable_sort(groups.begin(), groups.end(),
                   [](const auto& a, const auto& b) {
                     return a.second.size() > b.second.size();
                   });
  const bool crowd = !groups.empty() && groups.front().second.size() >= 2;
  std::vector<std::string> parts;
  for (auto& [where, ranks] : groups) {
    std::sort(ranks.begin(), ranks.end());
    std::string part = absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ",
                                    absl::StrJoin(ranks, ", "), " ", where);
    if (crowd && ranks.size() == 1) part += ", the odd one out";
    parts.push_back(std::move(part));
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace trl
