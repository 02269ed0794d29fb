// The index walker (index_walk.h).
#include "src/importers/kineto/index_walk.h"

#include <simdjson.h>

#include <memory>
#include <string_view>

namespace overlapprof {
namespace kineto {

struct StructuralIndexer::Impl {
  std::unique_ptr<simdjson::internal::dom_parser_implementation> stage1;
};

StructuralIndexer::StructuralIndexer() : impl_(std::make_unique<Impl>()) {}
StructuralIndexer::~StructuralIndexer() = default;

std::unique_ptr<StructuralIndexer> StructuralIndexer::Make(int mode) {
  const simdjson::implementation* impl = simdjson::get_active_implementation();
  const bool on = mode > 0 || (mode < 0 && impl->name() != "fallback");
  if (!on) return nullptr;
  std::unique_ptr<StructuralIndexer> s(new StructuralIndexer());
  if (impl->create_dom_parser_implementation(0, simdjson::DEFAULT_MAX_DEPTH, s->impl_->stage1) != simdjson::SUCCESS)
    return nullptr;
  return s;
}

bool StructuralIndexer::Reserve(size_t n) {
  capacity_ = n;
  return impl_->stage1->set_capacity(n) == simdjson::SUCCESS;
}

bool StructuralIndexer::Index(const char* t, size_t n, IxTokens* out) {
  simdjson::internal::dom_parser_implementation& p = *impl_->stage1;
  if (p.stage1(reinterpret_cast<const uint8_t*>(t), n, simdjson::stage1_mode::regular) != simdjson::SUCCESS)
    return false;
  *out = IxTokens{t, p.structural_indexes.get(), p.n_structural_indexes};
  return true;
}

}  // namespace kineto

}  // namespace overlapprof
