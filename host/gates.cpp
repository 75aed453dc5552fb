#include "host/gates.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <openssl/evp.h>

#include "host/safetensors.h"
#include "tasks/error.h"

namespace spindle {
namespace {

std::vector<double> log_softmax(std::span<const float> logits) {
  const double m = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float x : logits) sum += std::exp(double(x) - m);
  const double lse = m + std::log(sum);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = double(logits[i]) - lse;
  return out;
}

size_t argmax(std::span<const float> row) {
  return size_t(std::max_element(row.begin(), row.end()) - row.begin());
}

// Throws "`whose` logit of token T at position P is V" for the first logit that is not finite:
// a distribution with one is no distribution, and log_softmax would pass over it quietly.
void require_finite(const LogitRows& rows, const std::string& whose) {
  for (size_t t = 0; t < rows.size(); ++t)
    for (size_t i = 0; i < rows[t].size(); ++i)
      if (!std::isfinite(rows[t][i]))
        throw Error(whose + " logit of token " + std::to_string(i) + " at position " + std::to_string(t) +
                    " is " + std::to_string(rows[t][i]) + ": the gate compares finite logits only");
}

}  // namespace

std::string token_md5(std::span<const uint32_t> ids) {
  std::vector<unsigned char> bytes;
  bytes.reserve(ids.size() * 4);
  for (uint32_t id : ids)
    for (int i = 0; i < 4; ++i) bytes.push_back(uint8_t(id >> (8 * i)));
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_md5(), nullptr))
    throw Error("md5: OpenSSL's EVP_Digest failed");
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

double kl_divergence(std::span<const float> ref, std::span<const float> ours) {
  if (ref.size() != ours.size() || ref.empty())
    throw Error("KL: logit rows of " + std::to_string(ref.size()) + " and " +
                std::to_string(ours.size()) + " entries");
  const std::vector<double> lp = log_softmax(ref), lq = log_softmax(ours);
  double kl = 0;
  for (size_t i = 0; i < lp.size(); ++i) {
    const double p = std::exp(lp[i]);
    if (p > 0) kl += p * (lp[i] - lq[i]);  // 0·log 0 = 0
  }
  return kl;
}

KlReport compare_logits(const LogitRows& ref, const LogitRows& ours) {
  if (ref.size() != ours.size())
    throw Error("KL: the reference has " + std::to_string(ref.size()) + " positions, ours " +
                std::to_string(ours.size()));
  if (ref.empty()) throw Error("KL: no positions to compare");
  require_finite(ref, "KL: the reference's");
  require_finite(ours, "KL: our");
  KlReport r;
  r.positions = ref.size();
  size_t agree = 0;
  for (size_t t = 0; t < ref.size(); ++t) {
    const double kl = kl_divergence(ref[t], ours[t]);
    r.mean_kl += kl;
    if (t == 0 || kl > r.max_kl || std::isnan(kl)) {
      r.max_kl = kl;
      r.max_kl_position = t;
    }
    agree += argmax(ref[t]) == argmax(ours[t]);
  }
  r.mean_kl /= double(r.positions);
  r.top1_agreement = double(agree) / double(r.positions);
  return r;
}

bool kl_passes(const KlReport& r, const KlThresholds& t) {
  return r.mean_kl <= t.max_mean_kl && r.max_kl <= t.max_kl;  // NaN compares false
}

LogitRows read_reference_logits(const std::filesystem::path& file, size_t positions,
                                uint32_t vocab) {
  const SafetensorsFile f = read_safetensors(file);
  const auto it = std::find_if(f.tensors.begin(), f.tensors.end(),
                               [](const SafetensorsTensor& t) { return t.name == "logits"; });
  const std::string where = file.string() + ": ";
  if (it == f.tensors.end()) throw Error(where + "no tensor named 'logits'");
  if (it->dtype != DType::F32)
    throw Error(where + "tensor 'logits' is " + dtype_name(it->dtype) + ", expected F32");
  const std::vector<uint64_t> want = {positions, vocab};
  if (it->shape != want)
    throw Error(where + "tensor 'logits' has shape " + shape_string(it->shape) + ", expected " +
                shape_string(want) + " (ids × vocab)");
  LogitRows rows(positions, std::vector<float>(vocab));
  const uint8_t* src = f.data + it->begin;
  for (auto& row : rows) {
    std::memcpy(row.data(), src, vocab * sizeof(float));
    src += vocab * sizeof(float);
  }
  require_finite(rows, where + "the reference's");
  return rows;
}

}  // namespace spindle
