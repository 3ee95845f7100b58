#include "agent/core/stack_summary.h"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace trl {

namespace {

struct Frame {
  std::string function;
  std::string file;  // path as py-spy prints it
  std::string line;
};

// "    name (path/file.py:88)" -> a frame; native frames ("name (libc.so.6)")
// and anything else -> nullopt.
std::optional<Frame> PythonFrame(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (text.empty() || text.back() != ')') return std::nullopt;
  const size_t open = text.rfind(" (");
  if (open == absl::string_view::npos) return std::nullopt;
  absl::string_view where = text.substr(open + 2, text.size() - open - 3);
  const size_t colon = where.rfind(':');
  if (colon == absl::string_view::npos) return std::nullopt;
  absl::string_view file = where.substr(0, colon);
  absl::string_view line = where.substr(colon + 1);
  if (!absl::EndsWith(file, ".py") || line.empty()) return std::nullopt;
  for (char c : line) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  return Frame{std::string(text.substr(0, open)), std::string(file),
               std::string(line)};
}

bool IsLibrary(absl::string_view file) {
  return file.find("site-packages/") != absl::string_view::npos ||
         file.find("dist-packages/") != absl::string_view::npos ||
         file.find("/lib/python") != absl::string_view::npos ||
         absl::StartsWith(file, "<frozen");
}

// A library's path from its package ("torch/distributed/x.py"), anything
// else's file name ("train.py").
absl::string_view ShortName(absl::string_view file) {
  for (absl::string_view root : {"site-packages/", "dist-packages/"}) {
    const size_t at = file.rfind(root);
    if (at != absl::string_view::npos) return file.substr(at + root.size());
  }
  const size_t slash = file.rfind('/');
  return slash == absl::string_view::npos ? file : file.substr(slash + 1);
}

// The frames of the thread named MainThread, else of the first thread.
std::vector<Frame> MainThreadFrames(absl::string_view dump) {
  std::vector<Frame> first, main;
  std::vector<Frame>* into = nullptr;
  bool seen_thread = false;
  for (absl::string_view line : absl::StrSplit(dump, '\n')) {
    if (absl::StartsWith(line, "Thread ")) {
      const bool is_main =
          line.find("\"MainThread\"") != absl::string_view::npos;
      if (is_main) {
        into = &main;
      } else {
        into = seen_thread ? nullptr : &first;
      }
      seen_thread = true;
      continue;
    }
    if (into == nullptr) continue;
    if (auto frame = PythonFrame(line)) into->push_back(*std::move(frame));
  }
  return main.empty() ? first : main;
}

}  // namespace

std::string WhereInPython(absl::string_view py_spy_dump) {
  const std::vector<Frame> frames = MainThreadFrames(py_spy_dump);
  if (frames.empty()) return "";
  // py-spy lists the innermost frame first.
  const Frame& innermost = frames.front();
  std::string where =
      absl::StrCat("in ", innermost.function, " (", ShortName(innermost.file),
                   ":", innermost.line, ")");
  if (!IsLibrary(innermost.file)) return where;
  for (const Frame& frame : frames) {
    if (!IsLibrary(frame.file)) {
      absl::StrAppend(&where, ", from ", ShortName(frame.file), ":",
                      frame.line);
      break;
    }
  }
  return where;
}

std::string WhereInTheKernel(char state, absl::string_view wchan) {
  const char* name = state == 'R'   ? "running"
                     : state == 'S' ? "sleeping"
                     : state == 'D' ? "uninterruptible wait"
                     : state == 'T' ? "stopped"
                     : state == 't' ? "traced"
                     : state == 'Z' ? "zombie"
                                    : "?";
  std::string where =
      absl::StrCat("state ", std::string(1, state), " (", name, ")");
  wchan = absl::StripAsciiWhitespace(wchan);
  if (!wchan.empty() && wchan != "0") {
    absl::StrAppend(&where, " in the kernel at ", wchan);
  }
  return where;
}

}  // namespace trl
