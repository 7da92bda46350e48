// cuGraphAddNode (all three ABIs): the generic way to add a graph node, which can add a memory
// allocation node (CU_GRAPH_NODE_TYPE_MEM_ALLOC) as cuGraphAddMemAllocNode does. Such a node
// is remembered exactly as memory_hooks.cpp remembers cuGraphAddMemAllocNode's, so that an
// executable graph made from it reserves what it may allocate before its launch and the graph
// allocator is charged for what it maps (pools.cpp). Other node types pass through.

#include "runtime.h"

using namespace vgpu;

namespace {

template <class F>
CUresult addNode(CUgraphNode* phGraphNode, CUgraph hGraph, CUgraphNodeParams* params, F&& add) {
  CUresult rc = add();
  if (rc != CUDA_SUCCESS || params == nullptr || phGraphNode == nullptr ||
      params->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
    return rc;
  }
  const CUDA_MEM_ALLOC_NODE_PARAMS& alloc = params->alloc;
  int dev = alloc.poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? alloc.poolProps.location.id
                                                                          : currentDevice();
  // Nothing is taken until a graph instantiated from this one runs.
  if (dev >= 0 && dev < kLimiterMaxDevices) {
    Record rec;
    rec.dev = dev;
    rec.bytes = alloc.bytesize;
    rec.owner = reinterpret_cast<uintptr_t>(hGraph);
    ledger::put(Kind::kGraphNode, reinterpret_cast<uintptr_t>(*phGraphNode), rec);
  }
  return rc;
}

}  // namespace

extern "C" {

CUresult cuGraphAddNode(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies,
                        size_t numDependencies, CUgraphNodeParams* nodeParams) {
  VGPU_ENTER_CUDA(cuGraphAddNode);
  return addNode(phGraphNode, hGraph, nodeParams, [&] {
    return real::cuGraphAddNode(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
  });
}

CUresult cuGraphAddNode_v2(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies,
                           const CUgraphEdgeData* dependencyData, size_t numDependencies,
                           CUgraphNodeParams* nodeParams) {
  VGPU_ENTER_CUDA(cuGraphAddNode_v2);
  return addNode(phGraphNode, hGraph, nodeParams, [&] {
    return real::cuGraphAddNode_v2(phGraphNode, hGraph, dependencies, dependencyData, numDependencies, nodeParams);
  });
}

CUresult cuGraphAddNode_v3(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies,
                           const CUgraphEdgeData* dependencyData, size_t numDependencies,
                           CUgraphNodeParams* nodeParams) {
  VGPU_ENTER_CUDA(cuGraphAddNode_v3);
  return addNode(phGraphNode, hGraph, nodeParams, [&] {
    return real::cuGraphAddNode_v3(phGraphNode, hGraph, dependencies, dependencyData, numDependencies, nodeParams);
  });
}

}  // extern "C"
