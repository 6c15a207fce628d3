// The driver's entry-point table, generated from the CUDA headers: every
// (base name, ABI version, stream flavour) the simulated driver answers
// cuGetProcAddress with. Immutable; thread-safe. Used by sim/ only.
#pragma once

#include <cstddef>
#include <string_view>

namespace msim {

struct ProcEntry {
  const char* base;
  int version;
  int flavour;  // 0 default, 1 _ptsz, 2 _ptds
  void* fn;
};

const ProcEntry* ProcEntries(size_t* count);

// Counts a call to an entry point the simulator does not implement and
// returns CUDA_ERROR_NOT_SUPPORTED (as an int: this header is cuda.h-free).
int Unsupported(const char* name);

// The CUresult named `name` ("CUDA_ERROR_OUT_OF_MEMORY"), from the same
// generated table as cuGetErrorName; false when there is none.
bool ErrorByName(std::string_view name, int* value);

}  // namespace msim
