// overlapprof command line: defines every subcommand listed in src/cli/commands.inc (each one
// file in src/cli/ that declares its own options, src/cli/subcommand.h) and runs the one parsed.
// Every failure ends in one line on stderr and an exit code from src/common/exit_codes.h, mapped
// in one place (ExitCodeOf); nothing is allowed to escape as an uncaught exception.
#include <malloc.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "overlapprof/git_revision.h"
#include "overlapprof/version.h"
#include "src/cli/command.h"
#include "src/cli/subcommand.h"
#include "src/common/memory.h"

namespace overlapprof {

#define OVERLAPPROF_COMMAND(factory) std::unique_ptr<Subcommand> factory();
#include "src/cli/commands.inc"
#undef OVERLAPPROF_COMMAND

namespace {

// Every subcommand, in src/cli/commands.inc's order.
std::vector<std::unique_ptr<Subcommand>> MakeCommands() {
  std::vector<std::unique_ptr<Subcommand>> v;
#define OVERLAPPROF_COMMAND(factory) v.push_back(factory());
#include "src/cli/commands.inc"
#undef OVERLAPPROF_COMMAND
  return v;
}

// Help: each subcommand's usage line as it is really called (Subcommand::usage).
class Formatter : public CLI::Formatter {
 public:
  explicit Formatter(const std::vector<std::unique_ptr<Subcommand>>& commands) : commands_(commands) {}
  std::string make_usage(const CLI::App* app, std::string name) const override {
    for (const auto& c : commands_)
      if (app->get_name() == c->name()) return "Usage: overlapprof " + std::string(c->usage()) + "\n";
    return CLI::Formatter::make_usage(app, std::move(name));
  }

 private:
  const std::vector<std::unique_ptr<Subcommand>>& commands_;
};

int Main(int argc, char** argv) {
  CLI::App app{"overlapprof: how well communication is hidden behind computation in distributed training"};
  app.set_version_flag("-V,--version", std::string("overlapprof ") + kToolVersion + " (git " + kGitRevision + ")",
                       "print the version and the git revision it was built from, then exit");
  app.require_subcommand(1);

  std::vector<std::unique_ptr<Subcommand>> commands = MakeCommands();
  app.formatter(std::make_shared<Formatter>(commands));  // before the subcommands: they copy it
  std::vector<std::pair<Subcommand*, CLI::App*>> apps;
  for (const auto& c : commands) {
    CLI::App* sub = app.add_subcommand(std::string(c->name()), std::string(c->description()));
    c->AddOptions(*sub);
    apps.emplace_back(c.get(), sub);
  }
  // Before the subcommand only --help and --version are options: any other is unknown (CLI11
  // would say a subcommand is required, or that the argument was not expected).
  if (argc > 1 && argv[1][0] == '-') {
    const std::string_view first = argv[1];
    if (first != "-h" && first != "--help" && first != "--version" && first != "-V")
      return ExitCodeOf(MakeError(StatusCode::kInvalidArgument,
                                  "unknown option '{}' (before the command only --help and --version; see "
                                  "overlapprof --help)",
                                  first));
  }
  // A first word that is no option and no subcommand: name them all.
  const Subcommand* named = nullptr;
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    for (const auto& c : commands) {
      if (c->name() == argv[1]) named = c.get();
      names += (names.empty() ? "" : ", ") + std::string(c->name());
    }
    if (!named)
      return ExitCodeOf(MakeError(StatusCode::kInvalidArgument,
                                  "unknown command '{}' (commands: {}; see overlapprof --help)", argv[1], names));
  }
  // `run ... -- CMD ARGS`: everything after the first "--" is the command, untouched.
  std::vector<std::string> after_dashes;
  if (named && named->takes_command_after_dashes()) {
    for (int i = 2; i < argc; ++i) {
      if (std::string_view(argv[i]) == "--") {
        after_dashes.assign(argv + i + 1, argv + argc);
        argc = i;
        break;
      }
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return ExitCodeOf(MakeError(StatusCode::kInvalidArgument, "{} (see overlapprof --help)", e.what()));
  }
  for (auto& [command, sub] : apps)
    if (sub->parsed()) return ExitCodeOf(command->Run(after_dashes));
  return ExitCodeOf(MakeError(StatusCode::kInvalidArgument, "no command given (see overlapprof --help)"));
}

}  // namespace
}  // namespace overlapprof

int main(int argc, char** argv) {
  // Ranks are processed one after another with buffers of similar size (RankTrace
  // vectors, timeline sets, chunk reads: tens to hundreds of MB). Serve them from the
  // heap and keep freed memory there for the next rank, instead of mmap/munmap per
  // allocation, which would fault every page in again for every rank (the minor faults
  // measured: docs/performance.md). Buffers over 1 GiB are still mapped.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // Ranks are read and prepared on worker threads (-j): one arena, so that what one rank freed
  // serves the next whichever thread has it (a thread's own arena maps its large blocks apart and
  // unmaps them when freed), and the heap below is the only one.
  mallopt(M_ARENA_MAX, 1);
  // Huge pages under the heap the ranks fill (interval unions, op records, the JSON summary's rows):
  // a first rank's ~100 MB then take a few hundred page faults instead of ~25,000 (src/common/memory.h).
  overlapprof::AdviseHugePagesForHeap(size_t{768} << 20);
  try {
    return overlapprof::Main(argc, argv);
  } catch (const std::bad_alloc&) {
    return overlapprof::ExitCodeOf(overlapprof::MakeError(overlapprof::StatusCode::kInternal, "out of memory"));
  } catch (const std::exception& e) {
    return overlapprof::ExitCodeOf(
        overlapprof::MakeError(overlapprof::StatusCode::kInternal, "internal error: {}", e.what()));
  }
}
