// The safetensors reader and writer: round trips, and every malformed file the reader rejects.
#include <sys/stat.h>

#include <cstring>
#include <vector>

#include "loader_fixture.h"

using namespace spindle;

namespace {

template <typename T>
SafetensorsEntry entry(const std::string& name, DType dtype, std::vector<uint64_t> shape,
                       const std::vector<T>& values) {
  return {name, dtype, std::move(shape), values.data(), values.size() * sizeof(T)};
}

// Writes a raw file into `dir` and reads it back as safetensors.
SafetensorsFile read_raw(const TempDir& dir, const std::string& bytes) {
  write_file(dir / "t.safetensors", bytes);
  return read_safetensors(dir / "t.safetensors");
}

const std::string kData(16, '\x01');

}  // namespace

TEST_CASE("safetensors round trip: BF16, F16 and F32") {
  TempDir dir;
  const std::vector<uint16_t> b = {0x3f80, 0xbf80, 0x0000, 0x7f80, 0x4049, 0x1234};
  const std::vector<uint16_t> h = {0x3c00, 0xc000, 0x0001, 0x7bff};
  const std::vector<float> f = {1.5f, -2.25f, 1e-30f, 3.0e38f, 0.0f, -0.0f, 7.0f, 42.0f};
  const std::vector<float> none;
  write_safetensors(dir / "a.safetensors", {entry("b", DType::BF16, {2, 3}, b),
                                            entry("h", DType::F16, {4}, h),
                                            entry("f", DType::F32, {2, 2, 2}, f),
                                            entry("empty", DType::F32, {0, 5}, none)});
  SafetensorsFile file = read_safetensors(dir / "a.safetensors");
  REQUIRE(file.tensors.size() == 4);
  auto find = [&](const std::string& name) {
    for (const SafetensorsTensor& t : file.tensors)
      if (t.name == name) return t;
    FAIL("no tensor " << name);
    return SafetensorsTensor{};
  };
  auto same_bytes = [&](const SafetensorsTensor& t, const void* want, size_t bytes) {
    return t.end - t.begin == bytes && std::memcmp(file.data + t.begin, want, bytes) == 0;
  };
  SafetensorsTensor tb = find("b"), th = find("h"), tf = find("f"), te = find("empty");
  CHECK(tb.dtype == DType::BF16);
  CHECK(tb.shape == std::vector<uint64_t>{2, 3});
  CHECK(same_bytes(tb, b.data(), 12));
  CHECK(th.dtype == DType::F16);
  CHECK(same_bytes(th, h.data(), 8));
  CHECK(tf.dtype == DType::F32);
  CHECK(tf.shape == std::vector<uint64_t>{2, 2, 2});
  CHECK(same_bytes(tf, f.data(), 32));
  CHECK(te.shape == std::vector<uint64_t>{0, 5});
  CHECK(te.begin == te.end);
  CHECK(file.data_bytes == 12 + 8 + 32);
  CHECK((file.data - static_cast<const uint8_t*>(file.mapping.get())) % 8 == 0);  // padded header
  CHECK(std::string(dtype_name(DType::F16)) == "F16");
  CHECK(dtype_size(DType::F32) == 4);
}

TEST_CASE("safetensors: __metadata__ is ignored, the mapping outlives the file object") {
  TempDir dir;
  std::string header =
      R"({"__metadata__": {"format": "pt"}, "x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})";
  float values[2] = {3.5f, -1.0f};
  std::string data(reinterpret_cast<const char*>(values), 8);
  std::shared_ptr<const void> keep;
  const uint8_t* p = nullptr;
  {
    SafetensorsFile f = read_raw(dir, safetensors_bytes(header, data));
    REQUIRE(f.tensors.size() == 1);
    CHECK(f.tensors[0].name == "x");
    keep = f.mapping;
    p = f.data;
  }
  std::filesystem::remove(dir / "t.safetensors");
  float read[2];
  std::memcpy(read, p, 8);
  CHECK(read[0] == 3.5f);
  CHECK(read[1] == -1.0f);
}

TEST_CASE("safetensors: malformed files are rejected with the file and the reason") {
  TempDir dir;
  const std::string path = (dir / "t.safetensors").string();
  auto header_for = [](const std::string& entry) { return "{\"w\": " + entry + "}"; };
  const std::string ok_entry = R"({"dtype": "BF16", "shape": [2, 4], "data_offsets": [0, 16]})";
  REQUIRE(read_raw(dir, safetensors_bytes(header_for(ok_entry), kData)).tensors.size() == 1);

  SUBCASE("missing file") {
    CHECK_ERROR(read_safetensors(dir / "absent.safetensors"),
                (dir / "absent.safetensors").string() + ": cannot open safetensors file");
  }
  SUBCASE("shorter than 8 bytes") {
    CHECK_ERROR(read_raw(dir, std::string("\x05\0\0", 3)), path + ": file is 3 bytes, too short");
    CHECK_ERROR(read_raw(dir, ""), "file is 0 bytes");
  }
  SUBCASE("header length past the end of the file") {
    CHECK_ERROR(read_raw(dir, safetensors_bytes(header_for(ok_entry), kData, 1000)),
                path + ": header length 1000 runs past the end of the file");
    CHECK_ERROR(read_raw(dir, safetensors_bytes("{}", "", 100'000'000)), "runs past the end");
  }
  SUBCASE("header length above the reference's 100 MB limit") {
    CHECK_ERROR(read_raw(dir, safetensors_bytes("{}", "", 100'000'001)),
                path + ": header length 100000001 is more than the 100000000 bytes a safetensors header may have");
    CHECK_ERROR(read_raw(dir, safetensors_bytes("", "", UINT64_MAX - 3)),
                "header length 18446744073709551612 is more than the 100000000 bytes");
  }
  SUBCASE("bad JSON") {
    CHECK_ERROR(read_raw(dir, safetensors_bytes("{\"w\": {", kData)),
                path + ": the header is not valid JSON");
    CHECK_ERROR(read_raw(dir, safetensors_bytes("[1, 2]", "")), "the header must be a JSON object");
  }
  SUBCASE("an entry missing a field") {
    CHECK_ERROR(read_raw(dir, safetensors_bytes(
                                  header_for(R"({"shape": [2, 4], "data_offsets": [0, 16]})"), kData)),
                path + ": tensor 'w': missing 'dtype'");
    CHECK_ERROR(read_raw(dir, safetensors_bytes(
                                  header_for(R"({"dtype": "BF16", "data_offsets": [0, 16]})"), kData)),
                "tensor 'w': missing 'shape'");
    CHECK_ERROR(read_raw(dir, safetensors_bytes(header_for(R"({"dtype": "BF16", "shape": [2, 4]})"),
                                                kData)),
                "tensor 'w': missing 'data_offsets'");
    CHECK_ERROR(read_raw(dir, safetensors_bytes(header_for("7"), kData)),
                "tensor 'w': expected an object");
  }
  SUBCASE("fields of the wrong type") {
    CHECK_ERROR(read_raw(dir, safetensors_bytes(
                                  header_for(R"({"dtype": 2, "shape": [2, 4], "data_offsets": [0, 16]})"),
                                  kData)),
                "'dtype' must be a string");
    CHECK_ERROR(read_raw(dir, safetensors_bytes(
                                  header_for(R"({"dtype": "BF16", "shape": [2, -4], "data_offsets": [0, 16]})"),
                                  kData)),
                "'shape' must be an array of non-negative integers");
    CHECK_ERROR(read_raw(dir, safetensors_bytes(
                                  header_for(R"({"dtype": "BF16", "shape": [2, 4], "data_offsets": [16]})"),
                                  kData)),
                "'data_offsets' must be [begin, end]");
  }
  SUBCASE("an unsupported dtype") {
    CHECK_ERROR(read_raw(dir, safetensors_bytes(
                                  header_for(R"({"dtype": "I64", "shape": [2], "data_offsets": [0, 16]})"),
                                  kData)),
                path + ": tensor 'w': has dtype I64; only BF16, F16 and F32 are supported");
  }
  SUBCASE("offsets out of range") {
    CHECK_ERROR(read_raw(dir, safetensors_bytes(
                                  header_for(R"({"dtype": "BF16", "shape": [2, 4], "data_offsets": [8, 24]})"),
                                  kData)),
                "tensor 'w': data_offsets end 24 is past the end of the data section (16 bytes)");
    CHECK_ERROR(read_raw(dir, safetensors_bytes(
                                  header_for(R"({"dtype": "BF16", "shape": [0], "data_offsets": [12, 4]})"),
                                  kData)),
                "tensor 'w': data_offsets [12, 4]: begin is past end");
  }
  SUBCASE("dtype x shape does not match the byte range") {
    CHECK_ERROR(read_raw(dir, safetensors_bytes(
                                  header_for(R"({"dtype": "F32", "shape": [2, 4], "data_offsets": [0, 16]})"),
                                  kData)),
                "tensor 'w': F32 [2,4] needs 32 bytes, but data_offsets [0, 16] span 16");
  }
  SUBCASE("shapes whose byte count overflows 64 bits") {
    // 2^40 × 2^40 wraps to 0 in 64 bits, which would match an empty range.
    CHECK_ERROR(read_raw(dir, safetensors_bytes(
                                  header_for(R"({"dtype": "BF16", "shape": [1099511627776, 1099511627776], "data_offsets": [0, 0]})"),
                                  "")),
                path + ": tensor 'w': BF16 shape [1099511627776,1099511627776] is too large: its byte count overflows 64 bits");
    CHECK_ERROR(read_raw(dir, safetensors_bytes(
                                  header_for(R"({"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 16]})"),
                                  kData)),
                "overflows 64 bits");
    CHECK_ERROR(read_raw(dir, safetensors_bytes(
                                  header_for(R"({"dtype": "F32", "shape": [2, 4], "data_offsets": [0, 18446744073709551615]})"),
                                  kData)),
                "data_offsets end 18446744073709551615 is past the end of the data section (16 bytes)");
  }
  SUBCASE("overlapping tensors") {
    std::string header =
        R"({"a": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]},
            "b": {"dtype": "BF16", "shape": [4], "data_offsets": [6, 14]}})";
    CHECK_ERROR(read_raw(dir, safetensors_bytes(header, kData)),
                path + ": tensor 'b' [6, 14) overlaps tensor 'a' [0, 8)");
    std::string same =
        R"({"a": {"dtype": "BF16", "shape": [8], "data_offsets": [0, 16]},
            "b": {"dtype": "BF16", "shape": [8], "data_offsets": [0, 16]}})";
    CHECK_ERROR(read_raw(dir, safetensors_bytes(same, kData)), "tensor 'b' [0, 16) overlaps tensor 'a' [0, 16)");
  }
  SUBCASE("gaps between tensors, and a first tensor not at 0") {
    std::string header =
        R"({"a": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]},
            "b": {"dtype": "BF16", "shape": [4], "data_offsets": [8, 16]}})";
    CHECK_ERROR(read_raw(dir, safetensors_bytes(header, kData)),
                path + ": tensor 'b' [8, 16) leaves a gap of 2 bytes after tensor 'a' [0, 6)");
    CHECK_ERROR(read_raw(dir, safetensors_bytes(
                                  header_for(R"({"dtype": "BF16", "shape": [4], "data_offsets": [8, 16]})"), kData)),
                "tensor 'w' [8, 16) leaves a gap of 8 bytes after the start of the data section");
  }
  SUBCASE("bytes after the last tensor") {
    CHECK_ERROR(read_raw(dir, safetensors_bytes(header_for(ok_entry), kData + "xyz")),
                path + ": the tensors end at byte 16 of the data section, but it has 19 bytes: 3 belong to no tensor");
    CHECK_ERROR(read_raw(dir, safetensors_bytes("{}", kData)),
                "the tensors end at byte 0 of the data section, but it has 16 bytes");
  }
  SUBCASE("a header length shortened into the header's padding") {
    // The JSON still parses, but the data section now starts 3 bytes early: every tensor would
    // be read 3 bytes off.
    const std::string header = header_for(ok_entry) + "   ";
    REQUIRE(read_raw(dir, safetensors_bytes(header, kData)).tensors.size() == 1);
    CHECK_ERROR(read_raw(dir, safetensors_bytes(header, kData, header.size() - 3)),
                "the tensors end at byte 16 of the data section, but it has 19 bytes: 3 belong to no tensor "
                "(is the 8-byte header length wrong?)");
  }
  SUBCASE("a header that is not UTF-8") {
    const std::string entry = R"({"dtype": "BF16", "shape": [2, 4], "data_offsets": [0, 16]})";
    CHECK_ERROR(read_raw(dir, safetensors_bytes("{\"w\xff\": " + entry + "}", kData)),
                path + ": the header is not valid UTF-8 (byte 3 of");
    for (const char* bad : {"\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82"})
      CHECK_ERROR(read_raw(dir, safetensors_bytes(std::string("{\"") + bad + "\": " + entry + "}", kData)),
                  "the header is not valid UTF-8 (byte 2 of");
    REQUIRE(read_raw(dir, safetensors_bytes("{\"w\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\": " + entry + "}", kData))
                .tensors[0]
                .name == "w\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  }
  SUBCASE("__metadata__ must map strings to strings") {
    CHECK_ERROR(read_raw(dir, safetensors_bytes(R"({"__metadata__": {"format": 1}})", "")),
                path + ": '__metadata__' must be an object of strings, got {\"format\":1}");
    CHECK_ERROR(read_raw(dir, safetensors_bytes(R"({"__metadata__": ["pt"]})", "")),
                "'__metadata__' must be an object of strings");
  }
}

TEST_CASE("safetensors: paths that are not regular files are named in plain words") {
  TempDir dir;
  CHECK_ERROR(read_safetensors(dir.path()),
              dir.path().string() + ": cannot open safetensors file: it is a directory, not a file");
  CHECK_ERROR(read_safetensors("/dev/null"),
              "/dev/null: cannot open safetensors file: it is a character device, not a regular file");
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  CHECK_ERROR(read_safetensors(dir / "fifo"), "fifo: cannot open safetensors file: it is a FIFO, not a regular file");
  std::filesystem::create_directory_symlink(dir.path(), dir / "link");
  CHECK_ERROR(read_safetensors(dir / "link"), "link: cannot open safetensors file: it is a directory, not a file");
}

TEST_CASE("write_safetensors rejects wrong byte counts and repeated names") {
  TempDir dir;
  const std::vector<uint16_t> v(5);
  CHECK_ERROR(write_safetensors(dir / "x.safetensors", {entry("v", DType::BF16, {2, 3}, v)}),
              "tensor 'v' has 10 bytes, which does not match BF16 [2,3]");
  CHECK_ERROR(write_safetensors(dir / "x.safetensors", {entry("v", DType::BF16, {5}, v),
                                                        entry("v", DType::BF16, {5}, v)}),
              "tensor 'v' is listed twice");
}
