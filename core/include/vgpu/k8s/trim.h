#pragma once
// What vgpu's daemons keep of the pods and nodes their informers mirror: the fields that
// parsePod, the scheduler's cache, requeuer and binder, and the node agent read, and no
// more. A pod as the apiserver sends it carries managedFields, the last applied
// configuration, images, env, probes, volumes and conditions (~20 KiB, ~20x what is read);
// at 50,000 pods that is the difference between a gigabyte and tens of megabytes.
//
// A field left out here reads as absent to every reader, which is a silent correctness
// bug: whoever reads a new field of a cached pod or node adds it here and to trim_test.

#include <boost/json/object.hpp>

namespace vgpu::k8s {

/// Kept: metadata name, namespace, uid, resourceVersion, creationTimestamp (the agent's),
/// deletionTimestamp and annotations (all but kubectl's last-applied copy: vendor backends
/// read their own); spec nodeName, schedulerName, priority; of each container and init
/// container its name, restartPolicy (sidecars) and the extended resources (names with a
/// '/') of its requests and limits; status phase; the container statuses' and init container
/// statuses' name and containerID (the scheduler asks whether there are any; the agent's
/// watchdog matches processes to containers by the id), the init container statuses' state
/// too (the agent reads exit codes). Dropped among others: labels (no reader of a cached pod),
/// managedFields, ownerReferences, images, env, volumes, probes, conditions.
/// The result owns fresh storage (the default resource), whatever `pod`'s was.
boost::json::object trimPod(const boost::json::object& pod);

/// What identifies a pod and where it runs, for a store whose owner keeps the rest
/// elsewhere: metadata name, namespace, uid, resourceVersion; spec nodeName.
boost::json::object podStub(const boost::json::object& pod);

/// Kept: metadata name, uid, resourceVersion, annotations (all but kubectl's
/// last-applied copy). Nothing reads a node's labels, spec or status.
boost::json::object trimNode(const boost::json::object& node);

}  // namespace vgpu::k8s
