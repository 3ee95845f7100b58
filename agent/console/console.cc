#include "agent/console/console.h"

namespace trl {

void Console::WriteLine(bool to_stderr, std::string_view prefix,
                        std::string_view line) {
  std::lock_guard<std::mutex> lock(mutex_);
  FILE* stream = to_stderr ? err_ : out_;
  fwrite(prefix.data(), 1, prefix.size(), stream);
  fwrite(line.data(), 1, line.size(), stream);
  fputc('\n', stream);
  fflush(stream);
}

}  // namespace trl
