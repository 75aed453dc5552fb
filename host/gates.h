// The correctness gates' arithmetic: the md5 of generated tokens, and the KL divergence of our
// next-token distributions from a reference (the fp64 executor, or logits saved from HF).
#pragma once
#include <cstdint>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace spindle {

// Lowercase hex md5 of the ids as little-endian int32, the bytes every tool agrees on.
std::string token_md5(std::span<const uint32_t> ids);

using LogitRows = std::vector<std::vector<float>>;  // [position][vocab]

// KL(ref ‖ ours) of the softmax distributions of two logit rows, in double.
double kl_divergence(std::span<const float> ref, std::span<const float> ours);

struct KlReport {
  size_t positions = 0;
  double mean_kl = 0;
  double max_kl = 0;
  size_t max_kl_position = 0;
  double top1_agreement = 0;  // fraction of positions whose argmax (first on ties) agrees
};

// Throws spindle::Error when the shapes differ, there are no positions, or a logit on either
// side is not finite (naming the side, the position and the token).
KlReport compare_logits(const LogitRows& ref, const LogitRows& ours);

struct KlThresholds {
  double max_mean_kl = 1e-5;
  double max_kl = std::numeric_limits<double>::infinity();  // bound on the worst position
};

// False past a threshold, or when a KL is not a number.
bool kl_passes(const KlReport& r, const KlThresholds& t);

// Reads the f32 tensor `logits` of shape [positions, vocab] from a safetensors file. Throws
// spindle::Error naming the file when it is missing, has another dtype, another shape, or a
// logit that is not finite.
LogitRows read_reference_logits(const std::filesystem::path& file, size_t positions,
                                uint32_t vocab);

}  // namespace spindle
