#include "interpose/entry_table.h"

#include <cstring>
#include <unordered_map>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "interpose/real_driver.h"
#include "msched/no_destructor.h"

namespace msched::hook {
namespace {

constexpr EntryInfo kInfo[] = {
#define MSCHED_HOOK_ENTRY(sym, base, ver, flavour, pfn, params, args, tail) {#sym, #base, ver, flavour},
#include "hook_entries.inc"
#undef MSCHED_HOOK_ENTRY
};

struct Table {
  Mutex mu;
  std::atomic<bool> filled{false};
  std::atomic<void*> real[kEntryCount] = {};
  std::unordered_map<void*, Entry> by_real MSCHED_GUARDED_BY(mu);
};

Table& T() {
  static NoDestructor<Table> t;  // wrappers may run during exit
  return *t;
}

// Fills every slot from the real driver's exported symbols, once the driver
// is loaded. Never calls into CUDA: dlsym only.
void Fill() {
  Table& t = T();
  if (t.filled.load(std::memory_order_acquire)) return;
  void* driver = RealDriverHandle();
  if (driver == nullptr) return;
  MutexLock lock(&t.mu);
  if (t.filled.load(std::memory_order_relaxed)) return;
  for (size_t i = 0; i < kEntryCount; ++i) {
    void* fn = RealDlsym(driver, kInfo[i].symbol);
    if (fn == nullptr) continue;
    t.real[i].store(fn, std::memory_order_relaxed);
    t.by_real.emplace(fn, static_cast<Entry>(i));
  }
  t.filled.store(true, std::memory_order_release);
}

}  // namespace

const EntryInfo& Info(Entry e) { return kInfo[static_cast<size_t>(e)]; }

void* RealOf(Entry e) {
  Fill();
  return T().real[static_cast<size_t>(e)].load(std::memory_order_acquire);
}

bool EntryOfReal(void* fn, Entry* out) {
  if (fn == nullptr) return false;
  Fill();
  Table& t = T();
  MutexLock lock(&t.mu);
  auto it = t.by_real.find(fn);
  if (it == t.by_real.end()) return false;
  *out = it->second;
  return true;
}

void NoteRealPointer(Entry e, void* fn) {
  if (fn == nullptr) return;
  Table& t = T();
  MutexLock lock(&t.mu);
  t.by_real.emplace(fn, e);
  void* expected = nullptr;
  t.real[static_cast<size_t>(e)].compare_exchange_strong(expected, fn);
}

bool EntryOfSymbol(const char* symbol, Entry* out) {
  if (symbol == nullptr || symbol[0] != 'c' || symbol[1] != 'u') return false;
  for (size_t i = 0; i < kEntryCount; ++i) {
    if (std::strcmp(kInfo[i].symbol, symbol) == 0) {
      *out = static_cast<Entry>(i);
      return true;
    }
  }
  return false;
}

}  // namespace msched::hook
