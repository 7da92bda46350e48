// cuGraphAddNode (CUDA 12.2) and cuGraphAddNode_v2 (12.3, with edge data) in the fake: the
// generic way to add a node. The fake supports the memory allocation node, made exactly as
// cuGraphAddMemAllocNode makes it (the allocation's address is written back into the
// parameters); other node types give CUDA_ERROR_NOT_SUPPORTED. Edge data must be all zero,
// the default edge, as the driver API reference requires for non-kernel nodes.

#include <cstring>

#include "driver.h"

namespace vgpu::fakegpu {
namespace {

CUresult addNode(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* deps, const CUgraphEdgeData* edges,
                 size_t nDeps, CUgraphNodeParams* params) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; edges != nullptr && i < nDeps; ++i) {
    static const CUgraphEdgeData kDefault = {};
    if (std::memcmp(&edges[i], &kDefault, sizeof kDefault) != 0) return CUDA_ERROR_INVALID_VALUE;
  }
  if (params->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) return CUDA_ERROR_NOT_SUPPORTED;
  CUDA_MEM_ALLOC_NODE_PARAMS alloc = params->alloc;
  CUresult r = cuGraphAddMemAllocNode(phGraphNode, hGraph, deps, nDeps, &alloc);
  if (r == CUDA_SUCCESS) params->alloc.dptr = alloc.dptr;
  return r;
}

}  // namespace
}  // namespace vgpu::fakegpu

extern "C" {

CUresult cuGraphAddNode(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies,
                        size_t numDependencies, CUgraphNodeParams* nodeParams) {
  return vgpu::fakegpu::addNode(phGraphNode, hGraph, dependencies, nullptr, numDependencies, nodeParams);
}

CUresult cuGraphAddNode_v2(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies,
                           const CUgraphEdgeData* dependencyData, size_t numDependencies,
                           CUgraphNodeParams* nodeParams) {
  return vgpu::fakegpu::addNode(phGraphNode, hGraph, dependencies, dependencyData, numDependencies, nodeParams);
}

}  // extern "C"
