#include "host/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

namespace spindle {
namespace {

constexpr uint64_t kCells = 20;

}  // namespace

std::string progress_line(const std::string& label, uint64_t done, uint64_t total, double elapsed_s) {
  done = std::min(done, total);
  // In integers, so that 29 of 100 shows 29% (0.29 * 100 in doubles is 28.999…).
  const auto share = [&](uint64_t whole) { return total ? done * whole / total : whole; };
  const uint64_t filled = share(kCells);
  std::string line = label + " [" + std::string(filled, '#') + std::string(kCells - filled, '.') + "]";
  char numbers[96];
  std::snprintf(numbers, sizeof numbers, "  %.2f / %.2f GB  %llu%%", double(done) / 1e9, double(total) / 1e9,
                (unsigned long long)share(100));
  line += numbers;
  if (elapsed_s > 0) {
    std::snprintf(numbers, sizeof numbers, "  %.2f GB/s", double(done) / 1e9 / elapsed_s);
    line += numbers;
  }
  return line;
}

ProgressBar::ProgressBar(std::string label, uint64_t total)
    : label_(std::move(label)),
      total_(total),
      shown_(total > 0 && ::isatty(STDERR_FILENO)),
      start_(Clock::now()),
      last_draw_(start_) {}

ProgressBar::~ProgressBar() {
  if (!shown_) return;
  std::lock_guard<std::mutex> lock(drawing_);
  std::fputs("\r\033[K", stderr);  // carriage return, then erase to the end of the line
  std::fflush(stderr);
}

void ProgressBar::add(uint64_t bytes) {
  done_.fetch_add(bytes, std::memory_order_relaxed);
  if (!shown_) return;
  std::unique_lock<std::mutex> lock(drawing_, std::try_to_lock);
  if (!lock) return;  // another thread is drawing
  const Clock::time_point now = Clock::now();
  if (now - last_draw_ < kRedraw) return;
  last_draw_ = now;
  draw(now);
}

void ProgressBar::draw(Clock::time_point now) {
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const std::string line = progress_line(label_, done_.load(std::memory_order_relaxed), total_, elapsed);
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
}

}  // namespace spindle
