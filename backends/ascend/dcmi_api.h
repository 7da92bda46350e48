#pragma once
// The part of Huawei's DCMI (libdcmi.so, the Ascend driver's management library) this
// backend calls, declared here from its documented signatures and structs; opened with dlopen.

#ifdef __cplusplus
extern "C" {
#endif

#define ASCEND_DCMI_CHIP_NAME_LEN 32
#define ASCEND_DCMI_DIE_ID_COUNT 5
#define ASCEND_DCMI_TEMPLATE_NAME_LEN 32

/* dcmi_get_device_chip_info: chip_type "Ascend", chip_name "910B3"/"310P3", AI cores. */
struct dcmi_chip_info {
  unsigned char chip_type[ASCEND_DCMI_CHIP_NAME_LEN];
  unsigned char chip_name[ASCEND_DCMI_CHIP_NAME_LEN];
  unsigned char chip_ver[ASCEND_DCMI_CHIP_NAME_LEN];
  unsigned int aicore_cnt;
};

/* dcmi_get_device_hbm_info (training chips): memory_size in MB. */
struct dcmi_hbm_info {
  unsigned long long memory_size;
  unsigned int freq;
  unsigned long long memory_usage;
  int temp;
  unsigned int bandwith_util_rate;
};

/* dcmi_get_device_memory_info_v3 (inference cards' DDR): memory_size in MB. */
struct dcmi_get_memory_info_stru {
  unsigned long long memory_size;
  unsigned long long memory_available;
  unsigned int freq;
  unsigned long hugepagesize;
  unsigned long hugepages_total;
  unsigned long hugepages_free;
  unsigned int utiliza;
  unsigned char reserve[60];
};

/* dcmi_get_device_die_v2: the chip's die id, unique per chip. */
enum dcmi_die_type { NDIE = 0, VDIE = 1 };
struct dcmi_die_id {
  unsigned int soc_die[ASCEND_DCMI_DIE_ID_COUNT];
};

/* dcmi_create_vdevice: in (vdev_id 0 = the driver picks; template_name "vir02"...). */
struct dcmi_create_vdev_res_stru {
  unsigned int vdev_id;
  unsigned int vfg_id;
  char template_name[ASCEND_DCMI_TEMPLATE_NAME_LEN];
  unsigned char reserved[64];
};
/* dcmi_create_vdevice: out (the vNPU's id: /dev/vdavinci<vdev_id>). */
struct dcmi_create_vdev_out {
  unsigned int vdev_id;
  unsigned int pcie_bus;
  unsigned int pcie_device;
  unsigned int pcie_func;
  unsigned int vfg_id;
  unsigned char reserved[32];
};

/* dcmi_get_device_resource_info: one process on the chip and its memory (bytes). */
struct dcmi_proc_mem_info {
  int proc_id;
  unsigned long proc_mem_usage;
};

typedef int (*dcmi_init_fn)(void);
typedef int (*dcmi_get_card_num_list_fn)(int* card_num, int* card_list, int list_len);
typedef int (*dcmi_get_device_num_in_card_fn)(int card_id, int* device_num);
typedef int (*dcmi_get_device_logic_id_fn)(int* device_logic_id, int card_id, int device_id);
typedef int (*dcmi_get_device_phyid_from_logicid_fn)(unsigned int logicid, unsigned int* phyid);
typedef int (*dcmi_get_device_chip_info_fn)(int card_id, int device_id, struct dcmi_chip_info* chip_info);
typedef int (*dcmi_get_device_hbm_info_fn)(int card_id, int device_id, struct dcmi_hbm_info* hbm_info);
typedef int (*dcmi_get_device_memory_info_v3_fn)(int card_id, int device_id,
                                                   struct dcmi_get_memory_info_stru* memory_info);
typedef int (*dcmi_get_device_die_v2_fn)(int card_id, int device_id, enum dcmi_die_type input_type,
                                         struct dcmi_die_id* die_id);
/* health: 0 healthy, 1 minor alarm, 2 major alarm, 3 critical alarm (per DCMI's manual). */
typedef int (*dcmi_get_device_health_fn)(int card_id, int device_id, unsigned int* health);
typedef int (*dcmi_create_vdevice_fn)(int card_id, int device_id, struct dcmi_create_vdev_res_stru* vdev,
                                      struct dcmi_create_vdev_out* out);
typedef int (*dcmi_set_destroy_vdevice_fn)(int card_id, int device_id, unsigned int vdevid);
typedef int (*dcmi_get_device_resource_info_fn)(int card_id, int device_id, struct dcmi_proc_mem_info* proc_info,
                                                int* proc_num);

#ifdef __cplusplus
}
#endif
