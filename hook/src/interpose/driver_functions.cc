#include "interpose/driver_functions.h"

#include <string>
#include <type_traits>

#include "interpose/real_driver.h"

namespace msched::hook {
namespace {

template <typename Fn>
void Resolve(void* driver, const char* symbol, Fn* slot) {
  *slot = reinterpret_cast<Fn>(RealDlsym(driver, symbol));
}

DriverFunctions ResolveAll() {
  DriverFunctions t;
  void* driver = RealDriverHandle();  // first: loading the driver may call back into the hook
  if (driver == nullptr) return t;    // every slot null, as with a driver that lacks them
#define MSCHED_DRIVER_FUNCTION(sym, base, ver, pfn) Resolve(driver, #sym, &t.sym);
#define MSCHED_DRIVER_FUNCTION_HOOKED(sym, base, ver, pfn) t.sym = Real<pfn>(Entry::sym);
#include "driver_functions.inc"
#undef MSCHED_DRIVER_FUNCTION
#undef MSCHED_DRIVER_FUNCTION_HOOKED
  return t;
}

}  // namespace

// Function pointers only: nothing runs at exit, so calls made during exit
// still find the table.
static_assert(std::is_trivially_destructible_v<DriverFunctions>);

const DriverFunctions& RealDriver() {
  static const DriverFunctions table = ResolveAll();
  return table;
}

Status CheckDriverCall(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return Status::Ok();
  std::string why = std::string(what) + " failed with CUresult " + std::to_string(r);
  return r == CUDA_ERROR_OUT_OF_MEMORY ? Status::ResourceExhausted(std::move(why))
                                       : Status::Unavailable(std::move(why));
}

}  // namespace msched::hook
