// A progress bar on stderr for work counted in bytes (a checkpoint's tensors converted to bf16,
// synthetic weights generated, a safetensors file written), drawn only when stderr is a
// terminal: piped or redirected output (CI, a script) gets nothing, so what the commands print
// elsewhere is unchanged.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace spindle {

// The bar's one line for `done` of `total` bytes after `elapsed_s` seconds, e.g.
// "generating synthetic:qwen3-8b [########............]  7.21 / 16.38 GB  44%  2.10 GB/s": the label,
// a 20-cell bar, the bytes in GB (10^9), the percentage rounded down and the mean rate so far
// (the rate is left out before any time has passed). `done` above `total` is shown as `total`.
std::string progress_line(const std::string& label, uint64_t done, uint64_t total, double elapsed_s);

class ProgressBar {
 public:
  // Draws nothing when stderr is not a terminal or `total` is 0.
  ProgressBar(std::string label, uint64_t total);
  // Erases the line, leaving the terminal as it was before the bar.
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Counts `bytes` more as done; safe from several threads at once. Redraws at most every
  // kRedraw, from whichever thread finds the bar due and free.
  void add(uint64_t bytes);

  static constexpr std::chrono::milliseconds kRedraw{250};

 private:
  using Clock = std::chrono::steady_clock;
  void draw(Clock::time_point now);

  const std::string label_;
  const uint64_t total_;
  const bool shown_;
  const Clock::time_point start_;
  std::atomic<uint64_t> done_{0};
  std::mutex drawing_;
  Clock::time_point last_draw_;  // under drawing_
};

}  // namespace spindle
