// Uniform handling of command-line parse results for the daemons: help
// exits 0, a bad flag exits 2 with CLI11's message, as every other bad input.
#ifndef TRL_COMMON_CLI_ERRORS_H_
#define TRL_COMMON_CLI_ERRORS_H_

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>

namespace trl {

// Parses; returns the exit code to leave with, or nothing to go on.
inline std::optional<int> ParseCommandLine(CLI::App& app, int argc,
                                           char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: error: %s\nRun with --help for the flags.\n",
                 app.get_name().c_str(), e.what());
    return 2;
  }
  return std::nullopt;
}

}  // namespace trl

#endif  // TRL_COMMON_CLI_ERRORS_H_
