// NVTX ranges, entered through NVTX_INJECTION64_PATH: the NVTX headers in the application
// (PyTorch's emit_nvtx, user code) load this library on their first NVTX call and call
// InitializeInjectionNvtx2, where we fill the core module's function table. Push/pop and
// start/end ranges and markers become hook records; the writer pairs them (sink.cc). Names
// are copied inline (records.h), truncated past kInlineNameBytes - 1 bytes and counted.
// Unicode and registered-string messages are recorded with a placeholder name. Range ids
// and counters are the recorder's (recorder.h): this file has no state of its own.
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cstring>

#include "injector/injector.h"

namespace overlapprof::inject {
namespace {

void FillName(HookRecord* r, const char* s) {
  if (!s) return;
  size_t n = strnlen(s, kInlineNameBytes);
  if (n >= static_cast<size_t>(kInlineNameBytes)) {
    n = kInlineNameBytes - 1;
    // Cut on a UTF-8 character boundary: while the first byte left out is a continuation
    // byte (10xxxxxx), the cut is inside a character; leave out its leading bytes too.
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    r->flags |= kFlagTruncated;
    Count(Stat::nvtx_names_truncated);
  }
  std::memcpy(r->range.name, s, n);
  r->range.name[n] = '\0';
}

void FillAttrName(HookRecord* r, const nvtxEventAttributes_t* a) {
  if (!a) return;
  if (a->messageType == NVTX_MESSAGE_TYPE_ASCII) FillName(r, a->message.ascii);
  else if (a->messageType == NVTX_MESSAGE_TYPE_UNICODE) FillName(r, "(unicode NVTX message)");
  else if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED) FillName(r, "(registered NVTX string)");
}

HookRecord Make(RecKind kind) {
  HookRecord r;
  r.kind = kind;
  r.tid = Tid();
  r.t_enter = r.t_exit = NowNs();
  return r;
}

int NVTX_API PushA(const char* message) {
  if (!Recording()) return 0;
  HookRecord r = Make(RecKind::kRangePush);
  FillName(&r, message);
  Push(r);
  return 0;
}
int NVTX_API PushEx(const nvtxEventAttributes_t* a) {
  if (!Recording()) return 0;
  HookRecord r = Make(RecKind::kRangePush);
  FillAttrName(&r, a);
  Push(r);
  return 0;
}
int NVTX_API Pop() {
  if (!Recording()) return 0;
  Push(Make(RecKind::kRangePop));
  return 0;
}
nvtxRangeId_t NVTX_API StartA(const char* message) {
  if (!Recording()) return 0;
  HookRecord r = Make(RecKind::kRangeStart);
  r.range.id = g_recorder.NextRangeId();
  FillName(&r, message);
  Push(r);
  return r.range.id;
}
nvtxRangeId_t NVTX_API StartEx(const nvtxEventAttributes_t* a) {
  if (!Recording()) return 0;
  HookRecord r = Make(RecKind::kRangeStart);
  r.range.id = g_recorder.NextRangeId();
  FillAttrName(&r, a);
  Push(r);
  return r.range.id;
}
void NVTX_API End(nvtxRangeId_t id) {
  if (!Recording()) return;
  HookRecord r = Make(RecKind::kRangeEnd);
  r.range.id = id;
  Push(r);
}
void NVTX_API MarkA(const char* message) {
  if (!Recording()) return;
  HookRecord r = Make(RecKind::kMark);
  FillName(&r, message);
  Push(r);
}
void NVTX_API MarkEx(const nvtxEventAttributes_t* a) {
  if (!Recording()) return;
  HookRecord r = Make(RecKind::kMark);
  FillAttrName(&r, a);
  Push(r);
}

int Install(NvtxGetExportTableFunc_t get_export_table) {
  if (!get_export_table) return 0;
  auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (!callbacks || !callbacks->GetModuleFunctionTable) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) || !table) return 0;
  auto set = [&](unsigned int cbid, auto fn) {
    if (cbid < size && table[cbid]) *table[cbid] = reinterpret_cast<NvtxFunctionPointer>(fn);
  };
  set(NVTX_CBID_CORE_MarkEx, MarkEx);
  set(NVTX_CBID_CORE_MarkA, MarkA);
  set(NVTX_CBID_CORE_RangeStartEx, StartEx);
  set(NVTX_CBID_CORE_RangeStartA, StartA);
  set(NVTX_CBID_CORE_RangeEnd, End);
  set(NVTX_CBID_CORE_RangePushEx, PushEx);
  set(NVTX_CBID_CORE_RangePushA, PushA);
  set(NVTX_CBID_CORE_RangePop, Pop);
  return 1;
}

}  // namespace
}  // namespace overlapprof::inject

// Called by the NVTX headers in the application when NVTX_INJECTION64_PATH names this
// library. Returns 1 when the hooks are installed, 0 to leave NVTX as no-ops.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t f) {
  try {
    return overlapprof::inject::Install(f);
  } catch (...) {
    return 0;
  }
}
