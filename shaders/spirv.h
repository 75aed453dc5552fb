// The shaders as SPIR-V words, compiled by glslc when Spindle was built.
#pragma once
#include <cstdint>
#include <span>

namespace spindle::shaders {

// persistent.comp: the Vulkan executor's worker.
std::span<const uint32_t> persistent();
// persistent.comp whose traces record each worker's SM (gl_SMIDNV): for devices with
// VK_NV_shader_sm_builtins only, which the module's capability needs.
std::span<const uint32_t> persistent_sm_ids();
// numerics_test.comp: numerics.glsl's functions over arrays, for tests/vulkan_numerics.cpp.
std::span<const uint32_t> numerics_test();
// copy.comp: a device-to-device copy, the Vulkan bench's bandwidth ceiling.
std::span<const uint32_t> copy();

}  // namespace spindle::shaders
