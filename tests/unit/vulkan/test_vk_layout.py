"""The ABI-mode declarations in vk_api.py have the C headers' layouts (sizes and offsets).

cffi computes layouts from our declarations; a field left out or out of order would be
silent memory corruption. Where vulkan/vulkan.h and a C compiler exist, a tiny C program
prints the real sizeof/offsetof of every declared struct and each must match.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ds4.adapters.compute.vulkan import vk_api
from ds4.adapters.compute.vulkan.vk_api import ffi

HEADER = Path("/usr/include/vulkan/vulkan.h")
CONSTANTS = {
    "ST_APPLICATION_INFO": "VK_STRUCTURE_TYPE_APPLICATION_INFO",
    "ST_INSTANCE_CREATE_INFO": "VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO",
    "ST_DEVICE_QUEUE_CREATE_INFO": "VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO",
    "ST_DEVICE_CREATE_INFO": "VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO",
    "ST_SUBMIT_INFO": "VK_STRUCTURE_TYPE_SUBMIT_INFO",
    "ST_MEMORY_ALLOCATE_INFO": "VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO",
    "ST_FENCE_CREATE_INFO": "VK_STRUCTURE_TYPE_FENCE_CREATE_INFO",
    "ST_BUFFER_CREATE_INFO": "VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO",
    "ST_SHADER_MODULE_CREATE_INFO": "VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO",
    "ST_PIPELINE_SHADER_STAGE_CREATE_INFO": "VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO",
    "ST_COMPUTE_PIPELINE_CREATE_INFO": "VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO",
    "ST_PIPELINE_LAYOUT_CREATE_INFO": "VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO",
    "ST_DESCRIPTOR_SET_LAYOUT_CREATE_INFO": "VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO",
    "ST_DESCRIPTOR_POOL_CREATE_INFO": "VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO",
    "ST_DESCRIPTOR_SET_ALLOCATE_INFO": "VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO",
    "ST_WRITE_DESCRIPTOR_SET": "VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET",
    "ST_COMMAND_POOL_CREATE_INFO": "VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO",
    "ST_COMMAND_BUFFER_ALLOCATE_INFO": "VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO",
    "ST_COMMAND_BUFFER_BEGIN_INFO": "VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO",
    "ST_MEMORY_BARRIER": "VK_STRUCTURE_TYPE_MEMORY_BARRIER",
    "ST_PHYSICAL_DEVICE_PROPERTIES_2": "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2",
    "ST_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES": (
        "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES"
    ),
    "API_VERSION_1_1": "VK_API_VERSION_1_1",
    "QUEUE_COMPUTE_BIT": "VK_QUEUE_COMPUTE_BIT",
    "MEMORY_DEVICE_LOCAL": "VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT",
    "MEMORY_HOST_VISIBLE": "VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT",
    "MEMORY_HOST_COHERENT": "VK_MEMORY_PROPERTY_HOST_COHERENT_BIT",
    "BUFFER_USAGE_TRANSFER_SRC": "VK_BUFFER_USAGE_TRANSFER_SRC_BIT",
    "BUFFER_USAGE_TRANSFER_DST": "VK_BUFFER_USAGE_TRANSFER_DST_BIT",
    "BUFFER_USAGE_STORAGE": "VK_BUFFER_USAGE_STORAGE_BUFFER_BIT",
    "DESCRIPTOR_TYPE_STORAGE_BUFFER": "VK_DESCRIPTOR_TYPE_STORAGE_BUFFER",
    "SHADER_STAGE_COMPUTE": "VK_SHADER_STAGE_COMPUTE_BIT",
    "PIPELINE_BIND_POINT_COMPUTE": "VK_PIPELINE_BIND_POINT_COMPUTE",
    "COMMAND_POOL_RESET_COMMAND_BUFFER": "VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT",
    "COMMAND_BUFFER_ONE_TIME_SUBMIT": "VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT",
    "DESCRIPTOR_POOL_FREE_DESCRIPTOR_SET": "VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT",
    "PIPELINE_STAGE_TRANSFER": "VK_PIPELINE_STAGE_TRANSFER_BIT",
    "PIPELINE_STAGE_COMPUTE_SHADER": "VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT",
    "PIPELINE_STAGE_HOST": "VK_PIPELINE_STAGE_HOST_BIT",
    "ACCESS_SHADER_READ": "VK_ACCESS_SHADER_READ_BIT",
    "ACCESS_SHADER_WRITE": "VK_ACCESS_SHADER_WRITE_BIT",
    "ACCESS_TRANSFER_READ": "VK_ACCESS_TRANSFER_READ_BIT",
    "ACCESS_TRANSFER_WRITE": "VK_ACCESS_TRANSFER_WRITE_BIT",
    "ACCESS_HOST_READ": "VK_ACCESS_HOST_READ_BIT",
    "ACCESS_HOST_WRITE": "VK_ACCESS_HOST_WRITE_BIT",
    "SUBGROUP_FEATURE_BASIC": "VK_SUBGROUP_FEATURE_BASIC_BIT",
    "SUBGROUP_FEATURE_ARITHMETIC": "VK_SUBGROUP_FEATURE_ARITHMETIC_BIT",
}


def _structs() -> list[str]:
    names = []
    for name in ffi.list_types()[0]:  # typedef names
        kind = ffi.typeof(name)
        if kind.kind == "struct":
            names.append(name)
    return sorted(names)


@pytest.mark.skipif(
    not HEADER.exists() or shutil.which("cc") is None,
    reason="needs vulkan/vulkan.h (libvulkan-dev) and a C compiler",
)
def test_declared_structs_and_constants_match_the_c_headers(tmp_path: Path) -> None:
    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include <vulkan/vulkan.h>",
             "int main(void) {"]  # fmt: skip
    expected = []
    for name in _structs():
        lines.append(f'printf("%zu\\n", sizeof({name}));')
        expected.append(ffi.sizeof(name))
        for field, _ in ffi.typeof(name).fields:
            lines.append(f'printf("%zu\\n", offsetof({name}, {field}));')
            expected.append(ffi.offsetof(name, field))
    for py_name, c_name in CONSTANTS.items():
        lines.append(f'printf("%lld\\n", (long long){c_name});')
        expected.append(int(getattr(vk_api, py_name)))
    lines += ["return 0;", "}"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines), encoding="utf-8")
    exe = tmp_path / "layout"
    subprocess.run(["cc", str(src), "-o", str(exe)], check=True, timeout=60)
    got = [int(v) for v in subprocess.run([str(exe)], check=True, capture_output=True,
                                          text=True, timeout=30).stdout.split()]  # fmt: skip
    assert len(_structs()) >= 30
    assert got == expected


def test_every_struct_field_name_is_a_vulkan_name() -> None:
    for name in _structs():
        assert name.startswith("Vk")
        assert ffi.sizeof(name) > 0
