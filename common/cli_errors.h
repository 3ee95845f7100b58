// Uniform handling of command-line parse results for the daemons: help
// exits 0, a bad flag exits 2 with CLI11's message, as every other bad input.
#ifndef TRL_COMMON_CLI_ERRORS_H_
#define TRL_COMMON_CLI_ERRORS_H_

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace trl {

// Runs `parse` (app.parse with some arguments); returns the exit code to
// leave with (help printed: 0; a parse error printed: 2), or nothing to go
// on.
template <typename Parse>
std::optional<int> ExitCodeOfParse(CLI::App& app, Parse parse) {
  try {
    parse();
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

// Parses; returns the exit code to leave with, or nothing to go on.
inline std::optional<int> ParseCommandLine(CLI::App& app, int argc,
                                           char** argv) {
  return ExitCodeOfParse(app, [&] { app.parse(argc, argv); });
}

// For a subcommand that takes a command after its flags (CLI11's
// prefix_command): parses, and sets `command` to what follows the flags. A
// `--` before the command ends the flags (CLI11 2.1 mistakes it inside a
// subcommand); a `--` or a flag after the command's first word belongs to
// the command. A flag-looking first word (a flag neither trl-launch nor
// `accelerate launch` has) is refused, exit 2: it would run as the command.
inline std::optional<int> ParseCommandLineWithCommand(
    CLI::App& app, CLI::App& sub, int argc, char** argv,
    std::vector<std::string>* command) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parse = [&](size_t count) -> std::optional<int> {
    std::vector<std::string> reversed(args.rend() - count, args.rend());
    return ExitCodeOfParse(app, [&] { app.parse(reversed); });
  };
  command->clear();
  const auto marker = std::find(args.begin(), args.end(), "--");
  if (marker != args.end()) {
    const size_t before = static_cast<size_t>(marker - args.begin());
    if (auto exit_code = parse(before)) return exit_code;
    if (sub.parsed() && sub.remaining().empty()) {
      command->assign(marker + 1, args.end());
      return std::nullopt;
    }
    // The `--` came after the command's first word: it is the command's.
  }
  if (auto exit_code = parse(args.size())) return exit_code;
  if (!sub.parsed()) return std::nullopt;
  *command = sub.remaining();
  if (!command->empty() && command->front().size() > 1 &&
      command->front()[0] == '-') {
    std::fprintf(stderr,
                 "%s %s: error: unknown flag '%s': neither trl-launch nor "
                 "`accelerate launch` has it (the command starts at the "
                 "first argument that is not a flag, or after `--`)\n"
                 "Run with --help for the flags.\n",
                 app.get_name().c_str(), sub.get_name().c_str(),
                 command->front().c_str());
    return 2;
  }
  return std::nullopt;
}

}  // namespace trl

#endif  // TRL_COMMON_CLI_ERRORS_H_
