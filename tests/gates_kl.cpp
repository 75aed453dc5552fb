#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <unistd.h>

#include "host/gates.h"
#include "host/safetensors.h"
#include "tasks/error.h"

using namespace spindle;
namespace fs = std::filesystem;

TEST_CASE("identical logits have zero KL and full agreement") {
  const LogitRows rows = {{0.5f, -1.0f, 3.0f, 2.0f}, {10.0f, 10.0f, -20.0f, 0.0f}};
  const KlReport r = compare_logits(rows, rows);
  CHECK(r.positions == 2);
  CHECK(r.mean_kl == 0.0);
  CHECK(r.max_kl == 0.0);
  CHECK(r.top1_agreement == 1.0);
}

// Two positions over a vocab of two:
//   p = (1/2, 1/2), q = (3/4, 1/4):  KL = ½ln(½/¾) + ½ln(½/¼) = ½ ln(4/3)
//   p = softmax(1, 0), q = softmax(0, 1):  KL = (p0 − p1)(ln p0 − ln p1) = (e − 1)/(e + 1)
TEST_CASE("KL against a hand-computed example") {
  const double kl0 = 0.5 * std::log(4.0 / 3.0), kl1 = (M_E - 1) / (M_E + 1);
  const LogitRows ref = {{0.0f, 0.0f}, {1.0f, 0.0f}};
  const LogitRows ours = {{float(std::log(3.0)), 0.0f}, {0.0f, 1.0f}};
  CHECK(kl_divergence(ref[0], ours[0]) == doctest::Approx(kl0).epsilon(1e-6));
  const KlReport r = compare_logits(ref, ours);
  CHECK(r.positions == 2);
  CHECK(r.mean_kl == doctest::Approx((kl0 + kl1) / 2).epsilon(1e-6));
  CHECK(r.max_kl == doctest::Approx(kl1).epsilon(1e-6));
  CHECK(r.max_kl_position == 1);
  CHECK(r.top1_agreement == 0.5);  // position 0: a tie in ref goes to index 0, as in ours
}

TEST_CASE("KL is computed in double: large logits do not overflow") {
  const LogitRows ref = {{1000.0f, 0.0f, -1000.0f}};
  CHECK(compare_logits(ref, ref).mean_kl == 0.0);
  const LogitRows ours = {{0.0f, 1000.0f, -1000.0f}};
  CHECK(compare_logits(ref, ours).mean_kl == doctest::Approx(1000.0));
}

TEST_CASE("a token the reference gives zero weight adds nothing") {
  const LogitRows ref = {{0.0f, -1e4f}}, ours = {{0.0f, 0.0f}};  // exp(-1e4) is 0 in double
  CHECK(compare_logits(ref, ours).mean_kl == doctest::Approx(std::log(2.0)));
}

TEST_CASE("a logit that is not finite on either side is an error naming the side, position and token") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const LogitRows good = {{0.0f, 1.0f, 2.0f}, {2.0f, 1.0f, 0.0f}};
  for (const float bad : {nan, inf, -inf}) {
    CAPTURE(bad);
    LogitRows broken = good;
    broken[1][2] = bad;
    CHECK_THROWS_WITH_AS(compare_logits(broken, good),
                         doctest::Contains("the reference's logit of token 2 at position 1 is"), Error);
    CHECK_THROWS_WITH_AS(compare_logits(good, broken), doctest::Contains("our logit of token 2 at position 1 is"),
                         Error);
  }
  const LogitRows all_nan(2, std::vector<float>(3, nan));  // once passed: KL 0 with 0% top-1
  CHECK_THROWS_WITH_AS(compare_logits(all_nan, all_nan), doctest::Contains("position 0"), Error);
}

TEST_CASE("the thresholds pass and fail, and NaN fails") {
  KlReport r;
  r.mean_kl = 1e-6;
  r.max_kl = 1e-4;
  CHECK(kl_passes(r, {}));
  CHECK(!kl_passes(r, {1e-7}));
  CHECK(!kl_passes(r, {1e-5, 1e-5}));
  r.mean_kl = std::nan("");
  CHECK(!kl_passes(r, {}));
}

TEST_CASE("mismatched shapes are errors") {
  CHECK_THROWS_AS(compare_logits({{0.0f}}, {{0.0f}, {0.0f}}), Error);
  CHECK_THROWS_AS(compare_logits({{0.0f, 1.0f}}, {{0.0f}}), Error);
  CHECK_THROWS_AS(compare_logits({}, {}), Error);
}

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("spindle-gates-test-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

std::string read_message(const fs::path& file, size_t positions, uint32_t vocab) {
  try {
    read_reference_logits(file, positions, vocab);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("reference logits file") {
  TempDir dir;
  const std::vector<float> logits = {1, 2, 3, 4, 5, 6};  // [2 positions, vocab 3]
  const std::vector<uint16_t> bf16(6, 0x3f80);
  const fs::path good = dir.path / "good.safetensors";
  write_safetensors(good, {{"logits", DType::F32, {2, 3}, logits.data(), 24}});

  SUBCASE("reads rows") {
    const LogitRows rows = read_reference_logits(good, 2, 3);
    CHECK(rows == LogitRows{{1, 2, 3}, {4, 5, 6}});
  }
  SUBCASE("wrong shape") {
    const std::string msg = read_message(good, 3, 3);
    CHECK(msg.find("shape [2,3], expected [3,3]") != std::string::npos);
    CHECK(msg.find(good.string()) != std::string::npos);
  }
  SUBCASE("wrong dtype") {
    const fs::path f = dir.path / "bf16.safetensors";
    write_safetensors(f, {{"logits", DType::BF16, {2, 3}, bf16.data(), 12}});
    CHECK(read_message(f, 2, 3).find("is BF16, expected F32") != std::string::npos);
  }
  SUBCASE("no logits tensor") {
    const fs::path f = dir.path / "other.safetensors";
    write_safetensors(f, {{"scores", DType::F32, {2, 3}, logits.data(), 24}});
    CHECK(read_message(f, 2, 3).find("no tensor named 'logits'") != std::string::npos);
  }
  SUBCASE("a logit that is not finite") {
    const fs::path f = dir.path / "nan.safetensors";
    std::vector<float> bad = logits;
    bad[4] = std::numeric_limits<float>::quiet_NaN();
    write_safetensors(f, {{"logits", DType::F32, {2, 3}, bad.data(), 24}});
    const std::string msg = read_message(f, 2, 3);
    CHECK(msg.find(f.string() + ": the reference's logit of token 1 at position 1 is") != std::string::npos);
  }
  SUBCASE("missing file") {
    const fs::path f = dir.path / "absent.safetensors";
    CHECK(read_message(f, 2, 3).find(f.string()) != std::string::npos);
  }
}
