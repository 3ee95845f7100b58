#include "coordinator/status/query.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "coordinator/status/view.h"

namespace trl {

namespace pb = trl::launch::v1;

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// application/x-www-form-urlencoded: %XX and '+' for a space.
std::optional<std::string> Decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out.push_back(' ');
    } else if (text[i] == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      const int high = HexValue(text[i + 1]), low = HexValue(text[i + 2]);
      if (high < 0 || low < 0) return std::nullopt;
      out.push_back(static_cast<char>(high * 16 + low));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

// The name as given, cut to 64 bytes (it is the client's text).
absl::Status Bad(const std::string& name, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("bad parameter '", name.substr(0, 64), "': ", why));
}

absl::Status ReadInt(const std::string& name, const std::string& value, int min,
                     int max, int* out) {
  int number = 0;
  if (!absl::SimpleAtoi(value, &number) || number < min || number > max) {
    return Bad(name, absl::StrCat("must be a whole number from ", min, " to ",
                                  max, ", not '", value.substr(0, 32), "'"));
  }
  *out = number;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<pb::JobStatusRequest> ParseStatusQuery(std::string_view query) {
  pb::JobStatusRequest request;
  std::set<std::string> seen;
  std::string view;
  pb::ListSlice ranks, nodes;
  bool want_ranks = false, want_nodes = false;
  for (absl::string_view split :
       absl::StrSplit(absl::string_view(query.data(), query.size()), '&',
                      absl::SkipEmpty())) {
    const std::string_view pair(split.data(), split.size());
    const size_t equals = pair.find('=');
    const std::optional<std::string> name = Decode(pair.substr(0, equals));
    if (!name) {
      return Bad(std::string(pair.substr(0, equals)), "not percent-encoded");
    }
    const std::optional<std::string> value =
        Decode(equals == std::string_view::npos ? std::string_view()
                                                : pair.substr(equals + 1));
    if (!value) return Bad(*name, "its value is not percent-encoded");
    if (!seen.insert(*name).second) return Bad(*name, "given twice");
    const bool machine = name->rfind("machine_", 0) == 0;
    pb::ListSlice& slice = machine ? nodes : ranks;
    bool& wanted = machine ? want_nodes : want_ranks;
    const std::string field = machine ? name->substr(8) : *name;
    int number = 0;
    if (!machine && *name == "view") {
      if (*value != "summary" && *value != "full") {
        return Bad(*name, "must be summary or full, not '" +
                              value->substr(0, 32) + "'");
      }
      view = *value;
    } else if (field == "offset") {
      const int max = 1 << 30;
      if (auto read = ReadInt(*name, *value, 0, max, &number); !read.ok()) {
        return read;
      }
      slice.set_offset(number);
      wanted = true;
    } else if (field == "limit") {
      if (auto read = ReadInt(*name, *value, 1, kMaxSliceLimit, &number);
          !read.ok()) {
        return read;
      }
      slice.set_limit(number);
      wanted = true;
    } else if (field == "q") {
      if (value->size() > kMaxFilterLength) {
        return Bad(*name,
                   absl::StrCat("longer than ", kMaxFilterLength, " bytes"));
      }
      slice.set_filter(*value);
      wanted = true;
    } else {
      return Bad(*name,
                 "unknown (known: view, offset, limit, q, machine_offset, "
                 "machine_limit, machine_q)");
    }
  }
  if (view == "full" && (want_ranks || want_nodes)) {
    return Bad("view", "full takes no offset, limit or q");
  }
  request.set_summary(view == "summary");
  if (want_ranks) {
    if (!seen.count("limit")) ranks.set_limit(kDefaultPageLimit);
    *request.mutable_ranks() = ranks;
  }
  if (want_nodes) {
    if (!seen.count("machine_limit")) nodes.set_limit(kDefaultPageLimit);
    *request.mutable_nodes() = nodes;
  }
  return request;
}

}  // namespace trl
