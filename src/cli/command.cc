#include "src/cli/command.h"

#include <cstdio>

#include "src/common/utf8.h"

namespace overlapprof {

int ExitCodeOf(const CommandResult& result) {
  if (result.ok()) return result->exit_code();
  const Status st = result.status();
  std::string line = st.message();
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  line = EscapeForTerminal(line);  // a path or name in it may hold terminal escapes
  std::fprintf(stderr, "overlapprof: error: %s\n", line.c_str());
  return st.code() == StatusCode::kInternal ? kExitInternal : kExitUsageOrInput;
}

StatusOr<int> ParseTsUnit(const std::string& unit) {
  if (unit == "us") return 3;
  if (unit == "ns") return 0;
  return MakeError(StatusCode::kInvalidArgument, "--ts-unit must be us or ns, not '{}'", unit);
}

Outcome DataQualityOutcome(const Summary& summary, const char* what_it_means) {
  const int errors = summary.ErrorCounters();
  if (errors == 0) return Outcome::Ok();
  std::fprintf(stderr, "overlapprof: error: %d data-quality counter(s) of severity error are set: %s\n", errors,
               what_it_means);
  return Outcome::DataLost();
}

StatusOr<std::shared_ptr<const CommPatterns>> MakeCommPatterns(const std::vector<std::string>& comm_kernel,
                                                               const std::vector<std::string>& not_comm) {
  if (comm_kernel.empty() && not_comm.empty()) return std::shared_ptr<const CommPatterns>();
  return CommPatterns::Make(comm_kernel, not_comm);
}

}  // namespace overlapprof
