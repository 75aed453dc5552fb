// Test kernel for tests/vulkan_numerics.cpp: applies one function of numerics.glsl to every
// element of its inputs, so the test can compare the bits with the host's.
#version 460
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require

#include "sp_constants.glsl"
#include "numerics.glsl"

layout(local_size_x = 64) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Bits { uint w[]; };
layout(push_constant) uniform Push {
  Bits a, b, result;
  uint n, function;
} pc;

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= pc.n) return;
  const float a = uintBitsToFloat(pc.a.w[i]), b = uintBitsToFloat(pc.b.w[i]);
  precise float r = 0.0;
  switch (pc.function) {
    case 0u: r = exact_div(a, b); break;
    case 1u: r = exact_sqrt(a); break;
    case 2u: r = pm_exp(a); break;
    case 3u: r = pm_silu(a); break;
    case 4u: r = pm_rsqrt(a); break;
    case 5u: r = uintBitsToFloat(f32_to_bf16(a)); break;
    case 6u: r = pm_log(a); break;
    case 7u: r = pm_log1p(a); break;
  }
  pc.result.w[i] = floatBitsToUint(r);
}
