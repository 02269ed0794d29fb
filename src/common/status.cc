#include "src/common/status.h"

namespace overlapprof {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kInvalidInput: return "invalid input";
    case StatusCode::kUnsupportedVersion: return "unsupported version";
    case StatusCode::kCorrupt: return "corrupt";
    case StatusCode::kIo: return "i/o error";
    case StatusCode::kInternal: return "internal error";
  }
  return "unknown";
}

}  // namespace overlapprof
