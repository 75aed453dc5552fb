// The loaders take paths, so each harness writes its input to a file in a directory of its
// own process (libFuzzer's -fork and -jobs run several at once), removed at exit.
#pragma once
#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>

namespace spindle::fuzz {

class InputDir {
 public:
  InputDir()
      : dir_(std::filesystem::temp_directory_path() / ("spindle-fuzz-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir_);
  }
  ~InputDir() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  const std::filesystem::path& path() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

// `name` in the process's input directory, holding the bytes.
inline std::filesystem::path write_input(const std::string& name, const void* data, size_t size) {
  static const InputDir dir;
  const std::filesystem::path p = dir.path() / name;
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), std::streamsize(size));
  return p;
}

}  // namespace spindle::fuzz
