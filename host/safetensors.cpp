#include "host/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "host/files.h"
#include "host/progress.h"
#include "host/utf8.h"
#include "tasks/error.h"

namespace spindle {
namespace {

using json = nlohmann::json;

struct DTypeInfo {
  DType dtype;
  const char* name;
  uint64_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::BF16, "BF16", 2}, {DType::F16, "F16", 2}, {DType::F32, "F32", 4}};

const DTypeInfo& dtype_info(DType d) {
  for (const DTypeInfo& info : kDTypes)
    if (info.dtype == d) return info;
  throw Error("unknown dtype");
}

// Element count × element size, or false on overflow.
bool tensor_bytes(const std::vector<uint64_t>& shape, DType dtype, uint64_t* bytes) {
  uint64_t n = dtype_size(dtype);
  for (uint64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n)) return false;
  *bytes = n;
  return true;
}

class HeaderEntry {
 public:
  HeaderEntry(const std::string& path, const std::string& name, const json& v)
      : where_(path + ": tensor '" + name + "'"), v_(v) {
    if (!v.is_object()) fail("expected an object with dtype, shape and data_offsets, got " + v.dump());
  }
  [[noreturn]] void fail(const std::string& what) const { throw Error(where_ + ": " + what); }

  const json& field(const char* key) const {
    auto it = v_.find(key);
    if (it == v_.end()) fail(std::string("missing '") + key + "'");
    return *it;
  }
  DType dtype() const {
    const json& d = field("dtype");
    if (!d.is_string()) fail("'dtype' must be a string, got " + d.dump());
    for (const DTypeInfo& info : kDTypes)
      if (d == info.name) return info.dtype;
    fail("has dtype " + d.get<std::string>() + "; only BF16, F16 and F32 are supported");
  }
  std::vector<uint64_t> u64_list(const char* key) const {
    const json& a = field(key);
    std::vector<uint64_t> out;
    if (a.is_array())
      for (const json& e : a) {
        if (!e.is_number_unsigned()) break;
        out.push_back(e.get<uint64_t>());
      }
    if (!a.is_array() || out.size() != a.size())
      fail(std::string("'") + key + "' must be an array of non-negative integers, got " + a.dump());
    return out;
  }

 private:
  std::string where_;
  const json& v_;
};

SafetensorsTensor parse_entry(const std::string& path, const std::string& name, const json& v,
                              uint64_t data_bytes) {
  HeaderEntry e(path, name, v);
  SafetensorsTensor t;
  t.name = name;
  t.dtype = e.dtype();
  t.shape = e.u64_list("shape");
  std::vector<uint64_t> offsets = e.u64_list("data_offsets");
  if (offsets.size() != 2)
    e.fail("'data_offsets' must be [begin, end], got " + e.field("data_offsets").dump());
  t.begin = offsets[0];
  t.end = offsets[1];
  if (t.begin > t.end)
    e.fail("data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
           "]: begin is past end");
  if (t.end > data_bytes)
    e.fail("data_offsets end " + std::to_string(t.end) + " is past the end of the data section (" +
           std::to_string(data_bytes) + " bytes)");
  uint64_t bytes = 0;
  if (!tensor_bytes(t.shape, t.dtype, &bytes))
    e.fail(std::string(dtype_name(t.dtype)) + " shape " + shape_string(t.shape) +
           " is too large: its byte count overflows 64 bits");
  if (bytes != t.end - t.begin)
    e.fail(std::string(dtype_name(t.dtype)) + " " + shape_string(t.shape) + " needs " +
           std::to_string(bytes) + " bytes, but data_offsets [" + std::to_string(t.begin) + ", " +
           std::to_string(t.end) + "] span " + std::to_string(t.end - t.begin));
  return t;
}

std::string range_string(const SafetensorsTensor& t) {
  return "'" + t.name + "' [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + ")";
}

// The tensors' byte ranges, in offset order, must tile the data section: the first at 0, each
// where the previous ended, the last at its end. As the reference does, a gap, an overlap or a
// stray byte is refused: each is what a wrong header length or a corrupt offset leaves.
void check_coverage(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                    uint64_t data_bytes) {
  std::vector<const SafetensorsTensor*> order;
  for (const SafetensorsTensor& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const SafetensorsTensor* a, const SafetensorsTensor* b) {
    return std::tie(a->begin, a->end, a->name) < std::tie(b->begin, b->end, b->name);
  });
  const SafetensorsTensor* prev = nullptr;
  for (const SafetensorsTensor* t : order) {
    const uint64_t expected = prev ? prev->end : 0;
    if (t->begin == expected) {
      prev = t;
      continue;
    }
    const std::string after = prev ? "tensor " + range_string(*prev) : "the start of the data section";
    if (t->begin < expected)
      throw Error(path + ": tensor " + range_string(*t) + " overlaps " + after);
    throw Error(path + ": tensor " + range_string(*t) + " leaves a gap of " +
                std::to_string(t->begin - expected) + " bytes after " + after +
                " (the ranges must tile the data section)");
  }
  const uint64_t end = prev ? prev->end : 0;
  if (end != data_bytes)
    throw Error(path + ": the tensors end at byte " + std::to_string(end) +
                " of the data section, but it has " + std::to_string(data_bytes) + " bytes: " +
                std::to_string(data_bytes - end) +
                " belong to no tensor (is the 8-byte header length wrong?)");
}

// "__metadata__" is the format's free-form map of strings to strings; the reference refuses
// anything else there.
void check_metadata(const std::string& path, const json& metadata) {
  bool strings = metadata.is_object();
  for (const json& v : metadata) strings = strings && v.is_string();
  if (!strings)
    throw Error(path + ": '__metadata__' must be an object of strings, got " + metadata.dump());
}

}  // namespace

const char* dtype_name(DType d) { return dtype_info(d).name; }
uint64_t dtype_size(DType d) { return dtype_info(d).size; }

std::string shape_string(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  return s + "]";
}


SafetensorsFile read_safetensors(const std::filesystem::path& path) {
  SafetensorsFile f;
  f.path = path.string();
  uint64_t size = 0;
  f.mapping = map_file(path, "safetensors file", &size);
  if (size < 8)
    throw Error(f.path + ": file is " + std::to_string(size) +
                " bytes, too short for the 8-byte safetensors header length");
  const auto* base = static_cast<const uint8_t*>(f.mapping.get());
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | base[i];
  if (header_len > kMaxSafetensorsHeader)
    throw Error(f.path + ": header length " + std::to_string(header_len) + " is more than the " +
                std::to_string(kMaxSafetensorsHeader) + " bytes a safetensors header may have");
  if (header_len > size - 8)
    throw Error(f.path + ": header length " + std::to_string(header_len) +
                " runs past the end of the file (" + std::to_string(size) + " bytes)");
  f.data = base + 8 + header_len;
  f.data_bytes = size - 8 - header_len;

  // The reference requires a UTF-8 header; this names the byte where the JSON parser would only
  // say "not JSON".
  const char* text = reinterpret_cast<const char*>(base + 8);
  if (size_t bad = first_invalid_utf8({text, header_len}); bad != std::string_view::npos)
    throw Error(f.path + ": the header is not valid UTF-8 (byte " + std::to_string(bad) +
                " of " + std::to_string(header_len) + ")");
  json header = json::parse(text, text + header_len, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) throw Error(f.path + ": the header is not valid JSON");
  if (!header.is_object())
    throw Error(f.path + ": the header must be a JSON object, got " + header.type_name());
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__")
      check_metadata(f.path, v);
    else
      f.tensors.push_back(parse_entry(f.path, name, v, f.data_bytes));
  }
  check_coverage(f.path, f.tensors, f.data_bytes);
  return f;
}

void write_safetensors(const std::filesystem::path& path,
                       const std::vector<SafetensorsEntry>& tensors) {
  json header = json::object();
  uint64_t offset = 0;
  for (const SafetensorsEntry& t : tensors) {
    uint64_t bytes = 0;
    if (!tensor_bytes(t.shape, t.dtype, &bytes) || bytes != t.bytes)
      throw Error(path.string() + ": tensor '" + t.name + "' has " + std::to_string(t.bytes) +
                  " bytes, which does not match " + dtype_name(t.dtype) + " " +
                  shape_string(t.shape));
    if (header.contains(t.name))
      throw Error(path.string() + ": tensor '" + t.name + "' is listed twice");
    header[t.name] = {{"dtype", dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(path.string() + ": cannot create file");
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), std::streamsize(text.size()));
  ProgressBar progress("writing " + path.string(), offset);
  for (const SafetensorsEntry& t : tensors) {
    out.write(static_cast<const char*>(t.data), std::streamsize(t.bytes));
    progress.add(t.bytes);
  }
  out.close();
  if (!out) throw Error(path.string() + ": write failed (disk full?)");
}

}  // namespace spindle
