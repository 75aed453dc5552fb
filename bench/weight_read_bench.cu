// How fast one persistent block per SM streams a projection's weights, for each way the
// megakernel's GEMV tile could read them. Every variant computes the same canonical dots
// (device_dot.cuh) of bf16 rows against an input in shared memory, over several matrices back
// to back (a 1-GiB pool, so the L2 holds none of it), and its outputs are checked bit for bit
// against the register variant before it is timed. GB/s counts the weight bytes; "of copy" is
// that over the device-to-device copy bandwidth measured in the same process (read + write).
//
//   regs<R,U>      what the tiles do now: each lane keeps R rows x U 16-byte loads in flight,
//                  then uses them (the batch drains before the next is issued).
//   cp_async<G,D>  each lane copies its own 16-byte pieces of G dot blocks (G x 512 bytes a
//                  warp) into a per-warp ring of D slots with cp.async, D-1 slots ahead, and
//                  reads back only what it copied: no barrier, no registers held in flight.
//   bulk_warp<D>   lane 0 of each warp bulk-copies 4-KB row segments (cp.async.bulk, one
//                  mbarrier a slot) into a per-warp ring of D slots.
//   bulk_block<D>  the weight stream's structure: warp 0 fills a block-wide ring of D 32-KB
//                  stages (8 rows x 4 KB), the block waits for a stage, computes, syncs, and
//                  warp 0 refills the slot.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstring>
#include <random>
#include <vector>

#include "megakernel/cuda_check.h"
#include "megakernel/cuda_executor.h"
#include "megakernel/cuda_handles.h"
#include "megakernel/device_buffer.h"
#include "megakernel/device_dot.cuh"
#include "megakernel/ptx.cuh"
#include "megakernel/tile_layout.h"

using namespace spindle;
using namespace spindle::cuda;

namespace {

constexpr uint32_t kThreads = 256, kWarps = kThreads / 32;
constexpr uint64_t kPoolBytes = 1ull << 30;
constexpr uint32_t kBlockBytes = 512;  // one dot block (256 bf16) of one row, over a warp

struct Problem {
  const bf16* w;  // matrices back to back, rows x K each
  const bf16* x;  // K
  float* y;       // matrices x rows
  uint32_t rows, K, matrices;
};

// The block's rows of every matrix, [begin, end), in whole groups of 8 (rows % 8 == 0).
__device__ void block_rows(const Problem& p, uint32_t& begin, uint32_t& end) {
  const uint64_t groups = p.rows / kWarps;
  begin = uint32_t(groups * blockIdx.x / gridDim.x) * kWarps;
  end = uint32_t(groups * (blockIdx.x + 1) / gridDim.x) * kWarps;
}

__device__ const bf16* stage_x(const Problem& p, uint8_t* smem) {
  bf16* xs = reinterpret_cast<bf16*>(smem);
  stage_to_shared<Src::Data>(p.x, xs, p.K);
  cp_async_wait_all();
  __syncthreads();
  return xs;
}

__device__ __forceinline__ void store_row(const Problem& p, uint32_t m, uint32_t r, float dot) {
  if (lane_id() == 0) p.y[size_t(m) * p.rows + r] = dot;
}

template <int R, int U>
__global__ void __launch_bounds__(kThreads, 1) regs_kernel(Problem p) {
  extern __shared__ __align__(128) uint8_t smem[];
  const bf16* xs = stage_x(p, smem);
  uint32_t begin, end;
  block_rows(p, begin, end);
  for (uint32_t m = 0; m < p.matrices; ++m) {
    const bf16* w = p.w + size_t(m) * p.rows * p.K;
    uint32_t r = begin + warp_id();
    for (; r + (R - 1) * kWarps < end; r += R * kWarps) {
      const bf16* rows[R];
      for (int i = 0; i < R; ++i) rows[i] = w + size_t(r + i * kWarps) * p.K;
      float dots[R];
      warp_dot_rows<Src::Weight, Src::Shared, R, U>(rows, xs, p.K, dots);
      for (int i = 0; i < R; ++i) store_row(p, m, r + i * kWarps, dots[i]);
    }
    for (; r < end; r += kWarps) store_row(p, m, r, warp_dot<Src::Weight, Src::Shared>(w + size_t(r) * p.K, xs, p.K));
  }
}


// The warp's pieces, in order: piece q = (row i, group g) of G dot blocks; K % (256 G) == 0.
template <int G, int D>
__global__ void __launch_bounds__(kThreads, 1) cp_async_kernel(Problem p) {
  extern __shared__ __align__(128) uint8_t smem[];
  const bf16* xs = stage_x(p, smem);
  uint8_t* ring = smem + align16(p.K * 2) + warp_id() * D * G * kBlockBytes;
  uint32_t begin, end;
  block_rows(p, begin, end);
  const uint32_t lane = lane_id(), groups = p.K / (G * kDotBlock);
  const uint32_t my_rows = begin + warp_id() < end ? (end - begin - warp_id() + kWarps - 1) / kWarps : 0;
  const uint32_t pieces = my_rows * groups * p.matrices;
  const auto issue = [&](uint32_t q) {
    if (q < pieces) {
      const uint32_t g = q % groups, i = (q / groups) % my_rows, m = q / groups / my_rows;
      const bf16* src = p.w + (size_t(m) * p.rows + begin + warp_id() + i * kWarps) * p.K + g * G * kDotBlock + lane * kDotVec;
      const uint32_t dst = smem_address(ring + (q % D) * G * kBlockBytes + lane * 16);
#pragma unroll
      for (int j = 0; j < G; ++j) cp_async_cg16_l2_128(dst + j * kBlockBytes, src + j * kDotBlock);
    }
    cp_async_commit();  // an empty group too, so wait_group counts pieces
  };
  for (uint32_t q = 0; q + 1 < D; ++q) issue(q);
  float acc = 0.0f;
  for (uint32_t q = 0; q < pieces; ++q) {
    issue(q + D - 1);
    cp_async_wait_group<D - 1>();
    const uint8_t* slot = ring + (q % D) * G * kBlockBytes + lane * 16;
    const uint32_t g = q % groups;
#pragma unroll
    for (int j = 0; j < G; ++j) {
      float b[8];
      unpack_bf16x8(load16<Src::Shared>(xs + (g * G + j) * kDotBlock + lane * kDotVec), b);
      accumulate_bf16x8(acc, load16<Src::Shared>(slot + j * kBlockBytes), b);
    }
    if (g + 1 == groups) {
      const uint32_t i = (q / groups) % my_rows, m = q / groups / my_rows;
      store_row(p, m, begin + warp_id() + i * kWarps, warp_butterfly_sum(acc));
      acc = 0.0f;
    }
  }
  cp_async_wait_group<0>();
}

constexpr uint32_t kSegBytes = 4096;  // a bulk copy: 2048 elements of one row

// Lane `lane`'s part of the dot of segment g of a row, copied to `slot`, against the input.
__device__ __forceinline__ void accumulate_segment(float& acc, const bf16* xs, uint32_t g, const uint8_t* slot,
                                                   uint32_t lane) {
#pragma unroll
  for (uint32_t j = 0; j < kSegBytes / kBlockBytes; ++j) {
    float b[8];
    unpack_bf16x8(load16<Src::Shared>(xs + g * (kSegBytes / 2) + j * kDotBlock + lane * kDotVec), b);
    accumulate_bf16x8(acc, load16<Src::Shared>(slot + j * kBlockBytes + lane * 16), b);
  }
}

// Per-warp bulk copies: piece q = (row i, segment g); K % 2048 == 0.
template <int D>
__global__ void __launch_bounds__(kThreads, 1) bulk_warp_kernel(Problem p) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ __align__(8) uint64_t bars[kWarps][D];
  const bf16* xs = stage_x(p, smem);
  uint8_t* ring = smem + (align16(p.K * 2) + 127) / 128 * 128 + warp_id() * D * kSegBytes;
  const uint32_t lane = lane_id(), w = warp_id();
  if (lane == 0)
    for (int s = 0; s < D; ++s) mbar_init(smem_address(&bars[w][s]), 1);
  mbar_init_fence();
  __syncwarp();
  uint32_t begin, end;
  block_rows(p, begin, end);
  const uint32_t segs = p.K * 2 / kSegBytes;
  const uint32_t my_rows = begin + w < end ? (end - begin - w + kWarps - 1) / kWarps : 0;
  const uint32_t pieces = my_rows * segs * p.matrices;
  const auto issue = [&](uint32_t q) {
    if (lane != 0 || q >= pieces) return;
    const uint32_t g = q % segs, i = (q / segs) % my_rows, m = q / segs / my_rows;
    const bf16* src = p.w + (size_t(m) * p.rows + begin + w + i * kWarps) * p.K + g * (kSegBytes / 2);
    const uint32_t bar = smem_address(&bars[w][q % D]);
    mbar_arrive_expect_tx(bar, kSegBytes);
    bulk_copy_to_shared(smem_address(ring + (q % D) * kSegBytes), src, kSegBytes, bar);
  };
  for (uint32_t q = 0; q + 1 < D; ++q) issue(q);
  float acc = 0.0f;
  for (uint32_t q = 0; q < pieces; ++q) {
    issue(q + D - 1);
    mbar_wait(smem_address(&bars[w][q % D]), (q / D) & 1u);
    const uint8_t* slot = ring + (q % D) * kSegBytes;
    const uint32_t g = q % segs;
    accumulate_segment(acc, xs, g, slot, lane);
    __syncwarp();  // every lane has read the slot before lane 0 refills it
    if (g + 1 == segs) {
      const uint32_t i = (q / segs) % my_rows, m = q / segs / my_rows;
      store_row(p, m, begin + w + i * kWarps, warp_butterfly_sum(acc));
      acc = 0.0f;
    }
  }
}

// Block-wide ring: stage q = (group of 8 rows, segment g) of one matrix; K % 2048 == 0 and the
// block's rows a multiple of 8.
template <int D>
__global__ void __launch_bounds__(kThreads, 1) bulk_block_kernel(Problem p) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ __align__(8) uint64_t bars[D];
  const bf16* xs = stage_x(p, smem);
  uint8_t* ring = smem + (align16(p.K * 2) + 127) / 128 * 128;
  constexpr uint32_t kStage = kWarps * kSegBytes;
  if (threadIdx.x == 0) {
    for (int s = 0; s < D; ++s) mbar_init(smem_address(&bars[s]), 1);
    mbar_init_fence();
  }
  __syncthreads();
  uint32_t begin, end;
  block_rows(p, begin, end);
  const uint32_t segs = p.K * 2 / kSegBytes, groups = (end - begin) / kWarps;
  const uint32_t stages = groups * segs * p.matrices, lane = lane_id(), w = warp_id();
  const auto issue = [&](uint32_t q) {  // warp 0: lane r copies row r's segment
    if (w != 0 || q >= stages) return;
    const uint32_t g = q % segs, i = (q / segs) % groups, m = q / segs / groups;
    const uint32_t bar = smem_address(&bars[q % D]);
    if (lane == 0) mbar_arrive_expect_tx(bar, kStage);
    __syncwarp();
    if (lane < kWarps) {
      const bf16* src = p.w + (size_t(m) * p.rows + begin + i * kWarps + lane) * p.K + g * (kSegBytes / 2);
      bulk_copy_to_shared(smem_address(ring + (q % D) * kStage + lane * kSegBytes), src, kSegBytes, bar);
    }
  };
  for (uint32_t q = 0; q < D; ++q) issue(q);
  float acc = 0.0f;
  for (uint32_t q = 0; q < stages; ++q) {
    mbar_wait(smem_address(&bars[q % D]), (q / D) & 1u);
    const uint8_t* slot = ring + (q % D) * kStage + w * kSegBytes;
    const uint32_t g = q % segs;
    accumulate_segment(acc, xs, g, slot, lane);
    if (g + 1 == segs) {
      const uint32_t i = (q / segs) % groups, m = q / segs / groups;
      store_row(p, m, begin + i * kWarps + w, warp_butterfly_sum(acc));
      acc = 0.0f;
    }
    __syncthreads();  // the stage is free
    issue(q + D);
  }
}

using Kernel = void (*)(Problem);

struct Variant {
  Kernel kernel;
  uint32_t ring_bytes;  // dynamic shared memory past the staged input
};

// The pool, the input and the reference outputs of one shape, shared by its variants.
struct Shape {
  uint32_t rows, K, matrices;
  DeviceBuffer w, x, y;
  std::vector<float> reference;
};

Shape& shape(uint32_t rows, uint32_t K) {
  static std::vector<std::unique_ptr<Shape>> shapes;
  for (auto& s : shapes)
    if (s->rows == rows && s->K == K) return *s;
  auto s = std::make_unique<Shape>();
  s->rows = rows;
  s->K = K;
  s->matrices = uint32_t(kPoolBytes / (uint64_t(rows) * K * 2));
  const uint64_t elems = uint64_t(s->matrices) * rows * K;
  s->w = DeviceBuffer(elems * 2, "the weight pool");
  s->x = DeviceBuffer(uint64_t(K) * 2, "the input");
  s->y = DeviceBuffer(uint64_t(s->matrices) * rows * 4, "the outputs");
  std::mt19937 rng(rows ^ K);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<bf16> host(std::min<uint64_t>(elems, 1u << 24));
  for (auto& h : host) h = f32_to_bf16(normal(rng));
  for (uint64_t done = 0; done < elems; done += host.size())
    SP_CUDA(cudaMemcpy(s->w.data() + done * 2, host.data(), std::min<uint64_t>(host.size(), elems - done) * 2,
                       cudaMemcpyHostToDevice));
  SP_CUDA(cudaMemcpy(s->x.data(), host.data() + 12345, uint64_t(K) * 2, cudaMemcpyHostToDevice));
  shapes.push_back(std::move(s));
  return *shapes.back();
}

uint32_t sm_count() {
  int n = 0;
  SP_CUDA(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0));
  return uint32_t(n);
}

double copy_gbs() {
  static const double gbs = measure_copy_bandwidth_gbs(size_t(2) << 30);
  return gbs;
}

std::vector<float> run(const Shape& s, const Variant& v, cudaStream_t stream, float* ms) {
  const size_t smem = (align16(s.K * 2) + 127) / 128 * 128 + v.ring_bytes;
  SP_CUDA(cudaFuncSetAttribute(v.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const Problem p{s.w.as<bf16>(), s.x.as<bf16>(), s.y.as<float>(), s.rows, s.K, s.matrices};
  const Event start = make_event(), stop = make_event();
  SP_CUDA(cudaMemsetAsync(s.y.data(), 0xff, s.y.bytes(), stream));
  SP_CUDA(cudaEventRecord(start.get(), stream));
  v.kernel<<<sm_count(), kThreads, smem, stream>>>(p);
  SP_CUDA(cudaGetLastError());
  SP_CUDA(cudaEventRecord(stop.get(), stream));
  SP_CUDA(cudaEventSynchronize(stop.get()));
  SP_CUDA(cudaEventElapsedTime(ms, start.get(), stop.get()));
  std::vector<float> y(s.y.bytes() / 4);
  SP_CUDA(cudaMemcpy(y.data(), s.y.data(), s.y.bytes(), cudaMemcpyDeviceToHost));
  return y;
}

void BM_WeightRead(benchmark::State& st, Variant v) {
  const uint32_t rows = uint32_t(st.range(0)), K = uint32_t(st.range(1));
  Shape& s = shape(rows, K);
  const Stream stream = make_stream();
  float ms = 0;
  if (s.reference.empty()) s.reference = run(s, {regs_kernel<4, 2>, 0}, stream.get(), &ms);
  const std::vector<float> y = run(s, v, stream.get(), &ms);  // also the warm-up
  if (std::memcmp(y.data(), s.reference.data(), y.size() * 4) != 0) {
    st.SkipWithError("outputs differ from the register variant's");
    return;
  }
  for (auto _ : st) {
    run(s, v, stream.get(), &ms);
    st.SetIterationTime(ms * 1e-3);
  }
  const double bytes = double(s.matrices) * rows * K * 2;
  st.counters["GB/s"] = benchmark::Counter(bytes * double(st.iterations()) / 1e9, benchmark::Counter::kIsRate);
  st.counters["copy_GB/s"] = copy_gbs();
  st.counters["bytes"] = bytes;
}

// gate_up-like (qwen3-8b: 2 x 12288 rows of 4096), down-like (4096 rows of 12288), and the
// 0.6b's gate_up rows (2 x 3072 of 1024; the per-warp bulk and block variants need K >= 2048).
void shapes_all(benchmark::internal::Benchmark* b) { b->Args({24576, 4096})->Args({4096, 12288})->Args({6144, 1024}); }
void shapes_wide(benchmark::internal::Benchmark* b) { b->Args({24576, 4096})->Args({4096, 12288}); }

#define SP_VARIANT(name, shapes, kernel, ring)                                                   \
  BENCHMARK_CAPTURE(BM_WeightRead, name, Variant{kernel, ring})->Apply(shapes)->UseManualTime()->Unit( \
      benchmark::kMillisecond)->MinTime(0.2)->Repetitions(5)->ReportAggregatesOnly(true)

SP_VARIANT(regs_4x2, shapes_all, (regs_kernel<4, 2>), 0);
SP_VARIANT(regs_4x4, shapes_all, (regs_kernel<4, 4>), 0);
SP_VARIANT(regs_2x8, shapes_all, (regs_kernel<2, 8>), 0);
SP_VARIANT(cp_async_4x4, shapes_all, (cp_async_kernel<4, 4>), kWarps * 4 * 4 * kBlockBytes);
SP_VARIANT(cp_async_4x8, shapes_all, (cp_async_kernel<4, 8>), kWarps * 8 * 4 * kBlockBytes);
SP_VARIANT(cp_async_4x12, shapes_all, (cp_async_kernel<4, 12>), kWarps * 12 * 4 * kBlockBytes);
SP_VARIANT(cp_async_2x16, shapes_all, (cp_async_kernel<2, 16>), kWarps * 16 * 2 * kBlockBytes);
SP_VARIANT(bulk_warp_3, shapes_wide, bulk_warp_kernel<3>, kWarps * 3 * kSegBytes);
SP_VARIANT(bulk_warp_6, shapes_wide, bulk_warp_kernel<6>, kWarps * 6 * kSegBytes);
SP_VARIANT(bulk_block_2, shapes_wide, bulk_block_kernel<2>, 2 * kWarps * kSegBytes);
SP_VARIANT(bulk_block_4, shapes_wide, bulk_block_kernel<4>, 4 * kWarps * kSegBytes);
SP_VARIANT(bulk_block_6, shapes_wide, bulk_block_kernel<6>, 6 * kWarps * kSegBytes);

}  // namespace
