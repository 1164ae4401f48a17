"""The slice of the Vulkan C API the compute runtime uses, bound through cffi in ABI mode.

Only what the runtime calls is declared (docs/adr/0058-vulkan-compute-backend.md). In ABI
mode cffi computes struct layouts from these declarations, so every struct is declared
whole, in the order of the Vulkan headers; tests/unit/vulkan/test_vk_layout.py compares
them with the C headers where those are installed. The loader is opened on first use.
"""

from __future__ import annotations

import functools
from typing import Any

from cffi import FFI

from ds4.domain.errors import Ds4Error

CDEF = """
typedef uint32_t VkFlags;
typedef uint32_t VkBool32;
typedef uint64_t VkDeviceSize;
typedef int32_t VkResult;
typedef int32_t VkStructureType;
typedef struct VkInstance_T *VkInstance;
typedef struct VkPhysicalDevice_T *VkPhysicalDevice;
typedef struct VkDevice_T *VkDevice;
typedef struct VkQueue_T *VkQueue;
typedef struct VkCommandBuffer_T *VkCommandBuffer;
typedef uint64_t VkBuffer;
typedef uint64_t VkDeviceMemory;
typedef uint64_t VkShaderModule;
typedef uint64_t VkPipeline;
typedef uint64_t VkPipelineLayout;
typedef uint64_t VkPipelineCache;
typedef uint64_t VkDescriptorSetLayout;
typedef uint64_t VkDescriptorPool;
typedef uint64_t VkDescriptorSet;
typedef uint64_t VkCommandPool;
typedef uint64_t VkFence;

typedef struct VkApplicationInfo {
    VkStructureType sType; const void *pNext; const char *pApplicationName;
    uint32_t applicationVersion; const char *pEngineName; uint32_t engineVersion;
    uint32_t apiVersion;
} VkApplicationInfo;

typedef struct VkInstanceCreateInfo {
    VkStructureType sType; const void *pNext; VkFlags flags;
    const VkApplicationInfo *pApplicationInfo;
    uint32_t enabledLayerCount; const char *const *ppEnabledLayerNames;
    uint32_t enabledExtensionCount; const char *const *ppEnabledExtensionNames;
} VkInstanceCreateInfo;

typedef struct VkPhysicalDeviceLimits {
    uint32_t maxImageDimension1D; uint32_t maxImageDimension2D; uint32_t maxImageDimension3D;
    uint32_t maxImageDimensionCube; uint32_t maxImageArrayLayers;
    uint32_t maxTexelBufferElements; uint32_t maxUniformBufferRange;
    uint32_t maxStorageBufferRange; uint32_t maxPushConstantsSize;
    uint32_t maxMemoryAllocationCount; uint32_t maxSamplerAllocationCount;
    VkDeviceSize bufferImageGranularity; VkDeviceSize sparseAddressSpaceSize;
    uint32_t maxBoundDescriptorSets; uint32_t maxPerStageDescriptorSamplers;
    uint32_t maxPerStageDescriptorUniformBuffers; uint32_t maxPerStageDescriptorStorageBuffers;
    uint32_t maxPerStageDescriptorSampledImages; uint32_t maxPerStageDescriptorStorageImages;
    uint32_t maxPerStageDescriptorInputAttachments; uint32_t maxPerStageResources;
    uint32_t maxDescriptorSetSamplers; uint32_t maxDescriptorSetUniformBuffers;
    uint32_t maxDescriptorSetUniformBuffersDynamic; uint32_t maxDescriptorSetStorageBuffers;
    uint32_t maxDescriptorSetStorageBuffersDynamic; uint32_t maxDescriptorSetSampledImages;
    uint32_t maxDescriptorSetStorageImages; uint32_t maxDescriptorSetInputAttachments;
    uint32_t maxVertexInputAttributes; uint32_t maxVertexInputBindings;
    uint32_t maxVertexInputAttributeOffset; uint32_t maxVertexInputBindingStride;
    uint32_t maxVertexOutputComponents; uint32_t maxTessellationGenerationLevel;
    uint32_t maxTessellationPatchSize;
    uint32_t maxTessellationControlPerVertexInputComponents;
    uint32_t maxTessellationControlPerVertexOutputComponents;
    uint32_t maxTessellationControlPerPatchOutputComponents;
    uint32_t maxTessellationControlTotalOutputComponents;
    uint32_t maxTessellationEvaluationInputComponents;
    uint32_t maxTessellationEvaluationOutputComponents;
    uint32_t maxGeometryShaderInvocations; uint32_t maxGeometryInputComponents;
    uint32_t maxGeometryOutputComponents; uint32_t maxGeometryOutputVertices;
    uint32_t maxGeometryTotalOutputComponents; uint32_t maxFragmentInputComponents;
    uint32_t maxFragmentOutputAttachments; uint32_t maxFragmentDualSrcAttachments;
    uint32_t maxFragmentCombinedOutputResources; uint32_t maxComputeSharedMemorySize;
    uint32_t maxComputeWorkGroupCount[3]; uint32_t maxComputeWorkGroupInvocations;
    uint32_t maxComputeWorkGroupSize[3]; uint32_t subPixelPrecisionBits;
    uint32_t subTexelPrecisionBits; uint32_t mipmapPrecisionBits;
    uint32_t maxDrawIndexedIndexValue; uint32_t maxDrawIndirectCount;
    float maxSamplerLodBias; float maxSamplerAnisotropy; uint32_t maxViewports;
    uint32_t maxViewportDimensions[2]; float viewportBoundsRange[2];
    uint32_t viewportSubPixelBits; size_t minMemoryMapAlignment;
    VkDeviceSize minTexelBufferOffsetAlignment; VkDeviceSize minUniformBufferOffsetAlignment;
    VkDeviceSize minStorageBufferOffsetAlignment; int32_t minTexelOffset;
    uint32_t maxTexelOffset; int32_t minTexelGatherOffset; uint32_t maxTexelGatherOffset;
    float minInterpolationOffset; float maxInterpolationOffset;
    uint32_t subPixelInterpolationOffsetBits; uint32_t maxFramebufferWidth;
    uint32_t maxFramebufferHeight; uint32_t maxFramebufferLayers;
    VkFlags framebufferColorSampleCounts; VkFlags framebufferDepthSampleCounts;
    VkFlags framebufferStencilSampleCounts; VkFlags framebufferNoAttachmentsSampleCounts;
    uint32_t maxColorAttachments; VkFlags sampledImageColorSampleCounts;
    VkFlags sampledImageIntegerSampleCounts; VkFlags sampledImageDepthSampleCounts;
    VkFlags sampledImageStencilSampleCounts; VkFlags storageImageSampleCounts;
    uint32_t maxSampleMaskWords; VkBool32 timestampComputeAndGraphics;
    float timestampPeriod; uint32_t maxClipDistances; uint32_t maxCullDistances;
    uint32_t maxCombinedClipAndCullDistances; uint32_t discreteQueuePriorities;
    float pointSizeRange[2]; float lineWidthRange[2]; float pointSizeGranularity;
    float lineWidthGranularity; VkBool32 strictLines; VkBool32 standardSampleLocations;
    VkDeviceSize optimalBufferCopyOffsetAlignment; VkDeviceSize optimalBufferCopyRowPitchAlignment;
    VkDeviceSize nonCoherentAtomSize;
} VkPhysicalDeviceLimits;

typedef struct VkPhysicalDeviceSparseProperties {
    VkBool32 residencyStandard2DBlockShape; VkBool32 residencyStandard2DMultisampleBlockShape;
    VkBool32 residencyStandard3DBlockShape; VkBool32 residencyAlignedMipSize;
    VkBool32 residencyNonResidentStrict;
} VkPhysicalDeviceSparseProperties;

typedef struct VkPhysicalDeviceProperties {
    uint32_t apiVersion; uint32_t driverVersion; uint32_t vendorID; uint32_t deviceID;
    int32_t deviceType; char deviceName[256]; uint8_t pipelineCacheUUID[16];
    VkPhysicalDeviceLimits limits; VkPhysicalDeviceSparseProperties sparseProperties;
} VkPhysicalDeviceProperties;

typedef struct VkPhysicalDeviceProperties2 {
    VkStructureType sType; void *pNext; VkPhysicalDeviceProperties properties;
} VkPhysicalDeviceProperties2;

typedef struct VkPhysicalDeviceSubgroupProperties {
    VkStructureType sType; void *pNext; uint32_t subgroupSize; VkFlags supportedStages;
    VkFlags supportedOperations; VkBool32 quadOperationsInAllStages;
} VkPhysicalDeviceSubgroupProperties;

typedef struct VkExtent3D { uint32_t width; uint32_t height; uint32_t depth; } VkExtent3D;

typedef struct VkQueueFamilyProperties {
    VkFlags queueFlags; uint32_t queueCount; uint32_t timestampValidBits;
    VkExtent3D minImageTransferGranularity;
} VkQueueFamilyProperties;

typedef struct VkMemoryType { VkFlags propertyFlags; uint32_t heapIndex; } VkMemoryType;
typedef struct VkMemoryHeap { VkDeviceSize size; VkFlags flags; } VkMemoryHeap;
typedef struct VkPhysicalDeviceMemoryProperties {
    uint32_t memoryTypeCount; VkMemoryType memoryTypes[32];
    uint32_t memoryHeapCount; VkMemoryHeap memoryHeaps[16];
} VkPhysicalDeviceMemoryProperties;

typedef struct VkDeviceQueueCreateInfo {
    VkStructureType sType; const void *pNext; VkFlags flags; uint32_t queueFamilyIndex;
    uint32_t queueCount; const float *pQueuePriorities;
} VkDeviceQueueCreateInfo;

typedef struct VkDeviceCreateInfo {
    VkStructureType sType; const void *pNext; VkFlags flags;
    uint32_t queueCreateInfoCount; const VkDeviceQueueCreateInfo *pQueueCreateInfos;
    uint32_t enabledLayerCount; const char *const *ppEnabledLayerNames;
    uint32_t enabledExtensionCount; const char *const *ppEnabledExtensionNames;
    const void *pEnabledFeatures;
} VkDeviceCreateInfo;

typedef struct VkBufferCreateInfo {
    VkStructureType sType; const void *pNext; VkFlags flags; VkDeviceSize size;
    VkFlags usage; int32_t sharingMode; uint32_t queueFamilyIndexCount;
    const uint32_t *pQueueFamilyIndices;
} VkBufferCreateInfo;

typedef struct VkMemoryRequirements {
    VkDeviceSize size; VkDeviceSize alignment; uint32_t memoryTypeBits;
} VkMemoryRequirements;

typedef struct VkMemoryAllocateInfo {
    VkStructureType sType; const void *pNext; VkDeviceSize allocationSize;
    uint32_t memoryTypeIndex;
} VkMemoryAllocateInfo;

typedef struct VkShaderModuleCreateInfo {
    VkStructureType sType; const void *pNext; VkFlags flags; size_t codeSize;
    const uint32_t *pCode;
} VkShaderModuleCreateInfo;

typedef struct VkDescriptorSetLayoutBinding {
    uint32_t binding; int32_t descriptorType; uint32_t descriptorCount; VkFlags stageFlags;
    const void *pImmutableSamplers;
} VkDescriptorSetLayoutBinding;

typedef struct VkDescriptorSetLayoutCreateInfo {
    VkStructureType sType; const void *pNext; VkFlags flags; uint32_t bindingCount;
    const VkDescriptorSetLayoutBinding *pBindings;
} VkDescriptorSetLayoutCreateInfo;

typedef struct VkPushConstantRange {
    VkFlags stageFlags; uint32_t offset; uint32_t size;
} VkPushConstantRange;

typedef struct VkPipelineLayoutCreateInfo {
    VkStructureType sType; const void *pNext; VkFlags flags; uint32_t setLayoutCount;
    const VkDescriptorSetLayout *pSetLayouts; uint32_t pushConstantRangeCount;
    const VkPushConstantRange *pPushConstantRanges;
} VkPipelineLayoutCreateInfo;

typedef struct VkPipelineShaderStageCreateInfo {
    VkStructureType sType; const void *pNext; VkFlags flags; int32_t stage;
    VkShaderModule module; const char *pName; const void *pSpecializationInfo;
} VkPipelineShaderStageCreateInfo;

typedef struct VkComputePipelineCreateInfo {
    VkStructureType sType; const void *pNext; VkFlags flags;
    VkPipelineShaderStageCreateInfo stage; VkPipelineLayout layout;
    VkPipeline basePipelineHandle; int32_t basePipelineIndex;
} VkComputePipelineCreateInfo;

typedef struct VkDescriptorPoolSize {
    int32_t type; uint32_t descriptorCount;
} VkDescriptorPoolSize;

typedef struct VkDescriptorPoolCreateInfo {
    VkStructureType sType; const void *pNext; VkFlags flags; uint32_t maxSets;
    uint32_t poolSizeCount; const VkDescriptorPoolSize *pPoolSizes;
} VkDescriptorPoolCreateInfo;

typedef struct VkDescriptorSetAllocateInfo {
    VkStructureType sType; const void *pNext; VkDescriptorPool descriptorPool;
    uint32_t descriptorSetCount; const VkDescriptorSetLayout *pSetLayouts;
} VkDescriptorSetAllocateInfo;

typedef struct VkDescriptorBufferInfo {
    VkBuffer buffer; VkDeviceSize offset; VkDeviceSize range;
} VkDescriptorBufferInfo;

typedef struct VkWriteDescriptorSet {
    VkStructureType sType; const void *pNext; VkDescriptorSet dstSet; uint32_t dstBinding;
    uint32_t dstArrayElement; uint32_t descriptorCount; int32_t descriptorType;
    const void *pImageInfo; const VkDescriptorBufferInfo *pBufferInfo;
    const void *pTexelBufferView;
} VkWriteDescriptorSet;

typedef struct VkCommandPoolCreateInfo {
    VkStructureType sType; const void *pNext; VkFlags flags; uint32_t queueFamilyIndex;
} VkCommandPoolCreateInfo;

typedef struct VkCommandBufferAllocateInfo {
    VkStructureType sType; const void *pNext; VkCommandPool commandPool; int32_t level;
    uint32_t commandBufferCount;
} VkCommandBufferAllocateInfo;

typedef struct VkCommandBufferBeginInfo {
    VkStructureType sType; const void *pNext; VkFlags flags; const void *pInheritanceInfo;
} VkCommandBufferBeginInfo;

typedef struct VkBufferCopy {
    VkDeviceSize srcOffset; VkDeviceSize dstOffset; VkDeviceSize size;
} VkBufferCopy;

typedef struct VkMemoryBarrier {
    VkStructureType sType; const void *pNext; VkFlags srcAccessMask; VkFlags dstAccessMask;
} VkMemoryBarrier;

typedef struct VkSubmitInfo {
    VkStructureType sType; const void *pNext; uint32_t waitSemaphoreCount;
    const void *pWaitSemaphores; const VkFlags *pWaitDstStageMask;
    uint32_t commandBufferCount; const VkCommandBuffer *pCommandBuffers;
    uint32_t signalSemaphoreCount; const void *pSignalSemaphores;
} VkSubmitInfo;

typedef struct VkFenceCreateInfo {
    VkStructureType sType; const void *pNext; VkFlags flags;
} VkFenceCreateInfo;

VkResult vkCreateInstance(const VkInstanceCreateInfo *, const void *, VkInstance *);
void vkDestroyInstance(VkInstance, const void *);
VkResult vkEnumeratePhysicalDevices(VkInstance, uint32_t *, VkPhysicalDevice *);
void vkGetPhysicalDeviceProperties(VkPhysicalDevice, VkPhysicalDeviceProperties *);
void vkGetPhysicalDeviceProperties2(VkPhysicalDevice, VkPhysicalDeviceProperties2 *);
void vkGetPhysicalDeviceQueueFamilyProperties(VkPhysicalDevice, uint32_t *,
                                              VkQueueFamilyProperties *);
void vkGetPhysicalDeviceMemoryProperties(VkPhysicalDevice,
                                         VkPhysicalDeviceMemoryProperties *);
VkResult vkCreateDevice(VkPhysicalDevice, const VkDeviceCreateInfo *, const void *, VkDevice *);
void vkDestroyDevice(VkDevice, const void *);
void vkGetDeviceQueue(VkDevice, uint32_t, uint32_t, VkQueue *);
VkResult vkDeviceWaitIdle(VkDevice);
VkResult vkCreateBuffer(VkDevice, const VkBufferCreateInfo *, const void *, VkBuffer *);
void vkDestroyBuffer(VkDevice, VkBuffer, const void *);
void vkGetBufferMemoryRequirements(VkDevice, VkBuffer, VkMemoryRequirements *);
VkResult vkAllocateMemory(VkDevice, const VkMemoryAllocateInfo *, const void *, VkDeviceMemory *);
void vkFreeMemory(VkDevice, VkDeviceMemory, const void *);
VkResult vkBindBufferMemory(VkDevice, VkBuffer, VkDeviceMemory, VkDeviceSize);
VkResult vkMapMemory(VkDevice, VkDeviceMemory, VkDeviceSize, VkDeviceSize, VkFlags, void **);
void vkUnmapMemory(VkDevice, VkDeviceMemory);
VkResult vkCreateShaderModule(VkDevice, const VkShaderModuleCreateInfo *, const void *,
                              VkShaderModule *);
void vkDestroyShaderModule(VkDevice, VkShaderModule, const void *);
VkResult vkCreateDescriptorSetLayout(VkDevice, const VkDescriptorSetLayoutCreateInfo *,
                                     const void *, VkDescriptorSetLayout *);
void vkDestroyDescriptorSetLayout(VkDevice, VkDescriptorSetLayout, const void *);
VkResult vkCreatePipelineLayout(VkDevice, const VkPipelineLayoutCreateInfo *, const void *,
                                VkPipelineLayout *);
void vkDestroyPipelineLayout(VkDevice, VkPipelineLayout, const void *);
VkResult vkCreateComputePipelines(VkDevice, VkPipelineCache, uint32_t,
                                  const VkComputePipelineCreateInfo *, const void *, VkPipeline *);
void vkDestroyPipeline(VkDevice, VkPipeline, const void *);
VkResult vkCreateDescriptorPool(VkDevice, const VkDescriptorPoolCreateInfo *, const void *,
                                VkDescriptorPool *);
void vkDestroyDescriptorPool(VkDevice, VkDescriptorPool, const void *);
VkResult vkResetDescriptorPool(VkDevice, VkDescriptorPool, VkFlags);
VkResult vkAllocateDescriptorSets(VkDevice, const VkDescriptorSetAllocateInfo *,
                                  VkDescriptorSet *);
void vkUpdateDescriptorSets(VkDevice, uint32_t, const VkWriteDescriptorSet *, uint32_t,
                            const void *);
VkResult vkCreateCommandPool(VkDevice, const VkCommandPoolCreateInfo *, const void *,
                             VkCommandPool *);
void vkDestroyCommandPool(VkDevice, VkCommandPool, const void *);
VkResult vkAllocateCommandBuffers(VkDevice, const VkCommandBufferAllocateInfo *,
                                  VkCommandBuffer *);
void vkFreeCommandBuffers(VkDevice, VkCommandPool, uint32_t, const VkCommandBuffer *);
VkResult vkBeginCommandBuffer(VkCommandBuffer, const VkCommandBufferBeginInfo *);
VkResult vkEndCommandBuffer(VkCommandBuffer);
void vkCmdBindPipeline(VkCommandBuffer, int32_t, VkPipeline);
void vkCmdBindDescriptorSets(VkCommandBuffer, int32_t, VkPipelineLayout, uint32_t, uint32_t,
                             const VkDescriptorSet *, uint32_t, const uint32_t *);
void vkCmdPushConstants(VkCommandBuffer, VkPipelineLayout, VkFlags, uint32_t, uint32_t,
                        const void *);
void vkCmdDispatch(VkCommandBuffer, uint32_t, uint32_t, uint32_t);
void vkCmdCopyBuffer(VkCommandBuffer, VkBuffer, VkBuffer, uint32_t, const VkBufferCopy *);
void vkCmdPipelineBarrier(VkCommandBuffer, VkFlags, VkFlags, VkFlags, uint32_t,
                          const VkMemoryBarrier *, uint32_t, const void *, uint32_t,
                          const void *);
VkResult vkCreateFence(VkDevice, const VkFenceCreateInfo *, const void *, VkFence *);
void vkDestroyFence(VkDevice, VkFence, const void *);
VkResult vkResetFences(VkDevice, uint32_t, const VkFence *);
VkResult vkWaitForFences(VkDevice, uint32_t, const VkFence *, VkBool32, uint64_t);
VkResult vkQueueSubmit(VkQueue, uint32_t, const VkSubmitInfo *, VkFence);
"""

# VkStructureType values (Vulkan 1.0 core, plus the two 1.1 ones used).
ST_APPLICATION_INFO = 0
ST_INSTANCE_CREATE_INFO = 1
ST_DEVICE_QUEUE_CREATE_INFO = 2
ST_DEVICE_CREATE_INFO = 3
ST_SUBMIT_INFO = 4
ST_MEMORY_ALLOCATE_INFO = 5
ST_FENCE_CREATE_INFO = 8
ST_BUFFER_CREATE_INFO = 12
ST_SHADER_MODULE_CREATE_INFO = 16
ST_PIPELINE_SHADER_STAGE_CREATE_INFO = 18
ST_COMPUTE_PIPELINE_CREATE_INFO = 29
ST_PIPELINE_LAYOUT_CREATE_INFO = 30
ST_DESCRIPTOR_SET_LAYOUT_CREATE_INFO = 32
ST_DESCRIPTOR_POOL_CREATE_INFO = 33
ST_DESCRIPTOR_SET_ALLOCATE_INFO = 34
ST_WRITE_DESCRIPTOR_SET = 35
ST_COMMAND_POOL_CREATE_INFO = 39
ST_COMMAND_BUFFER_ALLOCATE_INFO = 40
ST_COMMAND_BUFFER_BEGIN_INFO = 42
ST_MEMORY_BARRIER = 46
ST_PHYSICAL_DEVICE_PROPERTIES_2 = 1000059001
ST_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES = 1000094000

API_VERSION_1_1 = (1 << 22) | (1 << 12)
QUEUE_COMPUTE_BIT = 0x2
QUEUE_GRAPHICS_BIT = 0x1
MEMORY_DEVICE_LOCAL = 0x1
MEMORY_HOST_VISIBLE = 0x2
MEMORY_HOST_COHERENT = 0x4
BUFFER_USAGE_TRANSFER_SRC = 0x1
BUFFER_USAGE_TRANSFER_DST = 0x2
BUFFER_USAGE_STORAGE = 0x20
DESCRIPTOR_TYPE_STORAGE_BUFFER = 7
SHADER_STAGE_COMPUTE = 0x20
PIPELINE_BIND_POINT_COMPUTE = 1
COMMAND_BUFFER_LEVEL_PRIMARY = 0
COMMAND_POOL_RESET_COMMAND_BUFFER = 0x2
COMMAND_BUFFER_ONE_TIME_SUBMIT = 0x1
DESCRIPTOR_POOL_FREE_DESCRIPTOR_SET = 0x1
PIPELINE_STAGE_TRANSFER = 0x1000
PIPELINE_STAGE_COMPUTE_SHADER = 0x800
PIPELINE_STAGE_HOST = 0x4000
ACCESS_SHADER_READ = 0x20
ACCESS_SHADER_WRITE = 0x40
ACCESS_TRANSFER_READ = 0x800
ACCESS_TRANSFER_WRITE = 0x1000
ACCESS_HOST_READ = 0x2000
ACCESS_HOST_WRITE = 0x4000
SUBGROUP_FEATURE_BASIC = 0x1
SUBGROUP_FEATURE_ARITHMETIC = 0x4
DEVICE_TYPE_NAMES = {0: "other", 1: "integrated GPU", 2: "discrete GPU", 3: "virtual GPU", 4: "CPU"}
WHOLE_SIZE = 0xFFFFFFFFFFFFFFFF
SUCCESS = 0
_RESULT_NAMES = {
    -1: "VK_ERROR_OUT_OF_HOST_MEMORY",
    -2: "VK_ERROR_OUT_OF_DEVICE_MEMORY",
    -3: "VK_ERROR_INITIALIZATION_FAILED",
    -4: "VK_ERROR_DEVICE_LOST",
    -5: "VK_ERROR_MEMORY_MAP_FAILED",
    -6: "VK_ERROR_LAYER_NOT_PRESENT",
    -7: "VK_ERROR_EXTENSION_NOT_PRESENT",
    -8: "VK_ERROR_FEATURE_NOT_PRESENT",
    -9: "VK_ERROR_INCOMPATIBLE_DRIVER",
    2: "VK_TIMEOUT",
}
LOADER_NAMES = ("libvulkan.so.1", "libvulkan.so", "libvulkan.1.dylib", "vulkan-1.dll")

ffi = FFI()
ffi.cdef(CDEF)


class VulkanUnavailableError(Ds4Error):
    """No usable Vulkan here (no loader, no device, no shaders); the message says which."""


@functools.cache
def lib() -> Any:
    """The loader, opened once; VulkanUnavailableError naming what was tried if there is none."""
    errors = []
    for name in LOADER_NAMES:
        try:
            return ffi.dlopen(name)
        except OSError as exc:
            errors.append(f"{name}: {exc}")
    raise VulkanUnavailableError(
        "Vulkan unavailable: no Vulkan loader (install libvulkan1 and a driver, e.g. "
        "mesa-vulkan-drivers or the GPU vendor's); tried " + "; ".join(errors)
    )


def check(result: int, what: str) -> None:
    """Raise a Ds4Error naming the call and the VkResult unless it succeeded."""
    if result != SUCCESS:
        name = _RESULT_NAMES.get(int(result), f"VkResult {int(result)}")
        raise Ds4Error(f"Vulkan {what} failed: {name}")
