/*
 * The subset of Cambricon's cnDev C API (libcndev.so, header cndev.h) that the backend
 * calls. cndev.h ships only with the driver package, so the layouts are declared here
 * from the published API (CNDEV_VERSION_6); the fake library in tests/fakes/cndev
 * implements the same symbols. Every struct starts with `version`, which the caller sets.
 * Memory in cndevMemoryInfo_t is in MB; sMLU memory sizes are in bytes.
 */
#ifndef VGPU_CAMBRICON_CNDEV_API_H
#define VGPU_CAMBRICON_CNDEV_API_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CNDEV_VERSION_5 5
#define CNDEV_VERSION_6 6

#define CNDEV_UUID_SIZE 37
#define CNDEV_MLUINSTANCE_PROFILE_NAME_BUFFER_SIZE 100
#define CNDEV_MLUINSTANCE_DEVICE_NODE_NAME_BUFFER_SIZE 100

typedef enum {
  CNDEV_SUCCESS = 0,
  CNDEV_ERROR_NO_DRIVER = 1,
  CNDEV_ERROR_LOW_DRIVER_VERSION = 2,
  CNDEV_ERROR_UNSUPPORTED_API_VERSION = 3,
  CNDEV_ERROR_UNINITIALIZED = 4,
  CNDEV_ERROR_INVALID_ARGUMENT = 5,
  CNDEV_ERROR_INVALID_DEVICE_ID = 6,
  CNDEV_ERROR_UNKNOWN = 7,
  CNDEV_ERROR_MALLOC = 8,
  CNDEV_ERROR_INSUFFICIENT_SPACE = 9,
  CNDEV_ERROR_NOT_SUPPORTED = 10,
  CNDEV_ERROR_INVALID_LINK = 11,
  CNDEV_ERROR_NO_DEVICES = 12,
  CNDEV_ERROR_NO_PERMISSION = 13,
  CNDEV_ERROR_NOT_FOUND = 14,
  CNDEV_ERROR_IN_USE = 15,
  CNDEV_ERROR_DUPLICATE = 16,
  CNDEV_ERROR_TIMEOUT = 17
} cndevRet_t;

typedef int32_t cndevDevice_t;
typedef int32_t cndevMluInstance_t;

typedef enum { CNDEV_FEATURE_DISABLED = 0, CNDEV_FEATURE_ENABLED = 1 } cndevEnableStatusEnum_t;

typedef enum { CNDEV_HEALTH_STATE_DEVICE_IN_PROBLEM = 0, CNDEV_HEALTH_STATE_DEVICE_GOOD = 1 } cndevHealthStateEnum_t;

typedef enum {
  CNDEV_HEALTH_STATE_DRIVER_EARLY_INITED = 0,
  CNDEV_HEALTH_STATE_DRIVER_BRING_UP = 1,
  CNDEV_HEALTH_STATE_DRIVER_BOOTING = 2,
  CNDEV_HEALTH_STATE_DRIVER_LATEINIT = 3,
  CNDEV_HEALTH_STATE_DRIVER_RUNNING = 4,
  CNDEV_HEALTH_STATE_DRIVER_BOOT_ERROR = 5,
  CNDEV_HEALTH_STATE_DRIVER_RESET = 6,
  CNDEV_HEALTH_STATE_DRIVER_RESET_ERROR = 7,
  CNDEV_HEALTH_STATE_DRIVER_UNKNOWN = 8
} cndevDriverHealthStateEnum_t;

typedef enum { CNDEV_SMLU_MAX = 0, CNDEV_SMLU_USAGE = 1, CNDEV_SMLU_ITEM_COUNT = 2 } cndevSMluItemEnum_t;

typedef enum {
  CNDEV_COMPUTEMODE_DEFAULT = 0,    /* several contexts per card */
  CNDEV_COMPUTEMODE_EXCLUSIVE = 1,  /* one context per card */
  CNDEV_COMPUTEMODE_PROHIBITED = 2, /* no context may use the card */
  CNDEV_COMPUTEMODE_COUNT = 0xFF
} cndevComputeModeEnum_t;

typedef struct {
  int version;
  unsigned number; /* cards on the host */
} cndevCardInfo_t;

typedef struct {
  int version;
  uint8_t uuid[CNDEV_UUID_SIZE];
  uint64_t ncsUUID64;
} cndevUUID_t;

typedef struct {
  int version;
  int64_t physicalMemoryTotal; /* MB */
  int64_t physicalMemoryUsed;
  int64_t virtualMemoryTotal;
  int64_t virtualMemoryUsed;
  int64_t channelNumber;
  int64_t channelMemoryUsed[20];
  uint64_t globalMemory;
} cndevMemoryInfo_t;

typedef struct {
  int version;
  int health; /* 1 = good */
  cndevHealthStateEnum_t deviceState;
  cndevDriverHealthStateEnum_t driverState;
} cndevCardHealthState_t;

typedef struct {
  int version;
  int32_t nodeId;
} cndevNUMANodeId_t;

typedef struct {
  int version;
  cndevComputeModeEnum_t mode;
} cndevComputeMode_t;

typedef struct {
  int version;
  int averageCoreUtilization; /* percent */
  int coreUtilization[80];
} cndevUtilizationInfo_t;

typedef struct {
  int version;
  cndevEnableStatusEnum_t smluMode;
} cndevSMLUMode_t;

typedef struct {
  int version;
  uint32_t mluQuota;   /* percent of the card */
  uint64_t memorySize; /* bytes */
} cndevSMluSet_t;

typedef struct {
  int version;
  int profileId;
  int instanceId;
  uint8_t uuid[CNDEV_UUID_SIZE];
  int domain;
  int bus;
  int device;
  int function;
  char profileName[CNDEV_MLUINSTANCE_PROFILE_NAME_BUFFER_SIZE];
  char instanceName[CNDEV_MLUINSTANCE_PROFILE_NAME_BUFFER_SIZE];
  char devNodeName[CNDEV_MLUINSTANCE_DEVICE_NODE_NAME_BUFFER_SIZE];
  uint32_t mluQuota[CNDEV_SMLU_ITEM_COUNT];   /* [MAX, USAGE] */
  uint64_t memorySize[CNDEV_SMLU_ITEM_COUNT]; /* [MAX, USAGE], bytes */
  unsigned int reserved[128];
} cndevSMluInfo_t;

typedef struct {
  int version;
  int count;
  int profileId[128];
} cndevSMluProfileIdInfo_t;

typedef struct {
  int version;
  int profileId;
  char name[CNDEV_MLUINSTANCE_PROFILE_NAME_BUFFER_SIZE];
  uint32_t totalCapacity;
  uint32_t remainCapacity;
  uint32_t mluQuota[CNDEV_SMLU_ITEM_COUNT];
  uint64_t memorySize[CNDEV_SMLU_ITEM_COUNT];
} cndevSMluProfileInfo_t;

/* Function types, one per symbol the backend resolves with dlsym. */
typedef cndevRet_t (*cndevInit_fn)(int reserved);
typedef cndevRet_t (*cndevRelease_fn)(void);
typedef const char* (*cndevGetErrorString_fn)(cndevRet_t error);
typedef cndevRet_t (*cndevGetDeviceCount_fn)(cndevCardInfo_t* info);
typedef cndevRet_t (*cndevGetDeviceHandleByIndex_fn)(int index, cndevDevice_t* handle);
typedef cndevRet_t (*cndevGetUUID_fn)(cndevUUID_t* uuid, cndevDevice_t device);
typedef const char* (*cndevGetCardNameStringByDevId_fn)(cndevDevice_t device);
typedef cndevRet_t (*cndevGetMemoryUsage_fn)(cndevMemoryInfo_t* info, cndevDevice_t device);
typedef cndevRet_t (*cndevGetCardHealthState_fn)(cndevCardHealthState_t* state, cndevDevice_t device);
typedef cndevRet_t (*cndevGetNUMANodeIdByDevId_fn)(cndevNUMANodeId_t* numa, cndevDevice_t device);
typedef int (*cndevGetMLULinkPortNumber_fn)(cndevDevice_t device);
typedef cndevRet_t (*cndevGetSMLUMode_fn)(cndevSMLUMode_t* mode, cndevDevice_t device);
typedef cndevRet_t (*cndevGetComputeMode_fn)(cndevComputeMode_t* mode, cndevDevice_t device);
typedef cndevRet_t (*cndevGetDeviceUtilizationInfo_fn)(cndevUtilizationInfo_t* info, cndevDevice_t device);
typedef cndevRet_t (*cndevCreateSMluProfileInfo_fn)(cndevSMluSet_t* profile, int* profileId, cndevDevice_t device);
typedef cndevRet_t (*cndevDestroySMluProfileInfo_fn)(int profileId, cndevDevice_t device);
typedef cndevRet_t (*cndevGetSMluProfileIdInfo_fn)(cndevSMluProfileIdInfo_t* ids, cndevDevice_t device);
typedef cndevRet_t (*cndevGetSMluProfileInfo_fn)(cndevSMluProfileInfo_t* info, int profileId, cndevDevice_t device);
typedef cndevRet_t (*cndevCreateSMluInstanceByProfileId_fn)(cndevMluInstance_t* handle, unsigned int profileId,
                                                            cndevDevice_t device, char* name);
typedef cndevRet_t (*cndevDestroySMluInstanceByHandle_fn)(cndevMluInstance_t handle);
typedef cndevRet_t (*cndevGetSMluInstanceInfo_fn)(cndevSMluInfo_t* info, cndevMluInstance_t handle);
typedef cndevRet_t (*cndevGetAllSMluInstanceInfo_fn)(int* count, cndevSMluInfo_t* infos, cndevDevice_t device);

#ifdef __cplusplus
}
#endif

#endif /* VGPU_CAMBRICON_CNDEV_API_H */
