/*
 * The stable C boundary between vgpu and a backend shared library.
 *
 * A backend is `libvgpu-backend-<name>.so` exporting one function, VGPU_BACKEND_ENTRY,
 * that fills a vgpu_backend_table for the loader's ABI version. Only C types cross this
 * boundary: no C++ objects, exceptions or allocations owned by the other side. Strings and
 * arrays passed in either direction are valid only for the duration of the call (or the
 * callback) that carries them; whoever keeps them copies them.
 *
 * Versioning: major<<16 | minor. A major change breaks the table; a minor change only
 * appends slots (1.1: vgpu_container_grant.pod_uid and the container_usage slot; 1.2: the
 * spec sink's notice; 1.3: the protected_env and device_processes slots; 1.4: vgpu_device's
 * links; 1.5: the fit_reads slot; 1.6: the places and fit_placed slots, vgpu_grant's
 * placement; 1.7: the spec sink's region; 1.8: the spec sink's hook; 1.9: the cgroup_memory_used
 * slot; 1.10: the split_count slot). Every
 * struct the caller fills starts with its own size so that either side can tell which
 * fields the other knows. A null optional slot means "not supported".
 * See docs/writing-a-backend.md.
 */
#ifndef VGPU_BACKEND_ABI_H
#define VGPU_BACKEND_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VGPU_BACKEND_ABI_MAJOR 1u
#define VGPU_BACKEND_ABI_MINOR 10u
#define VGPU_BACKEND_ABI_VERSION ((VGPU_BACKEND_ABI_MAJOR << 16) | VGPU_BACKEND_ABI_MINOR)
#define VGPU_ABI_MAJOR_OF(v) ((uint32_t)(v) >> 16)
#define VGPU_ABI_MINOR_OF(v) ((uint32_t)(v)&0xffffu)

/* The one symbol a backend exports. */
#define VGPU_BACKEND_ENTRY vgpu_backend_entry
#define VGPU_BACKEND_ENTRY_NAME "vgpu_backend_entry"

#if defined(__GNUC__)
#define VGPU_BACKEND_EXPORT __attribute__((visibility("default")))
#else
#define VGPU_BACKEND_EXPORT
#endif

typedef enum vgpu_status {
  VGPU_OK = 0,
  VGPU_ERROR_INVALID = 1,     /* the input (config, request, grant) is wrong */
  VGPU_ERROR_UNAVAILABLE = 2, /* the vendor library or device is missing or failing */
  VGPU_ERROR_INTERNAL = 3,    /* a bug in the backend */
  VGPU_ERROR_UNSUPPORTED = 4  /* this backend does not do that */
} vgpu_status;

/* Where a backend writes a NUL-terminated message when it returns an error. */
typedef struct vgpu_error_buf {
  char* text;
  size_t capacity;
} vgpu_error_buf;

typedef struct vgpu_kv {
  const char* key;
  const char* value;
} vgpu_kv;

typedef struct vgpu_kv_list {
  const vgpu_kv* items;
  size_t count;
} vgpu_kv_list;

typedef struct vgpu_str_list {
  const char* const* items;
  size_t count;
} vgpu_str_list;

typedef enum vgpu_health { VGPU_HEALTHY = 0, VGPU_UNHEALTHY = 1, VGPU_HEALTH_UNKNOWN = 2 } vgpu_health;

/* How two devices are connected (see vgpu::LinkClass), worst first. */
typedef enum vgpu_link_class {
  VGPU_LINK_UNKNOWN = 0,
  VGPU_LINK_CROSS_NUMA = 1,       /* through the link between CPU sockets */
  VGPU_LINK_SAME_NUMA = 2,        /* through PCIe host bridges of one NUMA node */
  VGPU_LINK_PCIE_HOST_BRIDGE = 3, /* through one PCIe host bridge */
  VGPU_LINK_PCIE_SWITCHES = 4,    /* through several PCIe switches */
  VGPU_LINK_PCIE_SWITCH = 5,      /* through one PCIe switch */
  VGPU_LINK_SAME_BOARD = 6,       /* two devices on one board */
  VGPU_LINK_DIRECT = 7,           /* direct device-to-device links, `lanes` of them */
  VGPU_LINK_SWITCH_FABRIC = 8     /* a device-to-device switch fabric */
} vgpu_link_class;

/* 1.4: the link from a device to a peer device of the same backend on the node. */
typedef struct vgpu_device_link {
  const char* peer_id; /* vgpu_device.id of the peer */
  uint32_t link_class; /* vgpu_link_class */
  uint32_t lanes;      /* for DIRECT and SWITCH_FABRIC: how many device links */
  uint32_t rank;       /* higher is faster; 0 = unknown; at most 1000 (docs/wire-format.md) */
} vgpu_device_link;

/* One physical device (see vgpu::Device). */
typedef struct vgpu_device {
  uint32_t struct_size;
  const char* id;
  int32_t index;
  const char* model;
  uint64_t memory_mib;
  uint32_t compute_units; /* 100 = the whole device */
  uint32_t split_count;
  int32_t numa_node; /* -1 = unknown */
  uint32_t health;   /* vgpu_health */
  vgpu_kv_list attributes;
  /* 1.4, filled by discovery: the device's links to its peers, `link_size` =
   * sizeof(vgpu_device_link) as the backend built them (step through `links` by it).
   * Read only when struct_size covers link_size; none (count 0) = the backend cannot tell.
   * The views core passes to `fit` carry none: topology is the placement engine's part. */
  const vgpu_device_link* links;
  size_t link_count;
  size_t link_size;
} vgpu_device;

/* What is already taken on a device (see vgpu::DeviceUsage). */
typedef struct vgpu_device_usage {
  uint32_t shares;
  uint32_t compute;
  uint64_t memory_mib;
} vgpu_device_usage;

/* What one container asks of one backend (see vgpu::DeviceRequest). */
typedef struct vgpu_device_request {
  uint32_t struct_size;
  uint32_t count;
  uint64_t memory_mib;     /* per device; 0 = use memory_percent */
  uint32_t memory_percent; /* per device; 0 with memory_mib 0 = 100% */
  uint32_t compute_percent;
  int32_t priority; /* -1 = unset */
  uint32_t numa_bind;
  vgpu_str_list include_models; /* case-insensitive substrings of vgpu_device.model */
  vgpu_str_list exclude_models;
  vgpu_str_list include_ids; /* exact vgpu_device.id */
  vgpu_str_list exclude_ids;
} vgpu_device_request;

/* Why a device does not fit. Codes below VGPU_REASON_BACKEND are explained by core;
 * a backend's own codes start at VGPU_REASON_BACKEND and are explained by its `explain`. */
typedef enum vgpu_reason {
  VGPU_REASON_NONE = 0,
  VGPU_REASON_UNHEALTHY = 1,
  VGPU_REASON_CORDONED = 2,
  VGPU_REASON_MODEL_MISMATCH = 3,
  VGPU_REASON_ID_MISMATCH = 4,
  VGPU_REASON_SHARES_EXHAUSTED = 5,
  VGPU_REASON_INSUFFICIENT_MEMORY = 6,
  VGPU_REASON_INSUFFICIENT_COMPUTE = 7,
  VGPU_REASON_EXCLUSIVE_CONFLICT = 8, /* wants the device alone but it is in use, or the reverse */
  VGPU_REASON_REQUEST_TOO_LARGE = 9,  /* more than the whole device could ever give */
  VGPU_REASON_NUMA_MISMATCH = 10,     /* set by core: not enough fitting devices on one NUMA node */
  VGPU_REASON_BACKEND = 1000
} vgpu_reason;

/* The answer of `fit` for one device. */
typedef struct vgpu_fit_result {
  uint32_t fits;
  int32_t reason;     /* vgpu_reason when !fits */
  uint64_t needed;    /* the quantity behind the reason (MiB, percent, shares) */
  uint64_t available; /* what the device had of it */
  vgpu_device_usage take; /* when fits: what the request takes on this device */
} vgpu_fit_result;

/* 1.5: the fields of vgpu_device that a backend's `fit` reads (the fit_reads slot). */
#define VGPU_FIT_READS_ID (1u << 0) /* other than comparing it with include_ids/exclude_ids */
#define VGPU_FIT_READS_INDEX (1u << 1)
#define VGPU_FIT_READS_MODEL (1u << 2)
#define VGPU_FIT_READS_MEMORY (1u << 3)
#define VGPU_FIT_READS_COMPUTE (1u << 4)
#define VGPU_FIT_READS_SPLIT_COUNT (1u << 5)
#define VGPU_FIT_READS_NUMA_NODE (1u << 6)
#define VGPU_FIT_READS_HEALTH (1u << 7)
#define VGPU_FIT_READS_ATTRIBUTES (1u << 8)
#define VGPU_FIT_READS_ALL 0x1ffu

/* 1.6: where grants sit on a device that a backend partitions at fixed places (the places
 * slot said so), for `fit_placed`. A placement token is the backend's own text, opaque to
 * core: core keeps it with the grant (in the pod's assignment), hands the tokens of a
 * device's grants back to `fit_placed`, and gives the grant's token to `container_spec`. */
#define VGPU_PLACEMENT_TOKEN_MAX 64 /* bytes, the NUL included */
typedef struct vgpu_placement {
  uint32_t struct_size;
  vgpu_str_list placed; /* in: the tokens of the grants already on the device */
  char* token;          /* out, when the request fits: this grant's token, NUL-terminated ("" = none) */
  size_t token_capacity;
  /* out, when the request does not fit and `why` is not null: the refusal in words,
   * NUL-terminated. Null on the hot path; core asks for words only to explain a refusal. */
  char* why;
  size_t why_capacity;
} vgpu_placement;

typedef enum vgpu_resource_role {
  VGPU_RESOURCE_COUNT = 0,          /* number of devices; advertised to the kubelet */
  VGPU_RESOURCE_MEMORY = 1,         /* memory per device, in the backend's unit */
  VGPU_RESOURCE_MEMORY_PERCENT = 2, /* percent of each device's memory */
  VGPU_RESOURCE_CORES = 3,          /* percent of each device's compute */
  VGPU_RESOURCE_PRIORITY = 4,
  VGPU_RESOURCE_OTHER = 5
} vgpu_resource_role;

/* A Kubernetes extended resource the backend owns. */
typedef struct vgpu_resource {
  const char* name;      /* e.g. "nvidia.com/gpumem" */
  uint32_t role;         /* vgpu_resource_role */
  uint32_t advertised;   /* nonzero: the node agent registers it with the kubelet */
} vgpu_resource;

/* One resource amount from a container's limits, already parsed from its Quantity. */
typedef struct vgpu_resource_amount {
  const char* name;
  int64_t value;
} vgpu_resource_amount;

/* A container as the allocator sees it when parsing a request. */
typedef struct vgpu_container_input {
  uint32_t struct_size;
  const char* name;
  uint32_t init; /* nonzero for an init container */
  const vgpu_resource_amount* limits;
  size_t limit_count;
} vgpu_container_input;

/* The effective configuration of one backend (a device-config.yaml section with the
 * node's overrides applied). Null strings and zero numbers mean "the backend's default". */
typedef struct vgpu_backend_config {
  uint32_t struct_size;
  const char* name;
  const char* node_name; /* empty on the scheduler */
  const char* count_resource;
  const char* memory_resource;
  const char* memory_percent_resource;
  const char* cores_resource;
  const char* priority_resource;
  uint32_t split_count;
  double memory_scaling;
  double core_scaling;
  uint64_t memory_unit_mib;
  uint64_t default_memory_mib;
  uint32_t default_cores;
  uint32_t default_count;
  vgpu_kv_list options; /* backend-specific keys; unknown ones must be refused */
} vgpu_backend_config;

/* One device given to a container. */
typedef struct vgpu_grant {
  const char* device_id;
  int32_t device_index;
  uint64_t memory_mib;
  uint32_t compute;
  int32_t slot;
  int32_t priority; /* the request's task priority; -1 = unset */
  /* 1.6: the placement token `fit_placed` gave this grant (vgpu_placement), "" or null for
   * none. Read it only when vgpu_container_grant.grant_size covers it. */
  const char* placement;
} vgpu_grant;

/* A container about to start with its devices, as the limiter sees it. */
typedef struct vgpu_container_grant {
  uint32_t struct_size;
  const char* holder; /* the agent's key for this container's devices (see vgpu_container_ref) */
  const char* pod_namespace;
  const char* pod_name;
  const char* container_name;
  int32_t container_index;
  const vgpu_grant* devices;
  size_t device_count;
  const char* host_dir; /* a host folder the agent made for this container's files */
  vgpu_kv_list pod_annotations;
  /* sizeof(vgpu_grant) as the caller built `devices`: step through the array by it, so
   * vgpu_grant can grow in a minor version (read only the fields you know). */
  size_t grant_size;
  /* 1.1: the UID of the pod the agent attributes the container to. A label for files and
   * messages (vendor tools name per-pod folders by it); never a key for what the limiter
   * holds, which is `holder`. Read it only when struct_size covers it; may be empty. */
  const char* pod_uid;
} vgpu_container_grant;

/* Identifies a container whose resources a limiter may hold. */
typedef struct vgpu_container_ref {
  const char* holder; /* opaque: unique among live containers, stable across agent restarts */
  const char* container_name;
} vgpu_container_ref;

/* Receives a ContainerSpec piece by piece. */
typedef struct vgpu_spec_sink {
  void* ctx;
  void (*env)(void* ctx, const char* name, const char* value);
  void (*mount)(void* ctx, const char* host_path, const char* container_path, uint32_t read_only);
  void (*device)(void* ctx, const char* host_path, const char* container_path, const char* permissions);
  void (*annotation)(void* ctx, const char* key, const char* value);
  /* An annotation for the pod (not the container runtime): the node agent writes it on the
   * pod with the Allocate outcome. Appended in 1.0 before release; may be null (a loader
   * that records no pod annotations), so check it before calling. */
  void (*pod_annotation)(void* ctx, const char* key, const char* value);
  /* 1.2: a note for whoever runs the pod (e.g. which component enforces a limit), which the
   * node agent posts as a Normal event on the pod; `reason` is CamelCase. The sink has this
   * slot only when the loader's ABI version (given to the entry function) is 1.2 or newer,
   * and it may still be null: check both before calling. */
  void (*notice)(void* ctx, const char* reason, const char* message);
  /* 1.7: the shared region the limiter created for the container, `path` relative to the
   * grant's host_dir (no "..", no leading '/'), `inode` its inode number: the node agent reads
   * the container's usage from that file alone, and only while it is that inode. At most one
   * per container (a later call replaces an earlier one). Present only when the loader's ABI
   * version is 1.7 or newer, and may still be null: check both before calling. A backend that
   * never calls it gets no usage read from files in its containers' folders. */
  void (*region)(void* ctx, const char* path, uint64_t inode);
  /* 1.8: an OCI hook the container runtime must run for the container (a CDI spec's
   * containerEdits.hooks): `hook_name` one of the OCI hook points ("createContainer"...),
   * `path` the program on the host, `args` its argv (args[0] its name), `env` NAME=value.
   * Present only when the loader's ABI version is 1.8 or newer, and may still be null: a
   * backend whose container must not start without the hook refuses the container then. */
  void (*hook)(void* ctx, const char* hook_name, const char* path, const char* const* args, size_t arg_count,
               const char* const* env, size_t env_count);
} vgpu_spec_sink;

/* 1.1: what one container uses of one device it holds, as the vendor library reports it
 * (per partition, per process or, for a device held whole, per device). */
typedef struct vgpu_container_usage {
  uint32_t struct_size;
  const char* holder; /* the container, as in vgpu_container_ref */
  const char* container_name;
  const char* device_id;
  int32_t device_index;          /* the device's index as the container sees it */
  uint64_t memory_limit_bytes;   /* the container's memory on the device */
  int64_t memory_used_bytes;     /* -1: the vendor library cannot tell */
  uint32_t compute_limit_percent; /* the container's compute share of the device, 0..100 */
  int32_t utilization_percent;   /* busy percent of the whole device the container causes; -1: unknown */
} vgpu_container_usage;

/* 1.3: one process that holds memory or runs work on a device, as the vendor library
 * reports it, whoever started it (our containers, other pods, host processes). */
typedef struct vgpu_device_process {
  uint32_t struct_size;
  uint32_t pid;                /* as the driver reports it: the node's (host) PID namespace */
  const char* device_id;       /* vgpu_device.id of the device */
  int32_t device_index;        /* vgpu_device.index */
  int64_t memory_used_bytes;   /* -1: the vendor library cannot tell */
  int32_t utilization_percent; /* busy percent of the whole device the process causes; -1: unknown */
} vgpu_device_process;

typedef struct vgpu_backend vgpu_backend; /* a backend instance, opaque to the loader */

typedef void (*vgpu_device_sink)(void* ctx, const vgpu_device* device);
typedef void (*vgpu_resource_sink)(void* ctx, const vgpu_resource* resource);
typedef void (*vgpu_request_sink)(void* ctx, const vgpu_device_request* request);
typedef void (*vgpu_amount_sink)(void* ctx, const char* resource, int64_t value);
typedef void (*vgpu_health_sink)(void* ctx, const char* device_id, uint32_t health, const char* reason);
typedef void (*vgpu_usage_sink)(void* ctx, const vgpu_container_usage* usage);
typedef void (*vgpu_process_sink)(void* ctx, const vgpu_device_process* process);

/* Where a protected environment variable may not be set by a pod (protected_env). */
typedef enum vgpu_env_scope {
  /* In no container at all: it would hand devices to any container (a runtime hook's
   * visibility variable such as NVIDIA_VISIBLE_DEVICES). */
  VGPU_ENV_SCOPE_EVERY_CONTAINER = 0,
  /* In containers that ask for this backend's resources: what its limiter sets or reads. */
  VGPU_ENV_SCOPE_BACKEND_CONTAINERS = 1
} vgpu_env_scope;
/* `pattern`: a variable name, or a prefix followed by '*'; `scope`: a vgpu_env_scope. */
typedef void (*vgpu_env_sink)(void* ctx, const char* pattern, uint32_t scope);

/*
 * The function table. Required slots: create, destroy, resources, parse_request, fit.
 * Everything after `fit` is optional (null = unsupported). New slots are only appended.
 */
typedef struct vgpu_backend_table {
  uint32_t struct_size; /* sizeof(vgpu_backend_table) as the backend was built */
  uint32_t abi_version; /* VGPU_BACKEND_ABI_VERSION the backend was built against */
  const char* name;     /* must equal <name> in libvgpu-backend-<name>.so */
  const char* description;

  vgpu_status (*create)(const vgpu_backend_config* config, vgpu_backend** out, vgpu_error_buf* err);
  void (*destroy)(vgpu_backend* backend);

  /* Allocator ("splitting"), scheduler side. */
  void (*resources)(vgpu_backend* backend, vgpu_resource_sink sink, void* ctx);
  /* Emits at most one request for the container, none if it asks nothing of this backend. */
  vgpu_status (*parse_request)(vgpu_backend* backend, const vgpu_container_input* container,
                               const vgpu_kv_list* pod_annotations, vgpu_request_sink sink,
                               void* ctx, vgpu_error_buf* err);
  /* The hot path: called for every device of every candidate node. Must not block. */
  void (*fit)(vgpu_backend* backend, const vgpu_device_request* request, const vgpu_device* device,
              const vgpu_device_usage* usage, vgpu_fit_result* result);

  /* Words for a backend-specific reason (>= VGPU_REASON_BACKEND); returns the length. */
  size_t (*explain)(vgpu_backend* backend, const vgpu_fit_result* result, char* buf, size_t capacity);
  /* Limits the admission webhook adds to a container that asks for this backend. */
  vgpu_status (*admission_defaults)(vgpu_backend* backend, const vgpu_container_input* container,
                                    const vgpu_kv_list* pod_annotations, vgpu_amount_sink sink,
                                    void* ctx, vgpu_error_buf* err);

  /* Discovery, node side. */
  vgpu_status (*discover)(vgpu_backend* backend, vgpu_device_sink sink, void* ctx, vgpu_error_buf* err);
  /* Blocks up to timeout_ms; emits health changes since the last call. */
  vgpu_status (*wait_health)(vgpu_backend* backend, uint32_t timeout_ms, vgpu_health_sink sink,
                             void* ctx, vgpu_error_buf* err);

  /* Limiter ("enforcement"), node side. */
  vgpu_status (*container_spec)(vgpu_backend* backend, const vgpu_container_grant* grant,
                                const vgpu_spec_sink* sink, vgpu_error_buf* err);
  vgpu_status (*release)(vgpu_backend* backend, const vgpu_container_ref* container, vgpu_error_buf* err);
  /* Frees whatever the limiter holds for containers not in `live`. */
  vgpu_status (*reconcile)(vgpu_backend* backend, const vgpu_container_ref* live, size_t live_count,
                           vgpu_error_buf* err);

  /* 1.1, node side: emits one vgpu_container_usage per device of each container the limiter
   * holds now, from the vendor library. Called when /metrics is scraped; must not block long. */
  vgpu_status (*container_usage)(vgpu_backend* backend, vgpu_usage_sink sink, void* ctx, vgpu_error_buf* err);

  /* 1.3, scheduler side: emits the environment variables a pod may not set itself, because
   * they choose devices or limits that only the node agent may choose (the admission webhook
   * refuses or strips them). Called once when the backend is loaded. */
  void (*protected_env)(vgpu_backend* backend, vgpu_env_sink sink, void* ctx);

  /* 1.3, node side: emits one vgpu_device_process per process on each device the backend
   * discovered, from the vendor library (for NVIDIA: NVML's running-process lists). The node
   * agent's watchdog calls it about every second; must not block long. Null: the backend
   * cannot list processes, and the watchdog is off for its devices. */
  vgpu_status (*device_processes)(vgpu_backend* backend, vgpu_process_sink sink, void* ctx, vgpu_error_buf* err);

  /* 1.5, scheduler side: a promise that `fit` is a function of the request, the usage and
   * the vgpu_device fields named by the returned VGPU_FIT_READS_* bits alone (no other
   * state, no clock, no counter; the id compared only with the request's id lists unless
   * VGPU_FIT_READS_ID). Core then asks `fit` once for the devices of a node that agree on
   * those fields and on their usage, and gives each of them that answer (not for requests
   * that name ids). Called once when the backend is loaded. Null, or a bit core does not
   * know: every device is judged on its own. */
  uint32_t (*fit_reads)(vgpu_backend* backend);

  /* 1.6, scheduler side: nonzero when a request's fit on `device` depends on where the
   * grants already on it sit, not only on their totals (the device is partitioned at fixed
   * places, as NVIDIA's MIG instances are): core then judges that device with `fit_placed`,
   * never shares its answer with another device, and keeps each grant's placement token.
   * Called once per device when a node's inventory is read. Null: no device is. */
  uint32_t (*places)(vgpu_backend* backend, const vgpu_device* device);
  /* 1.6, scheduler side: `fit` for a device `places` named, with the placements of the
   * grants on it (placement->placed); when the request fits, writes where it goes
   * (placement->token). Both slots or neither. Same rules as `fit`: must not block. */
  void (*fit_placed)(vgpu_backend* backend, const vgpu_device_request* request, const vgpu_device* device,
                     const vgpu_device_usage* usage, vgpu_placement* placement, vgpu_fit_result* result);

  /* 1.9, node side: the device memory the vendor driver itself charges to the memory cgroup
   * of a process, on device `device_id`, where the driver keeps such accounting (NVIDIA r615+:
   * nvmlDeviceGetMemoryLimits_v1's currentUsed for a cgroup with a limit set).
   * `proc_cgroup` is the text of the process's /proc/<pid>/cgroup. Sets *known to 1 and
   * *used_bytes, or *known to 0 where the driver does not account that cgroup on that device
   * (older driver, a partition, no limit set there). The watchdog prefers it to the sum of
   * the processes' own figures, which counts memory shared between processes once per process.
   * Must not block long. Null: never. */
  vgpu_status (*cgroup_memory_used)(vgpu_backend* backend, const char* proc_cgroup, const char* device_id,
                                    uint64_t* used_bytes, int* known, vgpu_error_buf* err);

  /* 1.10, scheduler side: the split count `discover` would publish, under the settings the
   * backend was created with, for a device whose model is `model`; 0 where that cannot be told
   * without the device itself (it depends on a mode the device is set to). Lets a tool that has
   * no node (vgpu-sim) place as many tenants on a device as the node would. Must not block.
   * Null: never told. */
  uint32_t (*split_count)(vgpu_backend* backend, const char* model);
} vgpu_backend_table;

/* Fills `table` (whose struct_size the loader set) for a loader of `loader_abi_version`.
 * Returns 0 on success; nonzero when the backend cannot serve that loader. */
typedef int (*vgpu_backend_entry_fn)(uint32_t loader_abi_version, vgpu_backend_table* table);

#ifdef __cplusplus
}
#endif

#endif /* VGPU_BACKEND_ABI_H */
