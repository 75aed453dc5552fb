// ATTENTION (ops/attention.h) against q/k norms, RoPE and a softmax attention in Eigen.
#include <doctest/doctest.h>

#include <cstring>

#include "ops/attention.h"
#include "tests/ops_reference.h"

using namespace spindle;
using namespace spindle::test;

TEST_CASE("chunk_positions: equal chunks cover all positions in order, nonempty_chunks counts the first non-empty ones") {
  for (uint32_t n = 1; n <= 70; ++n)
    for (uint32_t chunks = 1; chunks <= 80; ++chunks) {
      uint32_t next = 0, nonempty = 0;
      for (uint32_t c = 0; c < chunks; ++c) {
        const PositionRange r = chunk_positions(n, chunks, c);
        REQUIRE(r.begin == next);
        REQUIRE(r.end >= r.begin);
        REQUIRE(r.end - r.begin <= (n + chunks - 1) / chunks);
        if (r.end > r.begin) REQUIRE(nonempty++ == c);  // the non-empty chunks come first
        next = r.end;
      }
      REQUIRE(next == n);
      REQUIRE(nonempty_chunks(n, chunks) == nonempty);
    }
}

namespace {

// A random attention layer at a random position: raw q/k/v heads, norm weights, the RoPE
// table, and K/V caches whose rows before the position hold earlier steps' values.
struct AttnCase {
  uint32_t Hq, Hkv, D, R, context, position, stride, kind;
  float eps = 1e-6f;
  std::vector<bf16> qkv, q_norm, k_norm, rope_table, kv_cache;
  // What the caches hold after the step (the reference's k̂ and v at the position), and q̂.
  std::vector<bf16> want_cache;
  Eigen::MatrixXd q_hat;  // row h: q head h normalised and rotated

  explicit AttnCase(std::mt19937& rng) {
    Hkv = random_in(rng, 1, 3);
    Hq = Hkv * random_in(rng, 1, 4);
    D = 2 * random_in(rng, 1, 80);
    R = random_in(rng, 0, 1) ? D : 2 * random_in(rng, 1, D / 2);
    context = random_in(rng, 1, 90);
    position = random_in(rng, 0, context - 1);
    stride = D + random_in(rng, 0, 5);
    kind = random_in(rng, 0, 1);
    qkv = random_bf16(rng, size_t(Hq + 2 * Hkv) * D, std::ldexp(1.0, int(random_in(rng, 0, 4)) - 1));
    q_norm = random_bf16(rng, D, 0.2, kind == SP_NORM_STANDARD ? 1.0 : 0.0);
    k_norm = random_bf16(rng, D, 0.2, kind == SP_NORM_STANDARD ? 1.0 : 0.0);
    rope_table.resize(size_t(context) * R);
    fill_rope_table(1000000.0f, R, context, rope_table.data());
    kv_cache = random_bf16(rng, size_t(2 * Hkv) * context * stride);
    for (uint32_t j = 0; j < 2 * Hkv; ++j)  // positions from p on are written or never read: poison
      for (size_t i = (size_t(j) * context + position) * stride; i < size_t(j + 1) * context * stride; ++i)
        kv_cache[i] = 0x7fc0;

    auto normed = [&](uint32_t h, const std::vector<bf16>& w) {
      return reference_norm_rope(to_vector(qkv.data() + size_t(h) * D, D).array(), to_vector(w.data(), D).array(),
                                 kind, eps, to_vector(rope_table.data() + size_t(position) * R, R).array());
    };
    want_cache = kv_cache;
    for (uint32_t j = 0; j < Hkv; ++j) {
      const Eigen::ArrayXd k = normed(Hq + j, k_norm);
      for (uint32_t d = 0; d < D; ++d) {
        want_cache[cache_row(j) + d] = bits_of(k(d));
        want_cache[cache_row(Hkv + j) + d] = qkv[size_t(Hq + Hkv + j) * D + d];
      }
    }
    q_hat.resize(Hq, D);
    for (uint32_t h = 0; h < Hq; ++h) q_hat.row(h) = normed(h, q_norm).matrix().transpose();
  }

  // Element index of the position's row in cache row block j (K blocks 0..Hkv-1, then V).
  size_t cache_row(uint32_t j) const { return (size_t(j) * context + position) * stride; }

  // A random number of parts that divides a kv head's q heads.
  uint32_t random_q_splits(std::mt19937& rng) const {
    uint32_t splits;
    do splits = random_in(rng, 1, Hq / Hkv);
    while ((Hq / Hkv) % splits);
    return splits;
  }

  // Every tile in a random order (any task order of the stage), one tile a task, into the
  // outputs given; the arrival counts must be back to zero after.
  template <class Acc>
  std::vector<bf16> run(uint32_t chunks, uint32_t q_splits, std::mt19937& rng, std::vector<bf16>& cache,
                        std::vector<float>& partials) const {
    cache = kv_cache;
    partials.assign(size_t(Hq) * chunks * (D + 2), 12345.0f);
    std::vector<bf16> out(size_t(Hq) * D, 0x7fc1);
    std::vector<uint32_t> arrivals(Hkv * q_splits, 0);
    const AttentionArgs a{qkv.data(), q_norm.data(), k_norm.data(), cache.data(), stride,
                          rope_table.data() + size_t(position) * R, partials.data(), D + 2, out.data(),
                          arrivals.data(), Hq, Hkv, D, R, context, chunks, q_splits, 1, position, kind, eps};
    std::vector<uint32_t> order(Hkv * q_splits * chunks);
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (uint32_t tile : order) attention_tile<Acc>(a, tile);
    CHECK(std::all_of(arrivals.begin(), arrivals.end(), [](uint32_t n) { return n == 0; }));
    return out;
  }
  template <class Acc>
  std::vector<bf16> run(uint32_t chunks, std::mt19937& rng) const {
    std::vector<bf16> cache;
    std::vector<float> partials;
    return run<Acc>(chunks, 1, rng, cache, partials);
  }

  // Positions [begin, end) of K or V block j of `cache` (by default the expected one) as rows.
  Eigen::MatrixXd rows(uint32_t j, uint32_t begin, uint32_t end, const std::vector<bf16>* cache = nullptr) const {
    return to_matrix((cache ? *cache : want_cache).data() + (size_t(j) * context + begin) * stride, end - begin, D,
                     stride);
  }
  Eigen::VectorXd scores(uint32_t h, uint32_t begin, uint32_t end, const Eigen::MatrixXd& q,
                         const std::vector<bf16>* cache = nullptr) const {
    return rows(h / (Hq / Hkv), begin, end, cache) * q.row(h).transpose() / std::sqrt(double(D));
  }
  Eigen::MatrixXd values(uint32_t h, uint32_t begin, uint32_t end) const {
    return rows(Hkv + h / (Hq / Hkv), begin, end);
  }
  // q̂ as the tile computes it (norm_rope_head, checked against Eigen in ops_rope.cpp).
  template <class Acc>
  Eigen::MatrixXd tile_q_hat() const {
    Eigen::MatrixXd q(Hq, D);
    std::vector<bf16> head(D);
    for (uint32_t h = 0; h < Hq; ++h) {
      norm_rope_head<Acc>(qkv.data() + size_t(h) * D, D, R, {q_norm.data(), kind, eps},
                          rope_table.data() + size_t(position) * R, head.data());
      q.row(h) = to_vector(head.data(), D).transpose();
    }
    return q;
  }

  // softmax(q̂·K̂ / sqrt(D)) · V over positions 0..p, rounded to bf16 (spec 5.1).
  Eigen::ArrayXd reference_head(uint32_t h) const {
    const Eigen::VectorXd s = scores(h, 0, position + 1, q_hat);
    const Eigen::VectorXd p = (s.array() - s.maxCoeff()).exp().matrix();
    return ref_bf16((values(h, 0, position + 1).transpose() * p / p.sum()).array());
  }
};

}  // namespace

TEST_CASE_TEMPLATE("attention: tiles in any order append k and v and match softmax attention", Acc, float, double) {
  Agreement agree, appended;
  for (uint32_t seed = 0; seed < 80; ++seed) {
    std::mt19937 rng(6000 + seed);
    const AttnCase c(rng);
    const uint32_t chunks = random_in(rng, 1, c.position + 4);  // may exceed the positions
    const uint32_t q_splits = c.random_q_splits(rng);
    CAPTURE(seed);
    CAPTURE(chunks);
    CAPTURE(q_splits);
    std::vector<bf16> cache;
    std::vector<float> partials;
    const std::vector<bf16> out = c.run<Acc>(chunks, q_splits, rng, cache, partials);
    for (uint32_t h = 0; h < c.Hq; ++h)
      agree.add({out.begin() + size_t(h) * c.D, out.begin() + size_t(h + 1) * c.D}, to_std(c.reference_head(h)));
    for (uint32_t j = 0; j < c.Hkv; ++j) {
      const size_t k = c.cache_row(j), v = c.cache_row(c.Hkv + j);
      std::vector<double> want_k(c.D);
      for (uint32_t d = 0; d < c.D; ++d) want_k[d] = bf16_to_f32(c.want_cache[k + d]);
      appended.add({cache.begin() + k, cache.begin() + k + c.D}, want_k);
      CHECK(std::equal(cache.begin() + v, cache.begin() + v + c.D, c.want_cache.begin() + v));
    }
    // Nothing but the position's rows is written.
    size_t changed = 0;
    for (size_t i = 0; i < cache.size(); ++i) changed += cache[i] != c.kv_cache[i];
    CHECK(changed <= size_t(2) * c.Hkv * c.D);
  }
  check_tile<Acc>(agree);
  check_tile<Acc>(appended);
}

TEST_CASE_TEMPLATE("gated attention: each q head's gate beside it, the output r(o · r(sigmoid(gate)))", Acc, float,
                   double) {
  Agreement agree;
  for (uint32_t seed = 0; seed < 60; ++seed) {
    std::mt19937 rng(6500 + seed);
    const AttnCase c(rng);
    const uint32_t chunks = random_in(rng, 1, c.position + 4), q_splits = c.random_q_splits(rng), D = c.D;
    CAPTURE(seed);
    std::vector<bf16> cache, gated_cache;
    std::vector<float> partials;
    const std::vector<bf16> o = c.run<Acc>(chunks, q_splits, rng, cache, partials);
    // The same heads laid out as q_proj's gated rows: q head h, then its gate; then k and v.
    const std::vector<bf16> gates = random_bf16(rng, size_t(c.Hq) * D, 3);
    std::vector<bf16> qkv;
    for (uint32_t h = 0; h < c.Hq; ++h) {
      qkv.insert(qkv.end(), c.qkv.begin() + size_t(h) * D, c.qkv.begin() + size_t(h + 1) * D);
      qkv.insert(qkv.end(), gates.begin() + size_t(h) * D, gates.begin() + size_t(h + 1) * D);
    }
    qkv.insert(qkv.end(), c.qkv.begin() + size_t(c.Hq) * D, c.qkv.end());
    gated_cache = c.kv_cache;
    std::vector<float> gated_partials(size_t(c.Hq) * chunks * (D + 2));
    std::vector<bf16> out(size_t(c.Hq) * D, 0x7fc1);
    std::vector<uint32_t> arrivals(c.Hkv * q_splits, 0);
    const AttentionArgs a{qkv.data(), c.q_norm.data(), c.k_norm.data(), gated_cache.data(), c.stride,
                          c.rope_table.data() + size_t(c.position) * c.R, gated_partials.data(), D + 2, out.data(),
                          arrivals.data(), c.Hq, c.Hkv, D, c.R, c.context, chunks, q_splits, 1, c.position, c.kind, c.eps,
                          true};
    for (uint32_t tile = c.Hkv * q_splits * chunks; tile-- > 0;) attention_tile<Acc>(a, tile);
    CHECK(gated_cache == cache);  // the same k̂ and v appended
    std::vector<double> want(out.size());
    for (size_t i = 0; i < out.size(); ++i) {
      const double g = bf16_to_f32(gates[i]);
      want[i] = ref_bf16(double(bf16_to_f32(o[i])) * ref_bf16(1 / (1 + std::exp(-g))));
    }
    agree.add(out, want);
  }
  check_tile<Acc>(agree);
}

// The partial math alone: against the q̂ and k̂ the tile used (a one-step difference of a
// rounding point in either would move m by more than the tolerance).
TEST_CASE_TEMPLATE("attention: partials m l acc, empty chunks write none", Acc, float, double) {
  const double tol = std::is_same_v<Acc, float> ? 2e-5 : 1e-6;  // fp64 partials are stored in f32
  for (uint32_t seed = 0; seed < 40; ++seed) {
    std::mt19937 rng(7000 + seed);
    const AttnCase c(rng);
    const uint32_t chunks = random_in(rng, 1, c.position + 4), n = c.position + 1;
    CAPTURE(seed);
    std::vector<bf16> cache;
    std::vector<float> partials;
    c.run<Acc>(chunks, c.random_q_splits(rng), rng, cache, partials);
    const Eigen::MatrixXd q = c.tile_q_hat<Acc>();
    const uint32_t size = (n + chunks - 1) / chunks;
    for (uint32_t h = 0; h < c.Hq; ++h)
      for (uint32_t ch = 0; ch < chunks; ++ch) {
        const float* row = partials.data() + (size_t(h) * chunks + ch) * (c.D + 2);
        const uint32_t begin = std::min(n, ch * size), end = std::min(n, begin + size);
        const Eigen::Map<const Eigen::VectorXf> acc(row + 2, c.D);
        if (begin == end) {  // run's fill, untouched
          CHECK(row[0] == 12345.0f);
          CHECK(row[1] == 12345.0f);
          CHECK((acc.array() == 12345.0f).all());
          continue;
        }
        const Eigen::VectorXd s = c.scores(h, begin, end, q, &cache);
        const Eigen::VectorXd p = (s.array() - s.maxCoeff()).exp().matrix();
        const Eigen::VectorXd want = c.values(h, begin, end).transpose() * p;
        CHECK(std::fabs(row[0] - s.maxCoeff()) <= tol * (1 + std::fabs(s.maxCoeff())));
        CHECK(std::fabs(row[1] - p.sum()) <= tol * p.sum() * (1 + std::fabs(s.maxCoeff())));
        CHECK((acc.cast<double>() - want).norm() <= tol * (1 + std::fabs(s.maxCoeff())) * (want.norm() + p.sum()));
      }
  }
}

TEST_CASE("arrive_last: only the group's last tile of a step is told, and the count restarts") {
  uint32_t count = 0;
  for (uint32_t step = 0; step < 3; ++step) {
    for (uint32_t i = 0; i + 1 < 5; ++i) CHECK_FALSE(arrive_last(count, 5));
    CHECK(arrive_last(count, 5));
    CHECK(count == 0);
  }
  CHECK(arrive_last(count, 1));
}

TEST_CASE_TEMPLATE("attn_merge_head: weighted sum of partials", Acc, float, double) {
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
      row[0] = 4 * normal(rng);
      row[1] = 1.0f + 5 * std::fabs(normal(rng));
      for (uint32_t d = 0; d < D; ++d) row[2 + d] = 3 * normal(rng);
      m(c) = row[0], l(c) = row[1];
      for (uint32_t d = 0; d < D; ++d) acc(d, c) = row[2 + d];
    }
    const Eigen::ArrayXd w = (m - m.maxCoeff()).exp();
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
    const std::vector<bf16> one = c.run<Acc>(1, rng);
    const std::vector<bf16> many = c.run<Acc>(random_in(rng, 2, c.position + 4), rng);
    std::vector<double> one_values(one.size());
    for (size_t i = 0; i < one.size(); ++i) one_values[i] = bf16_to_f32(one[i]);
    agree.add(many, one_values);
  }
  INFO("n=" << agree.n << " equal=" << agree.equal << " max_steps=" << agree.max_steps);
  CHECK(agree.max_steps <= 1);
  CHECK(agree.equal >= 0.99 * agree.n);
}

// Each q head's math is its own, and every split takes the step's k̂ and v from the same rows,
// so splitting a kv head's q heads over tiles changes no bit of the outputs, the partials or
// the caches.
TEST_CASE_TEMPLATE("attention: q-head splits give the bits of one tile a kv head", Acc, float, double) {
  uint32_t split_cases = 0;
  for (uint32_t seed = 0; seed < 60; ++seed) {
    std::mt19937 rng(9500 + seed);
    const AttnCase c(rng);
    const uint32_t chunks = random_in(rng, 1, c.position + 4), q_splits = c.random_q_splits(rng);
    CAPTURE(seed);
    CAPTURE(chunks);
    CAPTURE(q_splits);
    split_cases += q_splits > 1;
    std::vector<bf16> cache_one, cache_split;
    std::vector<float> partials_one, partials_split;
    const std::vector<bf16> one = c.run<Acc>(chunks, 1, rng, cache_one, partials_one);
    const std::vector<bf16> split = c.run<Acc>(chunks, q_splits, rng, cache_split, partials_split);
    CHECK(one == split);
    CHECK(cache_one == cache_split);
    CHECK(std::memcmp(partials_one.data(), partials_split.data(), partials_one.size() * sizeof(float)) == 0);
  }
  CHECK(split_cases >= 20);
}

TEST_CASE_TEMPLATE("attention: a kv head's splits shared by devices, each device's first split appends k and v to its "
                   "own caches", Acc, float, double) {
  uint32_t cases = 0;
  for (uint32_t seed = 0; cases < 20; ++seed) {
    std::mt19937 rng(9000 + seed);
    const AttnCase c(rng);
    const uint32_t group = c.Hq / c.Hkv, share = 2;
    if (group % share) continue;  // each device needs a q head of each kv head
    ++cases;
    CAPTURE(seed);
    // Device s runs splits [s·S/2, (s+1)·S/2) of every kv head, one chunk, on caches of its own;
    // with the one-device rule (share 1) device 1 appends nothing.
    const uint32_t S = group;
    for (const uint32_t kv_share : {share, 1u}) {
      CAPTURE(kv_share);
      for (uint32_t s = 0; s < share; ++s) {
        std::vector<bf16> cache = c.kv_cache, out(size_t(c.Hq) * c.D);
        std::vector<float> partials(size_t(c.Hq) * (c.D + 2));
        std::vector<uint32_t> arrivals(c.Hkv * S, 0);
        const AttentionArgs a{c.qkv.data(), c.q_norm.data(), c.k_norm.data(), cache.data(), c.stride,
                              c.rope_table.data() + size_t(c.position) * c.R, partials.data(), c.D + 2, out.data(),
                              arrivals.data(), c.Hq, c.Hkv, c.D, c.R, c.context, 1, S, kv_share, c.position, c.kind,
                              c.eps};
        for (uint32_t g = 0; g < c.Hkv; ++g)
          for (uint32_t split = s * S / share; split < (s + 1) * S / share; ++split) attention_tile<Acc>(a, g * S + split);
        const bool appends = kv_share == share || s == 0;
        for (uint32_t j = 0; j < 2 * c.Hkv; ++j) {
          const size_t at = c.cache_row(j);
          const bool same = std::equal(cache.begin() + at, cache.begin() + at + c.D, c.kv_cache.begin() + at);
          CHECK(same != appends);  // the poisoned row written, or left
          if (j >= c.Hkv && appends)  // v as the step's projection gave it
            CHECK(std::equal(cache.begin() + at, cache.begin() + at + c.D, c.want_cache.begin() + at));
        }
      }
    }
  }
}
