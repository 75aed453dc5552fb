// The files a loader reads, refused in plain words when they are not what they should be: a
// directory, device or FIFO where a file is expected, an open, read or map that fails, a JSON
// file too large to be a checkpoint's. open(), read() and mmap() alone would say "Is a
// directory" or "No such device", naming nothing.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace spindle {

// The largest JSON file a checkpoint holds (config.json, the shard index): the safetensors
// header's limit, the largest JSON the reference implementation reads.
constexpr uint64_t kMaxJsonFileBytes = 100'000'000;

// A read-only mapping of the whole regular file, unmapped when the last owner goes (null for an
// empty file); its size in *size. `what` is the file's role in the messages ("safetensors
// file"). Throws spindle::Error naming the file.
std::shared_ptr<const void> map_file(const std::filesystem::path& path, const std::string& what, uint64_t* size);

// A JSON file at most kMaxJsonFileBytes long, `what` its role ("the model config"). Throws
// spindle::Error naming the file and saying what is wrong: missing, not a regular file,
// unreadable, too large, not JSON.
nlohmann::json read_json_file(const std::filesystem::path& path, const std::string& what);

}  // namespace spindle
