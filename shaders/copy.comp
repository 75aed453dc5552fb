// A device-to-device copy of n 16-byte words by a compute dispatch: the bandwidth ceiling that
// `spindle bench` takes for the Vulkan executor on a GPU. It reads and writes memory the way
// the persistent shader does (vkCmdCopyBuffer may run on a copy engine far below that: 851
// GB/s on the H200, whose SMs copy at 4,300). Each invocation moves kWords words of a
// grid-stride loop per trip, all loaded before the first is stored.
#version 460
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = 256) in;

layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Source { uvec4 w[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) writeonly buffer Destination { uvec4 w[]; };

layout(push_constant) uniform Push {
  Source src;
  Destination dst;
  uint words;
} pc;

const uint kWords = 4u;

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint first = gl_GlobalInvocationID.x; first < pc.words; first += kWords * stride) {
    uvec4 v[kWords];
    [[unroll]] for (uint i = 0u; i < kWords; ++i) {
      const uint w = first + i * stride;
      if (w < pc.words) v[i] = pc.src.w[w];
    }
    [[unroll]] for (uint i = 0u; i < kWords; ++i) {
      const uint w = first + i * stride;
      if (w < pc.words) pc.dst.w[w] = v[i];
    }
  }
}
