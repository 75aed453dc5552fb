// How the builder splits projection stages into tasks (BuildOptions::stage_tasks and
// rows_per_tile), and that the split never changes a result: every row's dot is computed the
// same way whichever task holds it.
#include <doctest/doctest.h>

#include <functional>
#include <map>
#include <random>

#include "host/executor.h"
#include "tasks/gemv_piece.h"
#include "tests/executors_fixture.h"
#include "tests/hand_built_models.h"

using namespace spindle;

namespace {

Graph tiny_graph(uint32_t stage_tasks, uint32_t rows_per_tile = 0, bool kv_head_waits = false) {
  BuildOptions o;
  o.context = 64;
  o.attn_chunks = 3;
  o.stage_tasks = stage_tasks;
  o.rows_per_tile = rows_per_tile;
  o.kv_head_waits = kv_head_waits;
  return build_decode_graph(tiny_model().weights, o);
}

// The [tile_begin, tile_end) row ranges of the tasks that signal `stage`.
std::vector<std::pair<uint32_t, uint32_t>> stage_tiles(const Graph& g, const std::string& stage) {
  std::vector<std::pair<uint32_t, uint32_t>> tiles;
  for (const SpTask& t : g.tasks)
    if (g.counter_names[t.signal_counter] == stage) tiles.push_back({t.tile_begin, t.tile_end});
  return tiles;
}

}  // namespace

TEST_CASE("rows per task: a multiple of 8, at least 8, the fewest that give at most stage_tasks tasks") {
  std::mt19937 rng(std::random_device{}());
  constexpr uint32_t m = 8;
  for (int i = 0; i < 2000; ++i) {
    const uint32_t rows = 1 + rng() % 200000, stage_tasks = 1 + rng() % 1000;
    const uint32_t per = rows_per_task_for(rows, stage_tasks);
    CAPTURE(rows);
    CAPTURE(stage_tasks);
    CHECK(per % m == 0);
    CHECK(per >= m);
    const uint32_t tasks = (rows + per - 1) / per;
    if (per > m) {
      CHECK(tasks <= stage_tasks);
      CHECK((rows + per - m - 1) / (per - m) > stage_tasks);  // m rows fewer would need more tasks
    }
  }
}

TEST_CASE("a projection stage of several matrices is split by its rows in all") {
  const ModelConfig& c = tiny_model().weights.config;
  const uint32_t q_rows = c.n_heads * c.head_dim, kv_rows = c.n_kv_heads * c.head_dim;
  for (uint32_t stage_tasks : {1u, 3u, 5u, 132u}) {
    CAPTURE(stage_tasks);
    const Graph g = tiny_graph(stage_tasks);
    const uint32_t per = rows_per_task_for(q_rows + 2 * kv_rows, stage_tasks);
    const auto tiles = stage_tiles(g, "L0.qkv");
    uint32_t covered = 0;
    for (const auto& [b, e] : tiles) {
      CHECK(e - b <= per);
      covered += e - b;
    }
    CHECK(covered == q_rows + 2 * kv_rows);
    CHECK(tiles.size() <= stage_tasks + 2);  // q, k and v each end with a partial task at most
    for (const auto& [b, e] : stage_tiles(g, "L0.gate_up"))
      CHECK(e - b <= rows_per_task_for(c.intermediate, stage_tasks));
  }
}

TEST_CASE("rows_per_tile overrides stage_tasks, stage_tasks 0 without it is refused") {
  for (const auto& [b, e] : stage_tiles(tiny_graph(132, 16), "L0.down")) CHECK(e - b <= 16);
  CHECK(stage_tiles(tiny_graph(132, 16), "L0.down").size() == (tiny_model().weights.config.hidden + 15) / 16);
  CHECK(error_of([] { tiny_graph(0); }).find("stage_tasks must be at least 1") != std::string::npos);
  CHECK(error_of([] { tiny_graph(0, 8); }) == "(no error)");
}

TEST_CASE("the tokens and logits do not depend on how the stages are split") {
  const std::vector<uint32_t> prompt{3, 1, 4, 1, 5};
  ExecutorOptions opt;
  opt.kind = ExecutorKind::Threaded;
  opt.workers = 3;
  const Graph reference = tiny_graph(kDefaultStageTasks);
  const Decoded expect = run_decode(reference, tiny_model().weights, opt, prompt, 6);
  for (uint32_t stage_tasks : {1u, 2u, 7u, 1000u}) {
    CAPTURE(stage_tasks);
    const Graph g = tiny_graph(stage_tasks);
    check_same(run_decode(g, tiny_model().weights, opt, prompt, 6), expect);
  }
  check_same(run_decode(tiny_graph(kDefaultStageTasks, 24), tiny_model().weights, opt, prompt, 6), expect);
}

TEST_CASE("kv_head_waits: each kv head's q, k and v rows are a stage, and its attention tasks wait for that stage alone") {
  const ModelConfig& c = tiny_model().weights.config;
  const uint32_t D = c.head_dim, group = c.n_heads / c.n_kv_heads, chunks = 3;
  // 6 and 7 stage tasks: 3 a kv head, which 24 rows (q 2 tasks, k and v 1 each) would overrun.
  for (uint32_t stage_tasks : {1u, 5u, 6u, 7u, 132u}) {
    CAPTURE(stage_tasks);
    const Graph g = tiny_graph(stage_tasks, 0, true);
    // No more tasks than one stage would have, unless a kv head's three matrices need more.
    for (uint32_t l = 0; l < c.n_layers; ++l) {
      size_t qkv_tasks = 0;
      for (const SpTask& t : g.tasks)
        qkv_tasks += t.layer == l && g.counter_names[t.signal_counter].starts_with("L" + std::to_string(l) + ".qkv");
      CHECK(qkv_tasks <= std::max(stage_tasks, 3 * c.n_kv_heads));
    }
    for (uint32_t l = 0; l < c.n_layers; ++l) {
      const std::string L = "model.layers." + std::to_string(l) + ".self_attn.";
      for (uint32_t kv = 0; kv < c.n_kv_heads; ++kv) {
        CAPTURE(kv);
        const std::string stage = "L" + std::to_string(l) + ".qkv.kv" + std::to_string(kv);
        // The rows each of q, k and v gives the stage: kv's q heads' and its own k and v rows.
        std::map<std::string, std::vector<std::pair<uint32_t, uint32_t>>> rows;
        uint32_t counter = SP_NO_COUNTER;
        for (const SpTask& t : g.tasks)
          if (g.counter_names[t.signal_counter] == stage) {
            rows[g.view_names[t.operand[0]]].push_back({t.tile_begin, t.tile_end});
            counter = t.signal_counter;
          }
        REQUIRE(counter != SP_NO_COUNTER);
        const std::pair<std::string, std::pair<uint32_t, uint32_t>> want[] = {
            {L + "q_proj.weight", {kv * group * D, (kv + 1) * group * D}},
            {L + "k_proj.weight", {kv * D, (kv + 1) * D}},
            {L + "v_proj.weight", {kv * D, (kv + 1) * D}}};
        CHECK(rows.size() == 3);
        for (const auto& named : want) {  // not a structured binding: clang 14 cannot capture one
          const std::string& name = named.first;
          const std::pair<uint32_t, uint32_t>& range = named.second;
          CAPTURE(name);
          uint32_t at = range.first;
          for (const auto& [b, e] : rows[name]) {
            CHECK(b == at);
            at = e;
          }
          CHECK(at == range.second);
        }
        uint32_t attention = 0;
        for (const SpTask& t : g.tasks)
          if (t.op == SP_OP_ATTENTION && t.layer == l && t.tile_begin / chunks == kv) {
            CHECK(t.wait_counter == counter);
            ++attention;
          }
        CHECK(attention == chunks);
      }
    }
  }
}

TEST_CASE("kv_head_waits changes no bit, on either CPU executor and schedule") {
  const std::vector<uint32_t> prompt{3, 1, 4, 1, 5};
  const ExecutorOptions sequential{ExecutorKind::Sequential};
  const Decoded expect = run_decode(tiny_graph(kDefaultStageTasks), tiny_model().weights, sequential, prompt, 6);
  const Graph& g = tiny_head_waits_model().graph;
  check_same(run_decode(g, tiny_model().weights, sequential, prompt, 6), expect);
  for (ScheduleKind schedule : {ScheduleKind::Ticket, ScheduleKind::Static})
    check_same(run_decode(g, tiny_model().weights, {ExecutorKind::Threaded, 3, schedule}, prompt, 6), expect);
}

TEST_CASE("attention's q heads split over tiles change no bit, on either CPU executor and schedule, one chunk or several") {
  const std::vector<uint32_t> prompt{3, 1, 4, 1, 5};
  const ExecutorOptions sequential{ExecutorKind::Sequential};
  for (uint32_t chunks : {1u, 3u}) {
    CAPTURE(chunks);
    BuildOptions o;
    o.context = 64;
    o.attn_chunks = chunks;
    o.attn_q_splits = 1;
    const Decoded expect = run_decode(build_decode_graph(tiny_model().weights, o), tiny_model().weights, sequential,
                                      prompt, 6);
    const TinyModel split = tiny_q_split_model(chunks);
    REQUIRE(split.graph.params.attn_q_splits == 2);
    size_t attention_tasks = 0;
    for (const SpTask& t : split.graph.tasks) attention_tasks += t.op == SP_OP_ATTENTION;
    CHECK(attention_tasks == size_t(split.graph.params.n_layers) * 2 * 2 * chunks);  // kv heads × splits × chunks
    check_same(run_decode(split.graph, split.weights, sequential, prompt, 6), expect);
    for (ScheduleKind schedule : {ScheduleKind::Ticket, ScheduleKind::Static})
      check_same(run_decode(split.graph, split.weights, {ExecutorKind::Threaded, 3, schedule}, prompt, 6), expect);
  }
}

TEST_CASE("q-head splits: by default the most that divide the group within 128 tasks when attention is one chunk, a split that does not divide is refused") {
  CHECK(attn_q_splits_for(1, 32, 4) == 8);     // qwen3-30b-a3b at a short context
  CHECK(attn_q_splits_for(1, 16, 8) == 2);     // qwen3-0.6b
  CHECK(attn_q_splits_for(1, 256, 2) == 64);   // 128 tasks
  CHECK(attn_q_splits_for(1, 96, 32) == 3);    // all 3: 4 would make 128 tasks but does not divide 3
  CHECK(attn_q_splits_for(4, 32, 4) == 1);     // chunks spread the attention already
  CHECK(attn_q_splits_for(1, 8, 8) == 1);
  BuildOptions o;
  o.context = 64;
  o.attn_chunks = 1;
  CHECK(build_decode_graph(tiny_model().weights, o).params.attn_q_splits == 2);
  o.attn_q_splits = 3;
  CHECK(error_of([&] { build_decode_graph(tiny_model().weights, o); }) ==
        "attention q-head splits 3 do not divide a kv head's 2 q heads (num_attention_heads / num_key_value_heads)");
}

TEST_CASE("kv_head_waits with an o_proj split a kv head: o_proj's piece g waits for g's attention alone") {
  const Graph& g = tiny_head_pieces_model().graph;
  const ModelConfig& c = tiny_model().weights.config;
  const uint32_t P = c.n_heads * c.head_dim / c.n_kv_heads;
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    std::map<uint32_t, uint32_t> rows_of_piece;  // piece -> rows it covers
    for (const SpTask& t : g.tasks) {
      if (t.layer != l || t.op != SP_OP_GEMV_PIECE) continue;
      const GemvPiece piece = gemv_piece(t);
      CAPTURE(piece.index);
      CHECK(g.counter_names[t.wait_counter] == "L" + std::to_string(l) + ".attention.kv" + std::to_string(piece.index));
      CHECK(g.counter_names[t.signal_counter] == "L" + std::to_string(l) + ".o_proj");
      const std::string kv = ".kv" + std::to_string(piece.index);
      CHECK(g.view_names[t.operand[0]] == "model.layers." + std::to_string(l) + ".self_attn.o_proj.weight" + kv);
      CHECK(g.views[t.operand[0]].cols == P);
      CHECK(g.views[t.operand[0]].row_stride == c.n_heads * c.head_dim);
      CHECK(g.view_names[t.operand[1]] == "attn_out" + kv);
      CHECK(piece.split.pieces == c.n_kv_heads);
      rows_of_piece[piece.index] += t.tile_end - t.tile_begin;
    }
    CHECK(rows_of_piece.size() == c.n_kv_heads);
    for (const auto& [piece, rows] : rows_of_piece) CHECK(rows == c.hidden);
  }
  // Without the split, with another, or with one kv head (whose "split" of 1 piece is none),
  // kv_head_waits leaves o_proj whole rows.
  BuildOptions four_pieces;
  four_pieces.context = 64;
  four_pieces.attn_chunks = 3;
  four_pieces.kv_head_waits = true;
  four_pieces.o_proj_split = {4, 0};
  BuildOptions no_split = four_pieces;
  no_split.o_proj_split = {};
  const ModelWeights one_kv_head = test::model_with("one-kv-head", 64, 16, 128, 16, test::near_one_or_small, 1);
  for (const Graph& other : {tiny_head_waits_model().graph, build_decode_graph(tiny_model().weights, four_pieces),
                             build_decode_graph(one_kv_head, no_split)})
    for (const SpTask& t : other.tasks) CHECK(t.op != SP_OP_GEMV_PIECE);
}

TEST_CASE("GDN gangs: by default the most members that leave 16 rows each within 128 tasks, a gang that does not divide the value head is refused") {
  CHECK(gdn_gang_for(16, 128) == 8);  // qwen3.5-0.8b: 128 tasks
  CHECK(gdn_gang_for(32, 128) == 4);  // qwen3.5-35b-a3b
  CHECK(gdn_gang_for(48, 128) == 2);  // qwen3.5-27b: 3 would make 144 tasks
  CHECK(gdn_gang_for(4, 16) == 1);    // tiny-qwen3.5: 16 rows a head
  CHECK(gdn_gang_for(200, 128) == 1);
  const ModelWeights w = load_model("synthetic:tiny-qwen3.5");
  BuildOptions o;
  o.context = 32;
  o.gdn_gang = 3;
  CHECK(error_of([&] { build_decode_graph(w, o); }) ==
        "GDN gangs of 3 (--tune gdn-gang): not a divisor of the value head size 16 of at most 255 members");
}

TEST_CASE("validate() names a GDN record whose state rows are not whole heads or a gang's share of one") {
  const ModelWeights w = load_model("synthetic:tiny-qwen3.5");
  BuildOptions o;
  o.context = 32;
  o.gdn_gang = 1;
  const Graph whole = build_decode_graph(w, o);
  o.gdn_gang = 2;
  const Graph gangs = build_decode_graph(w, o);
  const auto broken = [](const Graph& good, auto&& change) {
    Graph g = good;
    change(g, first_task(g, SP_OP_GDN));
    return error_of([&] { validate(g); });
  };
  CHECK(broken(whole, [](Graph& g, size_t i) { g.tasks[i].tile_end -= 1; })
            .find("its state rows 0..15 are not whole value heads of 16") != std::string::npos);
  CHECK(broken(whole, [](Graph& g, size_t i) { g.tasks[i].tile_end = 1000; })
            .find("its tiles end at 1000, past the 64 state rows of the value heads") != std::string::npos);
  // A gang of 2 over 4 rows each: 8 of the head's 16.
  CHECK(broken(gangs, [](Graph& g, size_t i) { g.tasks[i].tile_end -= 4, g.tasks[i + 1].tile_begin -= 4, g.tasks[i + 1].tile_end -= 8; })
            .find("its gang of 2 does not share one value head's 16 state rows (rank 0, rows 0..4)") != std::string::npos);
  CHECK(broken(gangs, [](Graph& g, size_t i) {
          for (size_t j : {i, i + 1}) g.tasks[j].tile_begin += 8, g.tasks[j].tile_end += 8;
        }).find("its gang of 2 does not share one value head's 16 state rows (rank 0, rows 8..16)") != std::string::npos);
  CHECK_NOTHROW(validate(whole));
  CHECK_NOTHROW(validate(gangs));
}

TEST_CASE("validate() names a GEMV piece it cannot run") {
  const Graph& good = tiny_head_pieces_model().graph;
  const size_t i = first_task(good, SP_OP_GEMV_PIECE);
  const auto broken = [&](auto&& change) {
    Graph g = good;
    change(g.tasks[i]);
    return error_of([&] { validate(g); });
  };
  const std::pair<std::string, std::function<void(SpTask&)>> cases[] = {
      {"the piece is not one of the split's", [](SpTask& t) { t.operand[6] = gemv_piece_word(2, 0); }},
      {"the split has fewer than 2 pieces", [](SpTask& t) { t.operand[7] = 0; }},
      {"the arrivals word is past the arrivals view", [](SpTask& t) { t.operand[6] = gemv_piece_word(0, 999); }},
      {"the partials are not f32 rows for every piece", [&](SpTask& t) { t.operand[4] = t.operand[2]; }},
      {"the rows are past W's or out's", [](SpTask& t) { t.tile_end += 1000; }}};
  for (const auto& [message, change] : cases) {
    const std::string msg = broken(change);
    CAPTURE(msg);
    CHECK(msg.find("gemv_piece") != std::string::npos);
    CHECK(msg.find(message) != std::string::npos);
  }
  Graph narrow = good;  // a piece of 4 columns fewer: not whole octets
  narrow.views[narrow.tasks[i].operand[0]].cols -= 4;
  CHECK(error_of([&] { validate(narrow); }).find("the piece is not whole octets") != std::string::npos);
}

TEST_CASE("validate() refuses an arrivals word whose GEMV pieces are not pieces 0..S-1 of the same rows, each as often") {
  const Graph& good = tiny_head_pieces_model().graph;
  const size_t i = first_task(good, SP_OP_GEMV_PIECE);
  const GemvPiece piece = gemv_piece(good.tasks[i]);
  REQUIRE(piece.split.pieces == 2);
  const uint32_t other = 1 - piece.index, layers = tiny_model().weights.config.n_layers;
  const auto error = [](const Graph& g) { return error_of([&] { validate(g); }); };
  const std::string word = "arrivals word " + std::to_string(piece.word) + " of view " +
                           std::to_string(good.tasks[i].operand[5]) + " 'o_proj_arrivals'";
  const auto counts = [&](uint32_t of_piece, uint32_t of_other) {  // the message's counts, piece 0's first
    const uint32_t zero = piece.index == 0 ? of_piece : of_other, one = piece.index == 0 ? of_other : of_piece;
    return "counts piece 0 " + std::to_string(zero) + " times but piece 1 " + std::to_string(one) + " times";
  };
  Graph twice = good;  // the piece takes the other's index
  twice.tasks[i].operand[6] = gemv_piece_word(other, piece.word);
  CHECK(error(twice).find(word + " (task " + std::to_string(i) + " (gemv_piece)'s) " + counts(layers - 1, layers + 1)) !=
        std::string::npos);
  Graph missing = good;  // the piece is gone (its counter's signals are checked after the words)
  missing.tasks.erase(missing.tasks.begin() + ptrdiff_t(i));
  const std::string gone = error(missing);
  CHECK(gone.find(word) != std::string::npos);
  CHECK(gone.find(counts(layers - 1, layers) + ": each of its 2 pieces must count as often as the others") !=
        std::string::npos);
  Graph shifted = good;  // the piece's rows moved by 8
  shifted.tasks[i].tile_begin += 8;
  shifted.tasks[i].tile_end += 8;
  CHECK(error(shifted).find("but for other rows, split, output, residual or partials") != std::string::npos);
  CHECK_NOTHROW(validate(good));
}
