// One spdlog logger per component, writing to stderr. Worker output goes to
// stdout through the agent's console, never through these loggers.
#ifndef TRL_COMMON_LOGGING_H_
#define TRL_COMMON_LOGGING_H_

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace trl {

// Returns the logger named `component`, creating it on first use.
std::shared_ptr<spdlog::logger> ComponentLogger(const std::string& component);

// Applies TRL_LOG_LEVEL (trace, debug, info, warn, error) to all loggers.
void ConfigureLogLevelFromEnvironment();

}  // namespace trl

#endif  // TRL_COMMON_LOGGING_H_
