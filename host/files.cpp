#include "host/files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "tasks/error.h"

namespace spindle {
namespace {

namespace fs = std::filesystem;

// What a path that is not a regular file is, in plain words: open(), read() and mmap() would
// answer "Is a directory" or "No such device", which does not say what is wrong.
std::string not_a_regular_file(const fs::file_status& st, const std::error_code& ec) {
  switch (st.type()) {
    case fs::file_type::not_found: return "no such file";
    case fs::file_type::directory: return "it is a directory, not a file";
    case fs::file_type::character: return "it is a character device, not a regular file";
    case fs::file_type::block: return "it is a block device, not a regular file";
    case fs::file_type::fifo: return "it is a FIFO, not a regular file";
    case fs::file_type::socket: return "it is a socket, not a regular file";
    default: return ec ? ec.message() : "it is not a regular file";
  }
}

// A read-only descriptor of a regular file, closed at scope exit.
class RegularFile {
 public:
  RegularFile(const std::string& path, const std::string& what) : path_(path), what_(what) {
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (!fs::is_regular_file(st)) fail(not_a_regular_file(st, ec));
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) fail(std::strerror(errno));
  }
  ~RegularFile() { ::close(fd_); }
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  [[noreturn]] void fail(const std::string& why) const {
    throw Error(path_ + ": cannot open " + what_ + ": " + why);
  }
  uint64_t size() const {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) fail(std::strerror(errno));
    return uint64_t(st.st_size);
  }
  int fd() const { return fd_; }

 private:
  std::string path_, what_;
  int fd_ = -1;
};

// The whole of a small file, read through a descriptor so that a failure is an errno to name.
std::string read_text(const std::string& path, const std::string& what) {
  RegularFile file(path, what);
  const uint64_t size = file.size();
  if (size > kMaxJsonFileBytes)
    file.fail("it has " + std::to_string(size) + " bytes, more than the " + std::to_string(kMaxJsonFileBytes) +
              " a JSON file of a checkpoint may have");
  std::string text(size, '\0');
  uint64_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(file.fd(), text.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(path + ": cannot read " + what + ": " + std::strerror(errno));
    if (n == 0) break;  // the file shrank while we read it
    done += uint64_t(n);
  }
  text.resize(done);
  return text;
}

}  // namespace

std::shared_ptr<const void> map_file(const std::filesystem::path& path, const std::string& what, uint64_t* size) {
  RegularFile file(path.string(), what);
  *size = file.size();
  if (*size == 0) return std::shared_ptr<const void>();  // mmap refuses a length of 0
  // The mapping stays valid once `file` closes the descriptor.
  void* addr = ::mmap(nullptr, *size, PROT_READ, MAP_PRIVATE, file.fd(), 0);
  if (addr == MAP_FAILED) throw Error(path.string() + ": cannot be mapped into memory: " + std::strerror(errno));
  const uint64_t len = *size;
  return std::shared_ptr<const void>(addr, [len](const void* p) { ::munmap(const_cast<void*>(p), len); });
}

nlohmann::json read_json_file(const std::filesystem::path& path, const std::string& what) {
  const std::string text = read_text(path.string(), what);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw Error(path.string() + ": not valid JSON");
  return j;
}

}  // namespace spindle
