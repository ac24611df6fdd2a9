// Helpers for tests that need files on disk: a fresh temporary directory and
// a writer of valid safetensors files that tests can then damage.
#ifndef WEFT_TEST_UNIT_TESTFILES_H_
#define WEFT_TEST_UNIT_TESTFILES_H_

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace weft::testing {

// A directory that exists for the lifetime of the object.
class TempDir {
public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "weft-test-XXXXXX").string();
    path_ = mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string &path() const { return path_; }
  std::string file(const std::string &name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

inline void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

inline std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct FakeTensor {
  std::string name;
  std::string dtype; // safetensors spelling: "F16", "BF16", "F32", ...
  std::vector<int64_t> shape;
};

inline uint64_t fakeDTypeSize(const std::string &dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  return 1;
}

// The JSON header of a valid file holding `tensors` back to back.
inline std::string safetensorsHeaderJson(const std::vector<FakeTensor> &tensors,
                                         uint64_t *dataBytes = nullptr) {
  std::string json = "{";
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const FakeTensor &t = tensors[i];
    uint64_t n = fakeDTypeSize(t.dtype);
    std::string shape;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      shape += (d ? "," : "") + std::to_string(t.shape[d]);
      n *= uint64_t(t.shape[d]);
    }
    json += (i ? "," : "") + std::string("\"") + t.name + "\":{\"dtype\":\"" +
            t.dtype + "\",\"shape\":[" + shape + "],\"data_offsets\":[" +
            std::to_string(offset) + "," + std::to_string(offset + n) + "]}";
    offset += n;
  }
  if (dataBytes)
    *dataBytes = offset;
  return json + "}";
}

// A complete file: 8-byte little-endian length, JSON, then `dataBytes` bytes.
inline std::string safetensorsFile(const std::string &headerJson,
                                   uint64_t dataBytes) {
  std::string out(8, '\0');
  uint64_t n = headerJson.size();
  for (int i = 0; i < 8; ++i)
    out[i] = char((n >> (8 * i)) & 0xff);
  out += headerJson;
  out.append(dataBytes, '\x01');
  return out;
}

inline void writeSafetensors(const std::string &path,
                             const std::vector<FakeTensor> &tensors) {
  uint64_t dataBytes = 0;
  std::string json = safetensorsHeaderJson(tensors, &dataBytes);
  writeFile(path, safetensorsFile(json, dataBytes));
}

} // namespace weft::testing

#endif // WEFT_TEST_UNIT_TESTFILES_H_
