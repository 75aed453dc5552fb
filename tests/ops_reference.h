// Helpers for the op tests: an independent bf16 rounding of doubles, random bf16 data, Eigen
// views of bf16 arrays, and the agreement statistics the tests judge a tile by.
#pragma once
#include <doctest/doctest.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include "ops/bf16.h"
#include "tasks/graph_params.h"

namespace spindle::test {

// v rounded to bf16 (8 significant bits, nearest even, subnormal quantum 2^-133), computed
// from the definition: scale to an integer significand, nearbyint, scale back.
inline double ref_bf16(double v) {
  if (!std::isfinite(v) || v == 0) return v;
  int e;
  std::frexp(v, &e);  // |v| = m * 2^e with m in [0.5, 1)
  const int q = std::max(e - 8, -133);
  const double r = std::ldexp(std::nearbyint(std::ldexp(v, -q)), q);
  return std::fabs(r) > 0x1.fep127 ? std::copysign(INFINITY, v) : r;
}

inline Eigen::ArrayXd ref_bf16(const Eigen::ArrayXd& a) { return a.unaryExpr([](double v) { return ref_bf16(v); }); }

inline bf16 bits_of(double bf16_value) { return f32_to_bf16(float(bf16_value)); }  // exact

inline std::vector<bf16> random_bf16(std::mt19937& rng, size_t n, double sd = 1.0, double mean = 0.0) {
  std::normal_distribution<double> dist(mean, sd);
  std::vector<bf16> v(n);
  for (bf16& x : v) x = f32_to_bf16(float(dist(rng)));
  return v;
}

inline uint32_t random_in(std::mt19937& rng, uint32_t lo, uint32_t hi) {  // [lo, hi]
  return std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
}

// A bf16 array as an Eigen matrix of widened values (rows x cols, `stride` between rows).
inline Eigen::MatrixXd to_matrix(const bf16* p, size_t rows, size_t cols, size_t stride) {
  Eigen::MatrixXd m(rows, cols);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) m(r, c) = bf16_to_f32(p[r * stride + c]);
  return m;
}
inline Eigen::VectorXd to_vector(const bf16* p, size_t n) { return to_matrix(p, n, 1, 1); }

// Distance in bf16 steps between two bf16 values (monotone integer mapping of the bits).
inline int64_t bf16_steps(bf16 a, bf16 b) {
  auto ordered = [](bf16 h) { return (h & 0x8000) ? -int64_t(h & 0x7fff) : int64_t(h); };
  return std::llabs(ordered(a) - ordered(b));
}

// How bf16 outputs compare with reference values that are themselves bf16-rounded, summed
// over every case a test runs.
struct Agreement {
  size_t n = 0, equal = 0, within_one = 0;
  int64_t max_steps = 0;
  double err2 = 0, ref2 = 0;

  void add(const std::vector<bf16>& out, const std::vector<double>& ref) {
    REQUIRE(out.size() == ref.size());
    for (size_t i = 0; i < out.size(); ++i) {
      const int64_t d = bf16_steps(out[i], bits_of(ref[i]));
      n++;
      equal += d == 0;
      within_one += d <= 1;
      max_steps = std::max(max_steps, d);
      const double e = double(bf16_to_f32(out[i])) - ref[i];
      err2 += e * e;
      ref2 += ref[i] * ref[i];
    }
  }
  double rel_err() const { return ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2); }
};

// The fp32 tile against the double reference: rounding points may flip by one bf16 step.
inline void check_fp32(const Agreement& a) {
  INFO("n=" << a.n << " equal=" << a.equal << " within1=" << a.within_one
            << " max_steps=" << a.max_steps << " rel_err=" << a.rel_err());
  CHECK(a.within_one >= 0.999 * a.n);
  CHECK(a.equal >= 0.98 * a.n);
  CHECK(a.rel_err() < 1e-2);
}

// The fp64 tile accumulates in double like the reference, so only a vanishing fraction of
// rounding points can differ.
inline void check_fp64(const Agreement& a) {
  INFO("n=" << a.n << " equal=" << a.equal << " within1=" << a.within_one
            << " max_steps=" << a.max_steps << " rel_err=" << a.rel_err());
  CHECK(a.equal >= 0.9999 * a.n);
  CHECK(a.within_one == a.n);
  CHECK(a.rel_err() < 1e-4);
}

template <class Acc>
void check_tile(const Agreement& a) {
  if constexpr (std::is_same_v<Acc, float>)
    check_fp32(a);
  else
    check_fp64(a);
}

// RMSNorm in double: standard (spec 1.1) r( r(x·inv) · w ), zero-centred (1.2) r( x·inv·(1 + w) ).
inline Eigen::ArrayXd reference_rms_norm(const Eigen::ArrayXd& x, const Eigen::ArrayXd& w, uint32_t kind,
                                         float eps) {
  const double inv = 1.0 / std::sqrt(x.matrix().squaredNorm() / double(x.size()) + double(eps));
  return kind == SP_NORM_STANDARD ? ref_bf16(ref_bf16(x * inv) * w) : ref_bf16(x * inv * (1.0 + w));
}

// x normalised with w, then its first R dims rotated by the RoPE table row cs
// [cos 0..R/2-1 | sin 0..R/2-1] (spec 1.6), in double with the bf16 rounding points.
inline Eigen::ArrayXd reference_norm_rope(const Eigen::ArrayXd& x, const Eigen::ArrayXd& w, uint32_t kind, float eps,
                                          const Eigen::ArrayXd& cs) {
  const Eigen::ArrayXd y = reference_rms_norm(x, w, kind, eps);
  const Eigen::Index half = cs.size() / 2;
  const Eigen::ArrayXd a = y.head(half), b = y.segment(half, half), c = cs.head(half), s = cs.tail(half);
  Eigen::ArrayXd out = y;
  out.head(half) = ref_bf16(ref_bf16(a * c) - ref_bf16(b * s));
  out.segment(half, half) = ref_bf16(ref_bf16(b * c) + ref_bf16(a * s));
  return out;
}

inline std::vector<double> to_std(const Eigen::ArrayXd& a) { return {a.data(), a.data() + a.size()}; }

}  // namespace spindle::test
