// read_safetensors on arbitrary bytes. A file it accepts must keep its contract
// (host/safetensors.h): each tensor's dtype × shape fills its byte range, which lies inside the
// data section and overlaps no other; every byte of it is then read.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "host/safetensors.h"
#include "tasks/error.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

[[noreturn]] void broken(const spindle::SafetensorsTensor& t, const char* what) {
  std::fprintf(stderr, "accepted tensor '%s' %s\n", t.name.c_str(), what);
  std::abort();
}

void check(const spindle::SafetensorsFile& f) {
  std::vector<const spindle::SafetensorsTensor*> order;
  for (const spindle::SafetensorsTensor& t : f.tensors) {
    if (t.begin > t.end || t.end > f.data_bytes) broken(t, "lies outside the data section");
    uint64_t bytes = spindle::dtype_size(t.dtype);
    bool too_large = false;
    for (uint64_t d : t.shape) too_large |= __builtin_mul_overflow(bytes, d, &bytes);
    if (std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end()) bytes = 0, too_large = false;
    if (too_large || bytes != t.end - t.begin) broken(t, "has a byte range other than its dtype × shape");
    if (t.end > t.begin) order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < order.size(); ++i)
    if (order[i]->begin < order[i - 1]->end) broken(*order[i], "overlaps another");
  volatile uint8_t sink = 0;
  for (const spindle::SafetensorsTensor* t : order)
    for (uint64_t b = t->begin; b < t->end; ++b) sink = sink ^ f.data[b];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = spindle::fuzz::write_input("model.safetensors", data, size);
  try {
    check(spindle::read_safetensors(path));
  } catch (const spindle::Error&) {
  }
  return 0;
}
