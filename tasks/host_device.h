// The one marker of code that compiles for both the host and CUDA devices: SP_HD, and SP_HDI
// for code to inline as well.
#pragma once
#ifdef __CUDACC__
#define SP_HD __host__ __device__
#define SP_HDI __host__ __device__ __forceinline__
#else
#define SP_HD
#define SP_HDI inline
#endif
