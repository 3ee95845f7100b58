#include "common/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <mutex>

namespace trl {

std::shared_ptr<spdlog::logger> ComponentLogger(const std::string& component) {
  if (auto existing = spdlog::get(component)) return existing;
  // Two threads may ask for a new component's logger at once (gRPC logs
  // from its own threads): only one creates it, spdlog throws for a second.
  static std::mutex creating;
  std::lock_guard<std::mutex> lock(creating);
  if (auto existing = spdlog::get(component)) return existing;
  auto logger = spdlog::stderr_color_mt(component);
  logger->set_pattern("%H:%M:%S.%e %^%L%$ [%n] %v");
  if (const char* level = std::getenv("TRL_LOG_LEVEL")) {
    logger->set_level(spdlog::level::from_str(level));
  }
  return logger;
}

void ConfigureLogLevelFromEnvironment() {
  if (const char* level = std::getenv("TRL_LOG_LEVEL")) {
    spdlog::set_level(spdlog::level::from_str(level));
  }
}

}  // namespace trl
