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

// Maps and checks the file: header bounds, JSON, each entry's fields, dtype × shape against
// its byte range, ranges inside the data section and not overlapping. Throws spindle::Error
// naming the file and, where there is one, the tensor.
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
