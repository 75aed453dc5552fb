// Helpers of the loader tests: a scratch directory, raw files, and the checks on error text.
#pragma once
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "host/checkpoint.h"
#include "host/safetensors.h"
#include "tasks/error.h"

// Checks that `expr` throws spindle::Error whose message contains `phrase`.
#define CHECK_ERROR(expr, phrase) \
  CHECK_THROWS_WITH_AS(expr, contains(phrase), spindle::Error)

inline doctest::Contains contains(const std::string& phrase) {
  return doctest::Contains(phrase.c_str());
}

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("spindle-loader-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  REQUIRE(out.good());
}

// A safetensors file from its parts: the 8-byte length (`header_len`, or the header's real
// size when omitted), the header text and the data section.
inline std::string safetensors_bytes(const std::string& header, const std::string& data,
                                     uint64_t header_len = UINT64_MAX) {
  if (header_len == UINT64_MAX) header_len = header.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = char(uint8_t(header_len >> (8 * i)));
  return out + header + data;
}

// The tensors of `w` as safetensors entries, lm_head left out when tied, as HF saves them.
inline std::vector<spindle::SafetensorsEntry> entries_of(const spindle::ModelWeights& w) {
  std::vector<spindle::SafetensorsEntry> out;
  for (const auto& [name, ref] : w.tensors) {
    if (name == "lm_head.weight" && w.config.tie_word_embeddings) continue;
    out.push_back({name, spindle::DType::BF16, ref.shape,
                   w.arenas[ref.arena].data + ref.offset, ref.elements() * 2});
  }
  return out;
}

inline void write_config(const std::filesystem::path& dir, const spindle::ModelConfig& c) {
  write_file(dir / "config.json", spindle::config_to_json(c).dump());
}

// The bytes of a tensor, for bit-exact comparisons.
inline std::string tensor_bytes(const spindle::ModelWeights& w, const std::string& name) {
  const spindle::TensorRef& ref = w.tensors.at(name);
  const uint8_t* p = w.arenas.at(ref.arena).data + ref.offset;
  return std::string(reinterpret_cast<const char*>(p), ref.elements() * 2);
}

// True when both have the same tensor names, shapes and bytes.
inline bool same_tensors(const spindle::ModelWeights& a, const spindle::ModelWeights& b) {
  if (a.tensors.size() != b.tensors.size()) return false;
  for (const auto& [name, ref] : a.tensors) {
    auto it = b.tensors.find(name);
    if (it == b.tensors.end() || it->second.shape != ref.shape) return false;
    if (tensor_bytes(a, name) != tensor_bytes(b, name)) return false;
  }
  return true;
}
