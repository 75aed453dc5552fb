#include <doctest/doctest.h>

#include <vector>

#include "host/gates.h"

using spindle::token_md5;

// Expected digests from Python, an independent md5 over the same bytes:
//   hashlib.md5(b"".join(struct.pack("<I", i) for i in ids)).hexdigest()
TEST_CASE("md5 of token ids hashes them as little-endian int32") {
  CHECK(token_md5({}) == "d41d8cd98f00b204e9800998ecf8427e");
  const std::vector<uint32_t> small = {1, 2, 3};
  CHECK(token_md5(small) == "2a1dd1e1e59d0a384c26951e316cd7e6");
  const std::vector<uint32_t> order = {0x12345678};  // bytes 78 56 34 12
  CHECK(token_md5(order) == "f6532621685700b88aecbf202dc8f9d2");
  const std::vector<uint32_t> wide = {151935, 0, 7, 0xFFFFFFFFu};
  CHECK(token_md5(wide) == "07a51de8ce64bfc9356f8c198e389a58");
}

TEST_CASE("md5 depends on the order of the tokens") {
  const std::vector<uint32_t> a = {1, 2, 3}, b = {3, 2, 1};
  CHECK(token_md5(a) != token_md5(b));
}
