"""Compute pipelines, created once per shader and kept for the device's lifetime.

Every kernel binds only storage buffers (set 0, bindings 0..n-1) and takes at most
PUSH_BYTES of push constants, so one layout shape serves them all.
"""

from __future__ import annotations

from dataclasses import dataclass

from ds4.adapters.compute.vulkan import vk_api as vk
from ds4.adapters.compute.vulkan.device import VulkanDevice
from ds4.adapters.compute.vulkan.shaders import load_spirv
from ds4.adapters.compute.vulkan.vk_api import check, ffi

PUSH_BYTES = 128  # the minimum every Vulkan device guarantees


@dataclass(frozen=True)
class Pipeline:
    name: str
    n_buffers: int
    set_layout: int
    layout: int
    pipeline: int
    module: int


class PipelineCache:
    """name -> Pipeline, built on first use from NAME.sg.spv or NAME.spv."""

    def __init__(self, dev: VulkanDevice, *, subgroups: bool) -> None:
        self._dev = dev
        self._subgroups = subgroups
        self._pipelines: dict[str, Pipeline] = {}

    def get(self, name: str, n_buffers: int) -> Pipeline:
        have = self._pipelines.get(name)
        if have is None:
            have = self._pipelines[name] = self._build(name, n_buffers)
        return have

    def close(self) -> None:
        lib, device = self._dev.lib, self._dev.device
        for p in self._pipelines.values():
            lib.vkDestroyPipeline(device, p.pipeline, ffi.NULL)
            lib.vkDestroyPipelineLayout(device, p.layout, ffi.NULL)
            lib.vkDestroyDescriptorSetLayout(device, p.set_layout, ffi.NULL)
            lib.vkDestroyShaderModule(device, p.module, ffi.NULL)
        self._pipelines.clear()

    def _build(self, name: str, n_buffers: int) -> Pipeline:
        lib, device = self._dev.lib, self._dev.device
        code = load_spirv(name, subgroups=self._subgroups)
        words = ffi.new("uint32_t[]", len(code) // 4)
        ffi.memmove(words, code, len(code))
        module = ffi.new("VkShaderModule *")
        info = ffi.new("VkShaderModuleCreateInfo *", {
            "sType": vk.ST_SHADER_MODULE_CREATE_INFO, "codeSize": len(code), "pCode": words,
        })  # fmt: skip
        check(lib.vkCreateShaderModule(device, info, ffi.NULL, module), f"shader {name}")
        bindings = ffi.new("VkDescriptorSetLayoutBinding[]", [
            {"binding": i, "descriptorType": vk.DESCRIPTOR_TYPE_STORAGE_BUFFER,
             "descriptorCount": 1, "stageFlags": vk.SHADER_STAGE_COMPUTE}
            for i in range(n_buffers)
        ])  # fmt: skip
        set_info = ffi.new("VkDescriptorSetLayoutCreateInfo *", {
            "sType": vk.ST_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, "bindingCount": n_buffers,
            "pBindings": bindings,
        })  # fmt: skip
        set_layout = ffi.new("VkDescriptorSetLayout *")
        check(lib.vkCreateDescriptorSetLayout(device, set_info, ffi.NULL, set_layout),
              "vkCreateDescriptorSetLayout")  # fmt: skip
        push = ffi.new("VkPushConstantRange *", {
            "stageFlags": vk.SHADER_STAGE_COMPUTE, "offset": 0, "size": PUSH_BYTES,
        })  # fmt: skip
        layout_info = ffi.new("VkPipelineLayoutCreateInfo *", {
            "sType": vk.ST_PIPELINE_LAYOUT_CREATE_INFO, "setLayoutCount": 1,
            "pSetLayouts": set_layout, "pushConstantRangeCount": 1, "pPushConstantRanges": push,
        })  # fmt: skip
        layout = ffi.new("VkPipelineLayout *")
        check(lib.vkCreatePipelineLayout(device, layout_info, ffi.NULL, layout),
              "vkCreatePipelineLayout")  # fmt: skip
        entry = ffi.new("char[]", b"main")
        pipe_info = ffi.new("VkComputePipelineCreateInfo *", {
            "sType": vk.ST_COMPUTE_PIPELINE_CREATE_INFO,
            "stage": {"sType": vk.ST_PIPELINE_SHADER_STAGE_CREATE_INFO,
                      "stage": vk.SHADER_STAGE_COMPUTE, "module": module[0], "pName": entry},
            "layout": layout[0], "basePipelineIndex": -1,
        })  # fmt: skip
        pipeline = ffi.new("VkPipeline *")
        check(lib.vkCreateComputePipelines(device, 0, 1, pipe_info, ffi.NULL, pipeline),
              f"pipeline {name}")  # fmt: skip
        return Pipeline(name, n_buffers, int(set_layout[0]), int(layout[0]), int(pipeline[0]),
                        int(module[0]))  # fmt: skip
