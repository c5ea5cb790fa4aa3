/* The DLPack 1.x structures (https://dmlc.github.io/dlpack/latest/c_api.html),
 * declared here because Debian's libdlpack-dev is 0.6 (no versioned struct).
 * The layouts are the ABI every consumer (PyTorch, NumPy, JAX) reads. */
#pragma once

#include <stdint.h>

#define STK_DLPACK_MAJOR 1
#define STK_DLPACK_MINOR 0

typedef struct {
    uint32_t major, minor;
} DLPackVersion;

typedef enum { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3 } DLDeviceType;

typedef struct {
    int32_t device_type; /* DLDeviceType */
    int32_t device_id;
} DLDevice;

typedef enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2 } DLDataTypeCode;

typedef struct {
    uint8_t code, bits;
    uint16_t lanes;
} DLDataType;

typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides; /* in elements */
    uint64_t byte_offset;
} DLTensor;

/* The legacy capsule's ("dltensor") payload. */
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

/* The versioned capsule's ("dltensor_versioned") payload. */
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;
