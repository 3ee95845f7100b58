#include "common/where_ranks_stand.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace trl {

namespace {

// At most this many places are named, and this many bytes said in all: a
// job of 16,384 ranks in as many places (or a hostile agent's words) makes
// one line of a few KiB, not megabytes.
constexpr size_t kPlacesNamed = 8;
constexpr size_t kBytesSaid = 4096;

// "0, 2, 5-9": runs of three or more as ranges. `ranks` is sorted.
std::string RankList(const std::vector<int>& ranks) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (j - i >= 2) {
      parts.push_back(absl::StrCat(ranks[i], "-", ranks[j]));
    } else {
      for (size_t k = i; k <= j; ++k) parts.push_back(absl::StrCat(ranks[k]));
    }
    i = j + 1;
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace

std::string WhereRanksStand(
    const std::vector<std::pair<int, std::string>>& rank_and_where,
    const std::function<std::string(int rank)>& runs_on) {
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
  std::string said;
  size_t named = 0;
  for (auto& [where, ranks] : groups) {
    std::sort(ranks.begin(), ranks.end());
    const std::string place =
        ranks.size() == 1 && runs_on ? runs_on(ranks.front()) : "";
    std::string part =
        absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", RankList(ranks),
                     place.empty() ? "" : " ", place, " ", where);
    if (crowd && ranks.size() == 1) part += ", the odd one out";
    if (named == 0 && part.size() > kBytesSaid) {
      part = absl::StrCat(part.substr(0, kBytesSaid), "... [cut]");
    } else if (named == kPlacesNamed ||
               said.size() + part.size() > kBytesSaid) {
      break;
    }
    absl::StrAppend(&said, said.empty() ? "" : "; ", part);
    ++named;
  }
  if (named < groups.size()) {
    size_t left = 0;
    for (size_t i = named; i < groups.size(); ++i) {
      left += groups[i].second.size();
    }
    absl::StrAppend(&said, said.empty() ? "" : "; ", "and ", left,
                    left == 1 ? " rank" : " ranks", " in ",
                    groups.size() - named, " other place",
                    groups.size() - named == 1 ? "" : "s");
  }
  return said;
}

}  // namespace trl
