// Gated DeltaNet decode ops (ops/gdn.h) and the portable log (ops/pmath.h) against the spec's
// formulas (../shared/spec/qwen-decode-math.md §1.3, §1.4, §4) in double, Eigen for the
// state's algebra, with transformers' rounding points.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "ops/gdn.h"
#include "tests/ops_reference.h"

using namespace spindle;
using namespace spindle::test;

namespace {

// Distance in f32 ulps between a float and a double reference.
double ulps(float got, double want) {
  const double ulp = std::ldexp(1.0, std::ilogb(float(want)) - 23);
  return std::fabs(double(got) - want) / ulp;
}

}  // namespace

TEST_CASE("pm_log within 3 ulp of the C library over normals and subnormals, pm_log1p within 4 over the softplus range") {
  std::mt19937 rng(4100);
  std::uniform_real_distribution<double> exponent(-140, 127), unit(0, 1);
  double worst = 0;
  for (int i = 0; i < 200000; ++i) {
    const float x = float(std::exp2(exponent(rng)) * (1 + unit(rng)));
    if (!std::isfinite(x) || x == 0) continue;
    worst = std::max(worst, ulps(pm_log(x), std::log(double(x))));
  }
  CHECK(worst <= 3.0);
  worst = 0;
  for (int i = 0; i < 200000; ++i) {  // log1p(exp(x)) for x in [-100, 20]: softplus's inputs
    const float y = pm_exp(float(-100 + 120 * unit(rng)));
    worst = std::max(worst, ulps(pm_log1p(y), std::log1p(double(y))));
  }
  CHECK(worst <= 4.0);
  CHECK(std::isnan(pm_log(-1.0f)));
  CHECK(pm_log(0.0f) == -std::numeric_limits<float>::infinity());
  CHECK(pm_log(1.0f) == 0.0f);
  CHECK(pm_log(std::numeric_limits<float>::infinity()) == std::numeric_limits<float>::infinity());
}

TEST_CASE_TEMPLATE("conv_ring_step: the last Kc inputs' weighted sum rounded, SiLU rounded again, the ring by position",
                   Acc, float, double) {
  Agreement agree;
  for (uint32_t seed = 0; seed < 100; ++seed) {
    std::mt19937 rng(4200 + seed);
    const uint32_t Kc = random_in(rng, 1, 6), steps = random_in(rng, 1, 12);
    const std::vector<bf16> w = random_bf16(rng, Kc, 0.5), x = random_bf16(rng, steps);
    std::vector<bf16> ring(Kc, f32_to_bf16(0.0f));  // zero as a sequence starts
    for (uint32_t p = 0; p < steps; ++p) {
      CAPTURE(seed);
      CAPTURE(p);
      double sum = 0;  // the inputs of positions p - Kc + 1 .. p, zero before 0
      for (uint32_t j = 0; j < Kc; ++j)
        if (p + j + 1 >= Kc) sum += double(bf16_to_f32(w[j])) * bf16_to_f32(x[p + j + 1 - Kc]);
      sum = ref_bf16(sum);
      // A reader that does not write sees the same ring and leaves it alone.
      const std::vector<bf16> before = ring;
      const bf16 read = conv_ring_step<Acc>(ring.data(), Kc, w.data(), x[p], p, false);
      CHECK(ring == before);
      const bf16 y = conv_ring_step<Acc>(ring.data(), Kc, w.data(), x[p], p, true);
      CHECK(read == y);
      agree.add({y}, {ref_bf16(sum / (1 + std::exp(-sum)))});
      for (uint32_t s = 0; s < Kc; ++s) CHECK(ring[s] == (s == p % Kc ? x[p] : before[s]));
    }
  }
  check_tile<Acc>(agree);
}

TEST_CASE_TEMPLATE("gdn_gates: beta the rounded sigmoid of b, decay exp(-exp(A_log) softplus(alpha + dt_bias))", Acc,
                   float, double) {
  const double tol = std::is_same_v<Acc, float> ? 1e-6 : 1e-14;
  for (uint32_t seed = 0; seed < 2000; ++seed) {
    std::mt19937 rng(4300 + seed);
    const bf16 b = random_bf16(rng, 1, 3)[0], alpha = random_bf16(rng, 1, 8)[0];
    const bf16 A_log = random_bf16(rng, 1, 1.5, 0.5)[0], dt_bias = random_bf16(rng, 1, 2)[0];
    const double x = double(bf16_to_f32(alpha)) + bf16_to_f32(dt_bias);
    const double sp = x > 20 ? x : std::log1p(std::exp(x));
    const double decay = std::exp(-std::exp(double(bf16_to_f32(A_log))) * sp);
    const GdnGates<Acc> g = gdn_gates<Acc>(b, alpha, A_log, dt_bias);
    CHECK(double(g.beta) == ref_bf16(1 / (1 + std::exp(-double(bf16_to_f32(b))))));
    // exp(g) carries g's relative error times |g|.
    CHECK((decay == 0 ? double(g.decay) == 0
                      : std::fabs(double(g.decay) - decay) <= 4 * tol * (1 + std::fabs(std::log(decay))) * decay + 1e-44));
  }
}

TEST_CASE_TEMPLATE("l2_inverse and gdn_query_element: the L2 norm with its eps in the sum, q divided by sqrt(dk) after", Acc,
                   float, double) {
  const double tol = std::is_same_v<Acc, float> ? 1e-6 : 1e-14;
  for (uint32_t seed = 0; seed < 200; ++seed) {
    std::mt19937 rng(4400 + seed);
    const uint32_t d = random_in(rng, 1, 300);
    const std::vector<bf16> x = random_bf16(rng, d, seed % 3 ? 1.0 : 1e-4);
    const Eigen::VectorXd xv = to_vector(x.data(), d);
    const double inv = 1 / std::sqrt(xv.squaredNorm() + double(1e-6f));
    const Acc got = l2_inverse<Acc>([&](int i) { return widen<Acc>(x[i]); }, d);
    CHECK(std::fabs(double(got) - inv) <= tol * inv);
    const uint32_t i = random_in(rng, 0, d - 1);
    const double q = xv(i) * inv / std::sqrt(double(d));
    CHECK(std::fabs(double(gdn_query_element<Acc>(widen<Acc>(x[i]), got, d)) - q) <= 2 * tol * std::fabs(q) + 1e-30);
  }
}

TEST_CASE_TEMPLATE("gdn_head_step: decay, read, rank-1 update and the read of the updated state, over several steps", Acc,
                   float, double) {
  Agreement agree;
  double state_err = 0, state_ref = 0;
  for (uint32_t seed = 0; seed < 40; ++seed) {
    std::mt19937 rng(4500 + seed);
    const uint32_t dk = random_in(rng, 1, 140), dv = random_in(rng, 1, 70);
    std::vector<float> S(size_t(dv) * dk, 0.0f);  // [dv][dk], zero as a sequence starts
    Eigen::MatrixXd ref = Eigen::MatrixXd::Zero(dk, dv);  // the spec's S[i][j]
    for (uint32_t step = 0; step < 6; ++step) {
      CAPTURE(seed);
      CAPTURE(step);
      const std::vector<bf16> kx = random_bf16(rng, dk), qx = random_bf16(rng, dk), v = random_bf16(rng, dv);
      const GdnGates<Acc> gates = gdn_gates<Acc>(random_bf16(rng, 1)[0], random_bf16(rng, 1, 2)[0],
                                                 random_bf16(rng, 1, 0.5)[0], random_bf16(rng, 1)[0]);
      auto wide = [](const std::vector<bf16>& h) { return [&h](int i) { return widen<Acc>(h[i]); }; };
      const Acc inv_k = l2_inverse<Acc>(wide(kx), dk), inv_q = l2_inverse<Acc>(wide(qx), dk);
      std::vector<bf16> out(dv);
      gdn_head_step<Acc>(
          S.data(), dk, dv, [&](int i) { return widen<Acc>(kx[i]) * inv_k; },
          [&](int i) { return gdn_query_element<Acc>(widen<Acc>(qx[i]), inv_q, dk); },
          [&](int j) { return widen<Acc>(v[j]); }, gates, out.data());
      // The spec's step in double from the same gates (their own test checks them).
      const Eigen::VectorXd kv = to_vector(kx.data(), dk), qv = to_vector(qx.data(), dk);
      const Eigen::VectorXd k = kv / std::sqrt(kv.squaredNorm() + double(1e-6f));
      const Eigen::VectorXd q = qv / std::sqrt(qv.squaredNorm() + double(1e-6f)) / std::sqrt(double(dk));
      ref *= double(gates.decay);
      const Eigen::VectorXd delta = (to_vector(v.data(), dv) - ref.transpose() * k) * double(gates.beta);
      ref += k * delta.transpose();
      agree.add(out, to_std(ref_bf16((ref.transpose() * q).array())));
      for (uint32_t j = 0; j < dv; ++j)
        for (uint32_t i = 0; i < dk; ++i) {
          const double e = S[size_t(j) * dk + i] - ref(i, j);
          state_err += e * e;
          state_ref += ref(i, j) * ref(i, j);
        }
    }
  }
  check_tile<Acc>(agree);
  CHECK(std::sqrt(state_err / state_ref) < (std::is_same_v<Acc, float> ? 1e-6 : 1e-7));  // f32 storage either way
}

TEST_CASE_TEMPLATE("gated_rms_norm: r(w · r(o · inv)) times silu(z), rounded once more", Acc, float, double) {
  Agreement agree;
  for (uint32_t seed = 0; seed < 200; ++seed) {
    std::mt19937 rng(4600 + seed);
    const uint32_t dv = random_in(rng, 1, 300);
    const std::vector<bf16> o = random_bf16(rng, dv, 0.3), z = random_bf16(rng, dv, 2), w = random_bf16(rng, dv, 0.2, 1);
    const float eps = 1e-6f;
    std::vector<bf16> out(dv);
    gated_rms_norm<Acc>(o.data(), z.data(), w.data(), dv, eps, out.data());
    const Eigen::ArrayXd t = reference_rms_norm(to_vector(o.data(), dv).array(), to_vector(w.data(), dv).array(),
                                                SP_NORM_STANDARD, eps);
    const Eigen::ArrayXd zv = to_vector(z.data(), dv).array();
    agree.add(out, to_std(ref_bf16(t * zv / (1 + (-zv).exp()))));
  }
  check_tile<Acc>(agree);
}

namespace {

// A random Gated DeltaNet layer (spec §4) stepped from an empty state: the tile's views and the
// spec's step in double beside them.
struct GdnCase {
  uint32_t Hk, Hv, dk, dv, Kc, C;
  float eps = 1e-6f;
  std::vector<bf16> conv_w, A_log, dt_bias, norm_w, conv_state;
  std::vector<float> state;
  // The reference: every channel's inputs so far, each value head's state S[i][j] (spec §4.5).
  std::vector<std::vector<double>> inputs;
  std::vector<Eigen::MatrixXd> S;

  explicit GdnCase(std::mt19937& rng) {
    Hk = random_in(rng, 1, 3);
    Hv = Hk * random_in(rng, 1, 3);
    dk = random_in(rng, 1, 40);
    dv = random_in(rng, 1, 40);
    Kc = random_in(rng, 1, 5);
    C = 2 * Hk * dk + Hv * dv;
    conv_w = random_bf16(rng, size_t(C) * Kc, 0.5);
    A_log = random_bf16(rng, Hv, 1.0, 0.5);
    dt_bias = random_bf16(rng, Hv, 1.0);
    norm_w = random_bf16(rng, dv, 0.2, 1.0);
    conv_state.assign(size_t(C) * Kc, 0);
    state.assign(size_t(Hv) * dv * dk, 0.0f);
    inputs.assign(C, {});
    S.assign(Hv, Eigen::MatrixXd::Zero(dk, dv));
  }

  // One step at `position` (tiles in `order`), returning the tile's outputs; `want` gets the
  // reference's.
  template <class Acc>
  std::vector<bf16> step(const std::vector<bf16>& proj, uint32_t position, const std::vector<uint32_t>& order,
                         std::vector<double>& want) {
    std::vector<bf16> out(size_t(Hv) * dv, 0x7fc1);
    const GdnArgs a{proj.data(), conv_w.data(), Kc,      A_log.data(), dt_bias.data(), norm_w.data(),
                    conv_state.data(), Kc,       state.data(), out.data(), Hk, Hv, dk, dv, Kc, position, eps};
    for (uint32_t h : order) gdn_head<Acc>(a, h);

    Eigen::VectorXd y(C);  // the conv's outputs, spec §4.2 with transformers' two roundings
    for (uint32_t c = 0; c < C; ++c) {
      inputs[c].push_back(bf16_to_f32(proj[c]));
      double sum = 0;
      for (uint32_t j = 0; j < Kc; ++j) {
        const int64_t t = int64_t(inputs[c].size()) - int64_t(Kc) + j;
        if (t >= 0) sum += double(bf16_to_f32(conv_w[size_t(c) * Kc + j])) * inputs[c][t];
      }
      sum = ref_bf16(sum);
      y(c) = ref_bf16(sum / (1 + std::exp(-sum)));
    }
    want.assign(out.size(), 0);
    for (uint32_t h = 0; h < Hv; ++h) {
      const uint32_t g = h / (Hv / Hk);
      const Eigen::VectorXd q0 = y.segment(size_t(g) * dk, dk), k0 = y.segment(size_t(Hk + g) * dk, dk);
      const Eigen::VectorXd v = y.segment(size_t(2 * Hk) * dk + size_t(h) * dv, dv);
      const Eigen::VectorXd k = k0 / std::sqrt(k0.squaredNorm() + double(1e-6f));
      const Eigen::VectorXd q = q0 / std::sqrt(q0.squaredNorm() + double(1e-6f)) / std::sqrt(double(dk));
      const double b = bf16_to_f32(proj[C + size_t(Hv) * dv + h]), al = bf16_to_f32(proj[C + size_t(Hv) * dv + Hv + h]);
      const double x = al + double(bf16_to_f32(dt_bias[h]));
      const double decay = std::exp(-std::exp(double(bf16_to_f32(A_log[h]))) * (x > 20 ? x : std::log1p(std::exp(x))));
      const double beta = ref_bf16(1 / (1 + std::exp(-b)));
      S[h] *= decay;
      const Eigen::VectorXd delta = (v - S[h].transpose() * k) * beta;
      S[h] += k * delta.transpose();
      const Eigen::ArrayXd o = ref_bf16((S[h].transpose() * q).array());
      const Eigen::ArrayXd t = reference_rms_norm(o, to_vector(norm_w.data(), dv).array(), SP_NORM_STANDARD, eps);
      const Eigen::ArrayXd z = to_vector(proj.data() + C + size_t(h) * dv, dv).array();
      const Eigen::ArrayXd gated = ref_bf16(t * z / (1 + (-z).exp()));
      for (uint32_t j = 0; j < dv; ++j) want[size_t(h) * dv + j] = gated(j);
    }
    return out;
  }
};

}  // namespace

TEST_CASE_TEMPLATE("gdn_head: value heads in any order over several steps match the spec's layer step", Acc, float,
                   double) {
  Agreement agree;
  for (uint32_t seed = 0; seed < 60; ++seed) {
    std::mt19937 rng(4700 + seed);
    GdnCase c(rng), twin = c;
    CAPTURE(seed);
    std::vector<uint32_t> order(c.Hv);
    for (uint32_t h = 0; h < c.Hv; ++h) order[h] = h;
    const uint32_t steps = random_in(rng, 1, 7);
    for (uint32_t p = 0; p < steps; ++p) {
      const std::vector<bf16> proj = random_bf16(rng, c.C + size_t(c.Hv) * c.dv + 2 * c.Hv, 1.0);
      std::vector<double> want, unused;
      std::vector<uint32_t> shuffled = order;
      std::shuffle(shuffled.begin(), shuffled.end(), rng);
      const std::vector<bf16> out = c.step<Acc>(proj, p, order, want);
      // Any order of the tiles gives the same bits (the group's first value head writes q and k).
      CHECK(twin.step<Acc>(proj, p, shuffled, unused) == out);
      CHECK(twin.state == c.state);
      CHECK(twin.conv_state == c.conv_state);
      agree.add(out, want);
    }
  }
  check_tile<Acc>(agree);
}
