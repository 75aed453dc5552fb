// run_task (ops/run_task.h) on a hand-built view table: operands reach the array-level
// functions, and bad tasks throw spindle::Error.
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "ops/run_task.h"
#include "tests/ops_reference.h"

using namespace spindle;
using namespace spindle::test;

namespace {

// Arenas, views and a step state, as an executor binds them.
struct Bench {
  std::vector<std::vector<uint8_t>> arenas = std::vector<std::vector<uint8_t>>(SP_ARENA_WEIGHTS0 + 1);
  std::vector<uint8_t*> bases;
  std::vector<SpView> views;
  SpGraphParams params{};
  SpStepState state{};

  // A view of `rows` x `cols` (row_stride apart) appended to `arena`, filled with `init`.
  template <class T>
  uint32_t add(uint32_t arena, SpDtype dtype, uint32_t rows, uint32_t cols, uint32_t stride, const std::vector<T>& init) {
    std::vector<uint8_t>& a = arenas[arena];
    const uint64_t offset = (a.size() + 63) / 64 * 64;
    a.resize(offset + size_t(rows) * stride * sizeof(T));
    std::memcpy(a.data() + offset, init.data(), std::min(init.size() * sizeof(T), a.size() - offset));
    views.push_back({arena, dtype, uint32_t(offset), uint32_t(offset >> 32), rows, cols, stride, 0});
    return uint32_t(views.size() - 1);
  }
  TileContext context() {
    bases.clear();
    for (auto& a : arenas) bases.push_back(a.data());
    return {&params, views.data(), bases.data(), &state, nullptr};  // no op needs parameter records here
  }
  template <class T>
  std::vector<T> read(uint32_t view) const {
    const SpView& v = views[view];
    const T* p = reinterpret_cast<const T*>(arenas[v.arena].data() + sp_view_offset(v));
    return {p, p + size_t(v.rows) * v.row_stride};
  }
};

SpTask make_task(uint32_t op, uint32_t t0, uint32_t t1, std::initializer_list<uint32_t> operands) {
  SpTask t{};
  t.op = op;
  t.layer = 3;
  t.tile_begin = t0;
  t.tile_end = t1;
  std::fill(std::begin(t.operand), std::end(t.operand), SP_NO_VIEW);
  std::copy(operands.begin(), operands.end(), t.operand);
  return t;
}

std::string error_of(const SpTask& t, const TileContext& c) {
  try {
    run_task<float>(t, c);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("run_task: GEMV with norm and aliased residual and argmax logits") {
  std::mt19937 rng(21);
  Bench b;
  const uint32_t rows = 37, K = 300, stride = 310;
  b.params.norm_kind = SP_NORM_ZERO_CENTRED;
  b.params.rms_eps = 1e-6f;
  const std::vector<bf16> W = random_bf16(rng, size_t(rows) * stride, 0.05), x = random_bf16(rng, K),
                          norm = random_bf16(rng, K, 0.1), h = random_bf16(rng, rows);
  const uint32_t vW = b.add(SP_ARENA_WEIGHTS0, SP_BF16, rows, K, stride, W);
  const uint32_t vx = b.add(SP_ARENA_WORK, SP_BF16, 1, K, K, x);
  const uint32_t vnorm = b.add(SP_ARENA_WEIGHTS0, SP_BF16, 1, K, K, norm);
  const uint32_t vh = b.add(SP_ARENA_WORK, SP_BF16, 1, rows, rows, h);
  const uint32_t vlogits = b.add(SP_ARENA_WORK, SP_F32, 1, rows, rows, std::vector<float>(rows));
  const uint32_t vargmax = b.add(SP_ARENA_WORK, SP_U32, 3, 2, 2, std::vector<uint32_t>(6));
  const TileContext c = b.context();

  // h = bf16(h + W · normed(x)) in three tasks, the residual aliasing the output.
  for (uint32_t r0 : {0u, 16u, 32u})
    run_task<float>(make_task(SP_OP_GEMV, r0, std::min(rows, r0 + 16), {vW, vx, vnorm, vh, vh, 0u, SP_NO_VIEW, 0u}), c);
  std::vector<bf16> want = h;
  gemv_rows<float>(W.data(), stride, x.data(), K, {norm.data(), SP_NORM_ZERO_CENTRED, 1e-6f}, 0, rows,
                   want.data(), want.data(), nullptr);
  CHECK(b.read<bf16>(vh) == want);

  // Logits without norm, each task writing its partial to slot r0 / 16.
  for (uint32_t r0 : {0u, 16u, 32u})
    run_task<float>(make_task(SP_OP_GEMV, r0, std::min(rows, r0 + 16),
                              {vW, vx, SP_NO_VIEW, vlogits, SP_NO_VIEW, 1u | (r0 / 16) << 16, vargmax, 0u}), c);
  std::vector<float> logits(rows);
  ArgmaxPartial slot1{};
  gemv_rows<float>(W.data(), stride, x.data(), K, {nullptr, 0, 0}, 16, 32, logits.data(), nullptr, &slot1);
  gemv_rows<float>(W.data(), stride, x.data(), K, {nullptr, 0, 0}, 0, 16, logits.data(), nullptr, nullptr);
  gemv_rows<float>(W.data(), stride, x.data(), K, {nullptr, 0, 0}, 32, rows, logits.data(), nullptr, nullptr);
  CHECK(b.read<float>(vlogits) == logits);
  const std::vector<uint32_t> partials = b.read<uint32_t>(vargmax);
  CHECK(partials[3] == slot1.index);
  CHECK(f32_from_bits(partials[2]) == slot1.value);
  const auto top = std::max_element(logits.begin(), logits.end()) - logits.begin();
  CHECK(argmax_of_partials(reinterpret_cast<const ArgmaxPartial*>(partials.data()), 3).index == uint32_t(top));

  CHECK(error_of(make_task(SP_OP_GEMV, 0, 1, {vW, vx, SP_NO_VIEW, vlogits, SP_NO_VIEW, 1u, SP_NO_VIEW, 0u}), c)
            .find("argmax") != std::string::npos);
  CHECK(error_of(make_task(SP_OP_GEMV, 0, 1, {vW, vx, SP_NO_VIEW, vargmax, SP_NO_VIEW, 0u, SP_NO_VIEW, 0u}), c)
            .find("neither bf16 nor f32") != std::string::npos);
}

TEST_CASE("run_task: a GEMV split reads its pieces and groups from operand 7, and refuses bad ones") {
  std::mt19937 rng(22);
  Bench b;
  const uint32_t rows = 21, K = 240, stride = 248;
  b.params.norm_kind = SP_NORM_STANDARD;
  b.params.rms_eps = 1e-6f;
  const std::vector<bf16> W = random_bf16(rng, size_t(rows) * stride, 0.05), x = random_bf16(rng, K);
  const uint32_t vW = b.add(SP_ARENA_WEIGHTS0, SP_BF16, rows, K, stride, W);
  const uint32_t vx = b.add(SP_ARENA_WORK, SP_BF16, 1, K, K, x);
  const uint32_t vy = b.add(SP_ARENA_WORK, SP_BF16, 1, rows, rows, std::vector<bf16>(rows));
  const TileContext c = b.context();
  for (const GemvSplit s : {GemvSplit{6, 2}, GemvSplit{6, 6}, GemvSplit{30, 5}, GemvSplit{10, 1}}) {
    CAPTURE(s.pieces);
    CAPTURE(s.group);
    run_task<float>(make_task(SP_OP_GEMV, 0, rows, {vW, vx, SP_NO_VIEW, vy, SP_NO_VIEW, 0u, SP_NO_VIEW,
                                                    gemv_split_word(s.pieces, s.group)}),
                    c);
    std::vector<bf16> want(rows);
    gemv_rows<float>(W.data(), stride, x.data(), K, {nullptr, 0, 0}, 0, rows, want.data(), nullptr, nullptr, s);
    CHECK(b.read<bf16>(vy) == want);
  }
  auto split_error = [&](uint32_t word) {
    return error_of(make_task(SP_OP_GEMV, 0, 1, {vW, vx, SP_NO_VIEW, vy, SP_NO_VIEW, 0u, SP_NO_VIEW, word}), c);
  };
  CHECK(split_error(7).find("do not divide the row length") != std::string::npos);  // 240 / 7
  CHECK(split_error(60).find("whole octets") != std::string::npos);                  // 4 columns a piece
  CHECK(split_error(6u | 4u << 16).find("groups do not divide") != std::string::npos);
  CHECK(split_error(1u | 3u << 16).find("fewer than 2 pieces") != std::string::npos);
}

TEST_CASE("run_task: EMBED copies the token row in column tiles") {
  std::mt19937 rng(22);
  Bench b;
  const uint32_t V = 20, H = 300;
  const std::vector<bf16> table = random_bf16(rng, size_t(V) * H);
  const uint32_t vtable = b.add(SP_ARENA_WEIGHTS0, SP_BF16, V, H, H, table);
  const uint32_t vout = b.add(SP_ARENA_WORK, SP_BF16, 1, H, H, std::vector<bf16>(H));
  const TileContext c = b.context();
  b.state.token = 7;
  run_task<double>(make_task(SP_OP_EMBED, 0, 128, {vtable, vout}), c);
  run_task<double>(make_task(SP_OP_EMBED, 128, H, {vtable, vout}), c);
  CHECK(b.read<bf16>(vout) == std::vector<bf16>(table.begin() + 7 * H, table.begin() + 8 * H));
}

TEST_CASE("run_task: EMBED of a token past the table throws naming it") {
  Bench b;
  const uint32_t V = 20, H = 30;
  const uint32_t vtable = b.add(SP_ARENA_WEIGHTS0, SP_BF16, V, H, H, std::vector<bf16>(V * H));
  const uint32_t vout = b.add(SP_ARENA_WORK, SP_BF16, 1, H, H, std::vector<bf16>(H));
  const TileContext c = b.context();
  b.state.token = V;
  const std::string e = error_of(make_task(SP_OP_EMBED, 0, H, {vtable, vout}), c);
  CHECK(e.find("token 20") != std::string::npos);
  CHECK(e.find("20 rows") != std::string::npos);
}

TEST_CASE("run_task: an unknown opcode throws") {
  Bench b;
  const TileContext c = b.context();
  for (uint32_t op : {0u, uint32_t(SP_OP_COUNT_), 99u, 0xFFFFFFFFu}) {
    CHECK_THROWS_AS(run_task<float>(make_task(op, 0, 1, {}), c), Error);
    CHECK_THROWS_AS(run_task<double>(make_task(op, 0, 1, {}), c), Error);
  }
}

TEST_CASE("run_task: a position past the KV capacity throws") {
  Bench b;
  b.params.context = 4;
  b.params.n_heads = b.params.n_kv_heads = 1;
  b.params.head_dim = b.params.rotary_dim = 2;
  b.params.attn_chunks = 1;
  b.params.attn_q_splits = 1;
  const uint32_t v = b.add(SP_ARENA_WORK, SP_BF16, 8, 8, 8, std::vector<bf16>(64));
  const TileContext c = b.context();
  b.state.position = 4;
  CHECK(error_of(make_task(SP_OP_ATTENTION, 0, 1, {v, v, v, v, v, v, v, v}), c).find("position 4") != std::string::npos);
}

TEST_CASE("run_task: SAMPLE feeds the prompt then chooses and advances the state") {
  Bench b;
  b.params.vocab = 3;
  b.params.max_steps = 2;
  const uint32_t vlogits = b.add(SP_ARENA_WORK, SP_F32, 1, 3, 3, std::vector<float>{0.5f, 2.0f, 1.0f});
  const uint32_t vargmax = b.add(SP_ARENA_WORK, SP_U32, 1, 2, 2, std::vector<uint32_t>{bits_from_f32(2.0f), 1});
  const uint32_t vforced = b.add(SP_ARENA_STATE, SP_U32, 1, 2, 2, std::vector<uint32_t>{5, 6});
  const uint32_t vout = b.add(SP_ARENA_STATE, SP_U32, 1, 2, 2, std::vector<uint32_t>{0, 0});
  const TileContext c = b.context();
  b.state = {5, 0, 0, 2, 0, 0, 0.0f, 0, 1.0f, 0, {}};
  const SpTask sample = make_task(SP_OP_SAMPLE, 0, 1, {vlogits, vargmax, 1u, vforced, vout});
  run_task<float>(sample, c);  // forced: the prompt's second token
  run_task<float>(sample, c);  // greedy
  CHECK(b.read<uint32_t>(vout) == std::vector<uint32_t>{6, 1});
  CHECK(b.state.token == 1);
  CHECK(b.state.position == 2);
  CHECK(b.state.step == 2);
  CHECK(error_of(sample, c).find("out-token slots") != std::string::npos);
}
