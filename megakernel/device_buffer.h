// One cudaMalloc'd block, freed with its owner. Running out of memory is a spindle::Error
// naming what the block is for and how many bytes it needed.
#pragma once
#include <cstdint>
#include <string>

namespace spindle::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(uint64_t bytes, const std::string& what);
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  uint8_t* data() const { return ptr_; }
  uint64_t bytes() const { return bytes_; }
  template <class T>
  T* as() const { return reinterpret_cast<T*>(ptr_); }

 private:
  uint8_t* ptr_ = nullptr;
  uint64_t bytes_ = 0;
};

}  // namespace spindle::cuda
