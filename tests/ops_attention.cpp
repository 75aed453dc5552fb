// ATTN_CHUNK and ATTN_MERGE (ops/attention.h) against a softmax attention in Eigen.
#include <doctest/doctest.h>

#include "ops/attention.h"
#include "tests/ops_reference.h"

using namespace spindle;
using namespace spindle::test;

TEST_CASE("chunk_positions: equal chunks cover all positions in order") {
  for (uint32_t n = 1; n <= 70; ++n)
    for (uint32_t chunks = 1; chunks <= 80; ++chunks) {
      uint32_t next = 0;
      for (uint32_t c = 0; c < chunks; ++c) {
        const PositionRange r = chunk_positions(n, chunks, c);
        REQUIRE(r.begin == next);
        REQUIRE(r.end >= r.begin);
        REQUIRE(r.end - r.begin <= (n + chunks - 1) / chunks);
        next = r.end;
      }
      REQUIRE(next == n);
    }
}

namespace {

struct AttnCase {
  uint32_t Hq, Hkv, D, context, position, stride;
  std::vector<bf16> q, k_cache, v_cache;

  explicit AttnCase(std::mt19937& rng) {
    Hkv = random_in(rng, 1, 3);
    Hq = Hkv * random_in(rng, 1, 4);
    D = random_in(rng, 1, 160);
    context = random_in(rng, 1, 90);
    position = random_in(rng, 0, context - 1);
    stride = D + random_in(rng, 0, 5);
    q = random_bf16(rng, size_t(Hq) * D, std::ldexp(1.0, int(random_in(rng, 0, 4)) - 1));
    k_cache = random_bf16(rng, size_t(Hkv) * context * stride);
    v_cache = random_bf16(rng, size_t(Hkv) * context * stride);
    for (uint32_t j = 0; j < Hkv; ++j)  // positions past p are never read: make them poison
      for (size_t i = (size_t(j) * context + position + 1) * stride; i < size_t(j + 1) * context * stride; ++i)
        k_cache[i] = v_cache[i] = 0x7fc0;
  }

  AttnChunkArgs args(float* partials, uint32_t chunks) const {
    return {q.data(), k_cache.data(), v_cache.data(), stride, partials, D + 2, Hq, Hkv, D, context, chunks, position};
  }

  // Every chunk tile, then every merge, as two stages of a graph.
  template <class Acc>
  std::vector<bf16> run(uint32_t chunks, std::vector<float>* partials_out = nullptr) const {
    std::vector<float> partials(size_t(Hq) * chunks * (D + 2), 12345.0f);
    attn_chunk_tiles<Acc>(args(partials.data(), chunks), 0, Hkv * chunks);
    std::vector<bf16> out(size_t(Hq) * D);
    attn_merge_heads<Acc>(partials.data(), D + 2, chunks, D, out.data(), 0, Hq);
    if (partials_out) *partials_out = partials;
    return out;
  }

  // Positions [begin, end) of kv head j as Eigen matrices (one row per position).
  Eigen::MatrixXd keys(uint32_t j, uint32_t begin, uint32_t end) const {
    return to_matrix(k_cache.data() + (size_t(j) * context + begin) * stride, end - begin, D, stride);
  }
  Eigen::MatrixXd values(uint32_t j, uint32_t begin, uint32_t end) const {
    return to_matrix(v_cache.data() + (size_t(j) * context + begin) * stride, end - begin, D, stride);
  }
  Eigen::VectorXd scores(uint32_t h, uint32_t begin, uint32_t end) const {
    return keys(h / (Hq / Hkv), begin, end) * to_vector(q.data() + size_t(h) * D, D) / std::sqrt(double(D));
  }

  // softmax(q·K / sqrt(D)) · V over positions 0..p, rounded to bf16 (spec 5.1).
  Eigen::ArrayXd reference_head(uint32_t h) const {
    const Eigen::VectorXd s = scores(h, 0, position + 1);
    const Eigen::VectorXd p = (s.array() - s.maxCoeff()).exp().matrix();
    return ref_bf16((values(h / (Hq / Hkv), 0, position + 1).transpose() * p / p.sum()).array());
  }
};

}  // namespace

TEST_CASE_TEMPLATE("attention: chunks then merge match softmax attention", Acc, float, double) {
  Agreement agree;
  for (uint32_t seed = 0; seed < 80; ++seed) {
    std::mt19937 rng(6000 + seed);
    const AttnCase c(rng);
    const uint32_t chunks = random_in(rng, 1, c.position + 4);  // may exceed the positions
    CAPTURE(seed);
    CAPTURE(chunks);
    const std::vector<bf16> out = c.run<Acc>(chunks);
    for (uint32_t h = 0; h < c.Hq; ++h)
      agree.add({out.begin() + size_t(h) * c.D, out.begin() + size_t(h + 1) * c.D}, to_std(c.reference_head(h)));
  }
  check_tile<Acc>(agree);
}

TEST_CASE_TEMPLATE("attn_chunk_tiles: partials m l acc and empty chunks", Acc, float, double) {
  const double tol = std::is_same_v<Acc, float> ? 2e-5 : 1e-6;  // fp64 partials are stored in f32
  for (uint32_t seed = 0; seed < 40; ++seed) {
    std::mt19937 rng(7000 + seed);
    const AttnCase c(rng);
    const uint32_t chunks = random_in(rng, 1, c.position + 4), n = c.position + 1;
    CAPTURE(seed);
    std::vector<float> partials;
    c.run<Acc>(chunks, &partials);
    const uint32_t size = (n + chunks - 1) / chunks;
    for (uint32_t h = 0; h < c.Hq; ++h)
      for (uint32_t ch = 0; ch < chunks; ++ch) {
        const float* row = partials.data() + (size_t(h) * chunks + ch) * (c.D + 2);
        const uint32_t begin = std::min(n, ch * size), end = std::min(n, begin + size);
        const Eigen::Map<const Eigen::VectorXf> acc(row + 2, c.D);
        if (begin == end) {
          CHECK(row[0] == -INFINITY);
          CHECK(row[1] == 0.0f);
          CHECK(acc.isZero(0));
          continue;
        }
        const Eigen::VectorXd s = c.scores(h, begin, end);
        const Eigen::VectorXd p = (s.array() - s.maxCoeff()).exp().matrix();
        const Eigen::VectorXd want = c.values(h / (c.Hq / c.Hkv), begin, end).transpose() * p;
        CHECK(std::fabs(row[0] - s.maxCoeff()) <= tol * (1 + std::fabs(s.maxCoeff())));
        CHECK(std::fabs(row[1] - p.sum()) <= tol * p.sum() * (1 + std::fabs(s.maxCoeff())));
        CHECK((acc.cast<double>() - want).norm() <= tol * (1 + std::fabs(s.maxCoeff())) * (want.norm() + p.sum()));
      }
  }
}

TEST_CASE_TEMPLATE("attn_merge_head: weighted sum of partials with empty chunks skipped", Acc, float, double) {
  Agreement agree;
  for (uint32_t seed = 0; seed < 200; ++seed) {
    std::mt19937 rng(8000 + seed);
    const uint32_t chunks = random_in(rng, 1, 9), D = random_in(rng, 1, 64), stride = D + 2;
    std::normal_distribution<float> normal;
    std::vector<float> rows(size_t(chunks) * stride);
    Eigen::ArrayXd m(chunks), l(chunks);
    Eigen::MatrixXd acc(D, chunks);
    for (uint32_t c = 0; c < chunks; ++c) {
      float* row = rows.data() + size_t(c) * stride;
      const bool empty = c > 0 && random_in(rng, 0, 3) == 0;
      row[0] = empty ? -INFINITY : 4 * normal(rng);
      row[1] = empty ? 0.0f : 1.0f + 5 * std::fabs(normal(rng));
      for (uint32_t d = 0; d < D; ++d) row[2 + d] = empty ? 0.0f : 3 * normal(rng);
      m(c) = row[0], l(c) = row[1];
      for (uint32_t d = 0; d < D; ++d) acc(d, c) = row[2 + d];
    }
    const Eigen::ArrayXd w = (m - m.maxCoeff()).exp();  // exp(-inf) = 0 removes the empty chunks
    const Eigen::ArrayXd want = ref_bf16((acc * w.matrix()).array() / (l * w).sum());
    std::vector<bf16> out(D);
    attn_merge_head<Acc>(rows.data(), stride, chunks, D, out.data());
    agree.add(out, to_std(want));
  }
  check_tile<Acc>(agree);
}

TEST_CASE_TEMPLATE("attention: one chunk and many chunks agree within f32 rounding", Acc, float, double) {
  Agreement agree;
  for (uint32_t seed = 0; seed < 60; ++seed) {
    std::mt19937 rng(9000 + seed);
    const AttnCase c(rng);
    const std::vector<bf16> one = c.run<Acc>(1);
    const std::vector<bf16> many = c.run<Acc>(random_in(rng, 2, c.position + 4));
    std::vector<double> one_values(one.size());
    for (size_t i = 0; i < one.size(); ++i) one_values[i] = bf16_to_f32(one[i]);
    agree.add(many, one_values);
  }
  INFO("n=" << agree.n << " equal=" << agree.equal << " max_steps=" << agree.max_steps);
  CHECK(agree.max_steps <= 1);
  CHECK(agree.equal >= 0.99 * agree.n);
}
