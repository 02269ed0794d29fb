#pragma once
// One subcommand of the command line. Each lives in its own file in src/cli/ (analyze.cc,
// import.cc, run.cc, report.cc, gate.cc for compare and check), defines its factory there, and is
// listed once in src/cli/commands.inc, which fixes the order `overlapprof --help` shows them in.
// main.cc knows no subcommand by name.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "src/cli/command.h"

namespace overlapprof {

class Subcommand {
 public:
  virtual ~Subcommand() = default;
  // The word on the command line ("analyze").
  virtual std::string_view name() const = 0;
  // One line, shown by `overlapprof --help` and above the subcommand's own help.
  virtual std::string_view description() const = 0;
  // The usage line as the subcommand is really called, after "Usage: overlapprof " (CLI11 cannot
  // show `run`'s "--" or check's required --baseline).
  virtual std::string_view usage() const = 0;
  // Declares the subcommand's positionals and options on `app` (its own CLI11 app), bound to
  // members of this object; called once, before the command line is parsed.
  virtual void AddOptions(CLI::App& app) = 0;
  // True when everything after the first "--" is the subcommand's (run's CMD ARGS), passed on
  // untouched instead of being parsed.
  virtual bool takes_command_after_dashes() const { return false; }
  // Runs the subcommand once its options are parsed; `after_dashes`: what followed "--" when
  // takes_command_after_dashes(), else empty.
  virtual CommandResult Run(const std::vector<std::string>& after_dashes) = 0;
};

}  // namespace overlapprof
