// The hooked families: one function per family, shared by all its ABI and
// stream variants (the Entry says which variant was called, hence which real
// function and which default stream). Generated exports call these; each
// signature must match the CUDA typedef of its variants (the compiler checks).
// Used by hook/ only.
#pragma once

#include <cuda.h>

#include "interpose/entry_table.h"

namespace msched::hook {

// lookup_hooks.cc
CUresult Hook_cuGetProcAddress(Entry e, const char* symbol, void** pfn, int version, cuuint64_t flags);
CUresult Hook_cuGetProcAddress(Entry e, const char* symbol, void** pfn, int version, cuuint64_t flags,
                               CUdriverProcAddressQueryResult* status);

// alloc_hooks.cc
CUresult Hook_cuMemAlloc(Entry e, CUdeviceptr_v2* dptr, size_t bytesize);
CUresult Hook_cuMemAllocPitch(Entry e, CUdeviceptr_v2* dptr, size_t* pitch, size_t width, size_t height,
                              unsigned int element_size);
CUresult Hook_cuMemFree(Entry e, CUdeviceptr_v2 dptr);
CUresult Hook_cuMemAllocManaged(Entry e, CUdeviceptr_v2* dptr, size_t bytesize, unsigned int flags);
CUresult Hook_cuMemAllocAsync(Entry e, CUdeviceptr_v2* dptr, size_t bytesize, CUstream stream);
CUresult Hook_cuMemAllocFromPoolAsync(Entry e, CUdeviceptr_v2* dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream stream);
CUresult Hook_cuMemFreeAsync(Entry e, CUdeviceptr_v2 dptr, CUstream stream);
CUresult Hook_cuMemPoolTrimTo(Entry e, CUmemoryPool pool, size_t min_bytes_to_keep);
CUresult Hook_cuMemPoolCreate(Entry e, CUmemoryPool* pool, const CUmemPoolProps_v1* props);
CUresult Hook_cuMemPoolDestroy(Entry e, CUmemoryPool pool);
CUresult Hook_cuMemGetInfo(Entry e, size_t* free, size_t* total);

// vmm_hooks.cc
CUresult Hook_cuMemCreate(Entry e, CUmemGenericAllocationHandle_v1* handle, size_t size,
                          const CUmemAllocationProp_v1* prop, unsigned long long flags);
CUresult Hook_cuMemRelease(Entry e, CUmemGenericAllocationHandle_v1 handle);
CUresult Hook_cuMemMap(Entry e, CUdeviceptr_v2 ptr, size_t size, size_t offset, CUmemGenericAllocationHandle_v1 handle,
                       unsigned long long flags);
CUresult Hook_cuMemUnmap(Entry e, CUdeviceptr_v2 ptr, size_t size);
CUresult Hook_cuMemSetAccess(Entry e, CUdeviceptr_v2 ptr, size_t size, const CUmemAccessDesc_v1* desc, size_t count);
CUresult Hook_cuMemRetainAllocationHandle(Entry e, CUmemGenericAllocationHandle_v1* handle, void* addr);
CUresult Hook_cuMemExportToShareableHandle(Entry e, void* shareable, CUmemGenericAllocationHandle_v1 handle,
                                           CUmemAllocationHandleType type, unsigned long long flags);
CUresult Hook_cuMemImportFromShareableHandle(Entry e, CUmemGenericAllocationHandle_v1* handle, void* os_handle,
                                             CUmemAllocationHandleType type);
CUresult Hook_cuMemGetAllocationPropertiesFromHandle(Entry e, CUmemAllocationProp_v1* prop,
                                                     CUmemGenericAllocationHandle_v1 handle);

// pinned_memory_hooks.cc
CUresult Hook_cuIpcOpenMemHandle(Entry e, CUdeviceptr_v2* pdptr, CUipcMemHandle_v1 handle, unsigned int flags);
CUresult Hook_cuIpcCloseMemHandle(Entry e, CUdeviceptr_v2 dptr);
CUresult Hook_cuIpcGetMemHandle(Entry e, CUipcMemHandle_v1* handle, CUdeviceptr_v2 dptr);

// launch_hooks.cc
CUresult Hook_cuLaunchKernel(Entry e, CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                             unsigned int by, unsigned int bz, unsigned int shared, CUstream stream, void** params,
                             void** extra);
CUresult Hook_cuLaunchKernelEx(Entry e, const CUlaunchConfig* config, CUfunction f, void** params, void** extra);
CUresult Hook_cuLaunchCooperativeKernel(Entry e, CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                                        CUstream stream, void** params);

// graph_hooks.cc
CUresult Hook_cuGraphInstantiateWithFlags(Entry e, CUgraphExec* exec, CUgraph graph, unsigned long long flags);
CUresult Hook_cuGraphInstantiateWithParams(Entry e, CUgraphExec* exec, CUgraph graph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS* params);
CUresult Hook_cuGraphLaunch(Entry e, CUgraphExec exec, CUstream stream);
CUresult Hook_cuGraphExecDestroy(Entry e, CUgraphExec exec);
CUresult Hook_cuGraphDestroy(Entry e, CUgraph graph);

// copy_hooks.cc
CUresult Hook_cuMemcpy(Entry e, CUdeviceptr_v2 dst, CUdeviceptr_v2 src, size_t bytes);
CUresult Hook_cuMemcpyAsync(Entry e, CUdeviceptr_v2 dst, CUdeviceptr_v2 src, size_t bytes, CUstream stream);
CUresult Hook_cuMemcpyHtoD(Entry e, CUdeviceptr_v2 dst, const void* src, size_t bytes);
CUresult Hook_cuMemcpyDtoH(Entry e, void* dst, CUdeviceptr_v2 src, size_t bytes);
CUresult Hook_cuMemcpyDtoD(Entry e, CUdeviceptr_v2 dst, CUdeviceptr_v2 src, size_t bytes);
CUresult Hook_cuMemcpyHtoDAsync(Entry e, CUdeviceptr_v2 dst, const void* src, size_t bytes, CUstream stream);
CUresult Hook_cuMemcpyDtoHAsync(Entry e, void* dst, CUdeviceptr_v2 src, size_t bytes, CUstream stream);
CUresult Hook_cuMemcpyDtoDAsync(Entry e, CUdeviceptr_v2 dst, CUdeviceptr_v2 src, size_t bytes, CUstream stream);
CUresult Hook_cuMemsetD8(Entry e, CUdeviceptr_v2 dst, unsigned char value, size_t n);
CUresult Hook_cuMemsetD16(Entry e, CUdeviceptr_v2 dst, unsigned short value, size_t n);
CUresult Hook_cuMemsetD32(Entry e, CUdeviceptr_v2 dst, unsigned int value, size_t n);
CUresult Hook_cuMemsetD8Async(Entry e, CUdeviceptr_v2 dst, unsigned char value, size_t n, CUstream stream);
CUresult Hook_cuMemsetD16Async(Entry e, CUdeviceptr_v2 dst, unsigned short value, size_t n, CUstream stream);
CUresult Hook_cuMemsetD32Async(Entry e, CUdeviceptr_v2 dst, unsigned int value, size_t n, CUstream stream);

// sync_hooks.cc
CUresult Hook_cuCtxSynchronize(Entry e);
CUresult Hook_cuCtxSynchronize(Entry e, CUcontext ctx);
CUresult Hook_cuStreamSynchronize(Entry e, CUstream stream);
CUresult Hook_cuEventSynchronize(Entry e, CUevent event);
CUresult Hook_cuStreamBeginCapture(Entry e, CUstream stream, CUstreamCaptureMode mode);
CUresult Hook_cuStreamEndCapture(Entry e, CUstream stream, CUgraph* graph);

}  // namespace msched::hook
