// The progress bar's line as a function of the bytes done, the total and the time taken.
#include <doctest/doctest.h>

#include "host/progress.h"

using spindle::progress_line;

TEST_CASE("the progress line shows the bar, the bytes in GB, the percentage and the mean rate") {
  CHECK(progress_line("generating x", 1'000'000'000, 2'000'000'000, 0.5) ==
        "generating x [##########..........]  1.00 / 2.00 GB  50%  2.00 GB/s");
  CHECK(progress_line("converting d to bf16", 500'000'000, 16'000'000'000, 2) ==
        "converting d to bf16 [....................]  0.50 / 16.00 GB  3%  0.25 GB/s");
}

TEST_CASE("the progress line rounds the bar and the percentage down, so neither shows done early") {
  CHECK(progress_line("x", 1999, 2000, 1) == "x [###################.]  0.00 / 0.00 GB  99%  0.00 GB/s");
  CHECK(progress_line("x", 29, 100, 1) == "x [#####...............]  0.00 / 0.00 GB  29%  0.00 GB/s");
}

TEST_CASE("before any time has passed the progress line has no rate") {
  CHECK(progress_line("x", 0, 4'000'000'000, 0) == "x [....................]  0.00 / 4.00 GB  0%");
}

TEST_CASE("bytes done past the total show as the total") {
  CHECK(progress_line("x", 3'000'000'000, 2'000'000'000, 1) ==
        "x [####################]  2.00 / 2.00 GB  100%  2.00 GB/s");
}
