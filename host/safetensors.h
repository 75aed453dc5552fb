// A reader and a writer for the safetensors format (https://github.com/huggingface/safetensors):
// an 8-byte little-endian header length N, N bytes of JSON header
// ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}), then the
// data section that the offsets index. Our own because Debian packages no C++ safetensors
// library. The reader maps the file read-only, so tensors can be used in place.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace spindle {

// The dtypes Spindle reads; a file holding any other is rejected naming the tensor.
enum class DType { BF16, F16, F32 };
const char* dtype_name(DType d);  // as written in the header: "BF16", "F16", "F32"
uint64_t dtype_size(DType d);     // bytes per element
std::string shape_string(const std::vector<uint64_t>& shape);  // "[a,b]", for messages

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::BF16;
  std::vector<uint64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range within the data section
};

struct SafetensorsFile {
  std::string path;
  std::shared_ptr<const void> mapping;     // the whole file, mapped; fit for HostArena::owner
  const uint8_t* data = nullptr;           // the data section
  uint64_t data_bytes = 0;
  std::vector<SafetensorsTensor> tensors;  // by name, "__metadata__" left out
};

// The header's largest length, the reference implementation's (safetensors' MAX_HEADER_SIZE):
// a longer one is a corrupt length, not a header.
constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

// Maps and checks the file as strictly as the reference implementation (safetensors'
// Metadata::validate): a regular file; the header length at most kMaxSafetensorsHeader and
// inside the file; the header UTF-8 JSON, an object whose "__metadata__" (if any) maps strings
// to strings; each entry's fields; dtype × shape (overflow-checked) equal to its byte range;
// and the ranges, in offset order, tiling the data section exactly: the first at 0, each where
// the previous ended, the last at the file's end, so that a wrong header length cannot shift
// the tensors unnoticed. Throws spindle::Error naming the file and, where there is one, the
// tensor with its offsets.
SafetensorsFile read_safetensors(const std::filesystem::path& path);

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::BF16;
  std::vector<uint64_t> shape;
  const void* data = nullptr;
  uint64_t bytes = 0;  // must equal elements × dtype_size
};

// Writes the entries in the given order, the header padded with spaces to a multiple of
// 8 bytes as the reference implementation does.
void write_safetensors(const std::filesystem::path& path,
                       const std::vector<SafetensorsEntry>& tensors);

}  // namespace spindle
