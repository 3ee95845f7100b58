#include "common/grpc_logging.h"

#include <grpc/support/log.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "common/logging.h"

namespace trl {
namespace {

// At most kBurst lines per kWindow; then one line saying how many were
// left out.
constexpr int kBurst = 5;
constexpr auto kWindow = std::chrono::seconds(10);

std::mutex mutex;
std::chrono::steady_clock::time_point window_start;
int lines_in_window = 0;
long left_out = 0;
bool raw = false;

void Log(gpr_log_func_args* args) {
  if (!raw && args->severity < GPR_LOG_SEVERITY_ERROR) return;
  const auto now = std::chrono::steady_clock::now();
  std::string line = args->message ? args->message : "";
  if (!raw && IsHandshakeFailureLine(line)) {
    // OpenSSL's words help nobody who holds another token: the agent says
    // it in its own (coordinator_wait_report.h).
    ComponentLogger("grpc")->debug("{}", line);
    return;
  }
  long dropped = 0;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (now - window_start > kWindow) {
      window_start = now;
      lines_in_window = 0;
      dropped = left_out;
      left_out = 0;
    }
    if (lines_in_window >= kBurst) {
      ++left_out;
      return;
    }
    ++lines_in_window;
  }
  auto logger = ComponentLogger("grpc");
  if (dropped > 0) {
    logger->warn("{} more gRPC error line(s) left out in the last {} s",
                 dropped, kWindow.count());
  }
  logger->warn("{}", line);
}

}  // namespace

bool IsHandshakeFailureLine(const std::string& line) {
  return line.find("Handshake failed") != std::string::npos ||
         line.find("SSL_ERROR") != std::string::npos ||
         line.find("ssl_transport_security") != std::string::npos ||
         line.find("Security handshake failed") != std::string::npos;
}

void RouteGrpcLogs() {
  const char* wanted = std::getenv("TRL_GRPC_LOG");
  raw = wanted != nullptr && std::strcmp(wanted, "1") == 0;
  gpr_set_log_function(Log);
}

}  // namespace trl
