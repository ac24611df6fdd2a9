#include "runtime/io/Gguf.h"

#include "runtime/io/MappedFile.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace weft::io {

const char *ggufValueTypeName(GgufValueType type) {
  switch (type) {
  case GgufValueType::U8: return "u8";
  case GgufValueType::I8: return "i8";
  case GgufValueType::U16: return "u16";
  case GgufValueType::I16: return "i16";
  case GgufValueType::U32: return "u32";
  case GgufValueType::I32: return "i32";
  case GgufValueType::F32: return "f32";
  case GgufValueType::Bool: return "bool";
  case GgufValueType::String: return "string";
  case GgufValueType::Array: return "array";
  case GgufValueType::U64: return "u64";
  case GgufValueType::I64: return "i64";
  case GgufValueType::F64: return "f64";
  }
  return "?";
}

std::optional<uint64_t> GgufValue::asUnsigned() const {
  switch (type) {
  case GgufValueType::U8: case GgufValueType::U16: case GgufValueType::U32:
  case GgufValueType::U64: case GgufValueType::Bool:
    return u;
  case GgufValueType::I8: case GgufValueType::I16: case GgufValueType::I32:
  case GgufValueType::I64:
    if (i >= 0)
      return uint64_t(i);
    return std::nullopt;
  default:
    return std::nullopt;
  }
}

std::optional<double> GgufValue::asNumber() const {
  switch (type) {
  case GgufValueType::F32: case GgufValueType::F64:
    return f;
  case GgufValueType::I8: case GgufValueType::I16: case GgufValueType::I32:
  case GgufValueType::I64:
    return double(i);
  case GgufValueType::String: case GgufValueType::Array:
    return std::nullopt;
  default:
    return double(u);
  }
}

namespace {

struct TypeInfo {
  GgmlType type;
  const char *name;
  uint64_t elements, bytes;
};
constexpr TypeInfo kTypes[] = {
    {GgmlType::F32, "F32", 1, 4},       {GgmlType::F16, "F16", 1, 2},
    {GgmlType::Q4_0, "Q4_0", 32, 18},   {GgmlType::Q4_1, "Q4_1", 32, 20},
    {GgmlType::Q5_0, "Q5_0", 32, 22},   {GgmlType::Q5_1, "Q5_1", 32, 24},
    {GgmlType::Q8_0, "Q8_0", 32, 34},   {GgmlType::Q8_1, "Q8_1", 32, 36},
    {GgmlType::Q2_K, "Q2_K", 256, 84},  {GgmlType::Q3_K, "Q3_K", 256, 110},
    {GgmlType::Q4_K, "Q4_K", 256, 144}, {GgmlType::Q5_K, "Q5_K", 256, 176},
    {GgmlType::Q6_K, "Q6_K", 256, 210}, {GgmlType::Q8_K, "Q8_K", 256, 292},
    {GgmlType::I8, "I8", 1, 1},         {GgmlType::I16, "I16", 1, 2},
    {GgmlType::I32, "I32", 1, 4},       {GgmlType::I64, "I64", 1, 8},
    {GgmlType::F64, "F64", 1, 8},       {GgmlType::BF16, "BF16", 1, 2},
};

const TypeInfo *typeInfo(uint32_t type) {
  for (const TypeInfo &t : kTypes)
    if (uint32_t(t.type) == type)
      return &t;
  return nullptr;
}

// What a message shows of a name read from the file: printable ASCII,
// at most 80 bytes.
std::string shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 80))
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 80)
    out += "...";
  return "'" + out + "'";
}

// A bounded little-endian reader over the file's first bytes.
class Cursor {
public:
  Cursor(std::string_view bytes, std::string_view file) : bytes_(bytes), file_(file) {}
  uint64_t at() const { return at_; }
  uint64_t left() const { return bytes_.size() - at_; }

  Status error(const std::string &what) const {
    return invalidArgument(std::string(file_) + ": GGUF " + what + " (at byte " +
                           std::to_string(at_) + ")");
  }
  template <class T> Status read(T &out, const char *what) {
    if (left() < sizeof(T))
      return error(std::string(what) + " runs past the end of the file");
    std::memcpy(&out, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return Status::ok();
  }
  Status string(std::string &out, const char *what) {
    uint64_t n = 0;
    WEFT_RETURN_IF_ERROR(read(n, what));
    if (n > left())
      return error(std::string(what) + " of " + std::to_string(n) +
                   " bytes runs past the end of the file");
    if (n > kMaxGgufStringBytes)
      return error(std::string(what) + " of " + std::to_string(n) + " bytes: at most " +
                   std::to_string(kMaxGgufStringBytes));
    out.assign(bytes_.data() + at_, size_t(n));
    at_ += n;
    return Status::ok();
  }

private:
  std::string_view bytes_, file_;
  uint64_t at_ = 0;
};

bool printableName(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return c >= 0x20 && c < 0x7f;
  });
}

// Bytes an element of `type` takes at least (strings and arrays: their
// length fields), so a count is checked against what is left before
// anything is allocated.
uint64_t minimumBytes(GgufValueType type) {
  switch (type) {
  case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::Bool: return 1;
  case GgufValueType::U16: case GgufValueType::I16: return 2;
  case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::F32: return 4;
  case GgufValueType::U64: case GgufValueType::I64: case GgufValueType::F64: return 8;
  case GgufValueType::String: return 8;
  case GgufValueType::Array: return 12;
  }
  return 1;
}

bool knownValueType(uint32_t t) { return t <= uint32_t(GgufValueType::F64); }

Status readValue(Cursor &c, GgufValueType type, GgufValue &v, int depth,
                 const std::string &key) {
  v.type = type;
  auto scalar = [&](auto sample) -> Status {
    decltype(sample) x{};
    WEFT_RETURN_IF_ERROR(c.read(x, "a metadata value"));
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>)
      v.f = double(x);
    else if constexpr (std::is_signed_v<T>)
      v.i = int64_t(x);
    else
      v.u = uint64_t(x);
    return Status::ok();
  };
  switch (type) {
  case GgufValueType::U8: return scalar(uint8_t{});
  case GgufValueType::I8: return scalar(int8_t{});
  case GgufValueType::U16: return scalar(uint16_t{});
  case GgufValueType::I16: return scalar(int16_t{});
  case GgufValueType::U32: return scalar(uint32_t{});
  case GgufValueType::I32: return scalar(int32_t{});
  case GgufValueType::F32: return scalar(float{});
  case GgufValueType::U64: return scalar(uint64_t{});
  case GgufValueType::I64: return scalar(int64_t{});
  case GgufValueType::F64: return scalar(double{});
  case GgufValueType::Bool: {
    uint8_t b = 0;
    WEFT_RETURN_IF_ERROR(c.read(b, "a metadata value"));
    if (b > 1)
      return c.error("metadata " + shown(key) + ": a bool of " + std::to_string(b) +
                     " (expected 0 or 1)");
    v.u = b;
    return Status::ok();
  }
  case GgufValueType::String:
    return c.string(v.s, "a metadata string");
  case GgufValueType::Array: {
    if (depth >= kMaxGgufArrayDepth)
      return c.error("metadata " + shown(key) + ": arrays nested deeper than " +
                     std::to_string(kMaxGgufArrayDepth));
    uint32_t element = 0;
    uint64_t count = 0;
    WEFT_RETURN_IF_ERROR(c.read(element, "an array's element type"));
    if (!knownValueType(element))
      return c.error("metadata " + shown(key) + ": unknown array element type " +
                     std::to_string(element));
    WEFT_RETURN_IF_ERROR(c.read(count, "an array's length"));
    v.elementType = GgufValueType(element);
    if (count > c.left() / minimumBytes(v.elementType))
      return c.error("metadata " + shown(key) + ": an array of " + std::to_string(count) +
                     " " + ggufValueTypeName(v.elementType) +
                     " values runs past the end of the file");
    v.array.resize(size_t(count));
    for (GgufValue &e : v.array)
      WEFT_RETURN_IF_ERROR(readValue(c, v.elementType, e, depth + 1, key));
    return Status::ok();
  }
  }
  return c.error("metadata " + shown(key) + ": unknown value type");
}

} // namespace

std::optional<std::string_view> ggmlTypeName(uint32_t type) {
  if (const TypeInfo *t = typeInfo(type))
    return std::string_view(t->name);
  return std::nullopt;
}

std::optional<GgmlBlock> ggmlBlock(uint32_t type) {
  if (const TypeInfo *t = typeInfo(type))
    return GgmlBlock{t->elements, t->bytes};
  return std::nullopt;
}

uint64_t GgufTensor::numElements() const {
  uint64_t n = 1;
  for (uint64_t d : dims)
    n *= d;
  return n;
}

const GgufValue *GgufFile::find(std::string_view key) const {
  auto it = metadata.find(std::string(key));
  return it == metadata.end() ? nullptr : &it->second;
}

const GgufTensor *GgufFile::tensor(std::string_view name) const {
  for (const GgufTensor &t : tensors)
    if (t.name == name)
      return &t;
  return nullptr;
}

StatusOr<GgufFile> parseGguf(std::string_view prefix, uint64_t fileSize,
                             std::string_view displayName) {
  Cursor c(prefix.substr(0, size_t(std::min<uint64_t>(prefix.size(), fileSize))), displayName);
  GgufFile f;
  f.path = std::string(displayName);
  f.fileSize = fileSize;
  char magic[4] = {};
  if (c.left() < 4)
    return c.error("header: the file is " + std::to_string(fileSize) +
                   " bytes, shorter than the magic");
  WEFT_RETURN_IF_ERROR(c.read(magic, "the magic"));
  if (std::memcmp(magic, "GGUF", 4) != 0)
    return c.error("header: no 'GGUF' magic: not a GGUF file");
  WEFT_RETURN_IF_ERROR(c.read(f.version, "the version"));
  if (f.version != 2 && f.version != 3)
    return c.error("header: version " + std::to_string(f.version) + " (expected 2 or 3)");
  uint64_t tensorCount = 0, metadataCount = 0;
  WEFT_RETURN_IF_ERROR(c.read(tensorCount, "the tensor count"));
  WEFT_RETURN_IF_ERROR(c.read(metadataCount, "the metadata count"));
  if (tensorCount > kMaxGgufTensors)
    return c.error("header: " + std::to_string(tensorCount) + " tensors (at most " +
                   std::to_string(kMaxGgufTensors) + ")");
  if (metadataCount > kMaxGgufMetadata)
    return c.error("header: " + std::to_string(metadataCount) + " metadata entries (at most " +
                   std::to_string(kMaxGgufMetadata) + ")");
  // A metadata pair takes at least 8 + 4 + 1 bytes and a tensor 8 + 4 + 8
  // + 4 + 8: counts the file cannot hold are refused before any is read.
  if (metadataCount > c.left() / 13 || tensorCount > c.left() / 32)
    return c.error("header: " + std::to_string(metadataCount) + " metadata entries and " +
                   std::to_string(tensorCount) + " tensors cannot fit a file of " +
                   std::to_string(fileSize) + " bytes");

  for (uint64_t m = 0; m < metadataCount; ++m) {
    std::string key;
    WEFT_RETURN_IF_ERROR(c.string(key, "a metadata key"));
    if (!printableName(key))
      return c.error("metadata " + std::to_string(m) + ": key " + shown(key) +
                     " is empty or not printable ASCII");
    if (f.metadata.count(key))
      return c.error("metadata: key " + shown(key) + " appears twice");
    uint32_t type = 0;
    WEFT_RETURN_IF_ERROR(c.read(type, "a metadata value type"));
    if (!knownValueType(type))
      return c.error("metadata " + shown(key) + ": unknown value type " + std::to_string(type));
    GgufValue v;
    WEFT_RETURN_IF_ERROR(readValue(c, GgufValueType(type), v, 0, key));
    f.metadata.emplace(std::move(key), std::move(v));
  }
  if (const GgufValue *a = f.find("general.alignment")) {
    std::optional<uint64_t> n = a->asUnsigned();
    if (!n || *n == 0 || (*n & (*n - 1)) || *n > (1u << 20))
      return c.error("metadata 'general.alignment': expected a power of two up to 1 MiB");
    f.alignment = *n;
  }

  std::map<std::string, size_t> names;
  f.tensors.reserve(size_t(tensorCount));
  for (uint64_t n = 0; n < tensorCount; ++n) {
    GgufTensor t;
    WEFT_RETURN_IF_ERROR(c.string(t.name, "a tensor name"));
    if (!printableName(t.name))
      return c.error("tensor " + std::to_string(n) + ": name " + shown(t.name) +
                     " is empty or not printable ASCII");
    if (!names.emplace(t.name, n).second)
      return c.error("tensor " + shown(t.name) + " appears twice");
    uint32_t rank = 0;
    WEFT_RETURN_IF_ERROR(c.read(rank, "a tensor's dimension count"));
    if (rank < 1 || rank > uint32_t(kMaxGgufDims))
      return c.error("tensor " + shown(t.name) + ": " + std::to_string(rank) +
                     " dimensions (expected 1 to " + std::to_string(kMaxGgufDims) + ")");
    uint64_t elements = 1;
    for (uint32_t d = 0; d < rank; ++d) {
      uint64_t dim = 0;
      WEFT_RETURN_IF_ERROR(c.read(dim, "a tensor dimension"));
      if (dim == 0 || dim > (uint64_t(1) << 40) || elements > (uint64_t(1) << 62) / dim)
        return c.error("tensor " + shown(t.name) + ": dimension " + std::to_string(d) + " is " +
                       std::to_string(dim) + " (expected 1 to 2^40, at most 2^62 elements)");
      elements *= dim;
      t.dims.push_back(dim);
    }
    WEFT_RETURN_IF_ERROR(c.read(t.type, "a tensor's type"));
    WEFT_RETURN_IF_ERROR(c.read(t.offset, "a tensor's offset"));
    std::optional<GgmlBlock> block = ggmlBlock(t.type);
    if (!block)
      return c.error("tensor " + shown(t.name) + ": ggml type " + std::to_string(t.type) +
                     " has no known layout");
    if (t.dims[0] % block->elements)
      return c.error("tensor " + shown(t.name) + ": " + std::to_string(t.dims[0]) +
                     " elements a row is not whole " + std::string(*ggmlTypeName(t.type)) +
                     " blocks of " + std::to_string(block->elements));
    t.bytes = elements / block->elements * block->bytes;
    f.tensors.push_back(std::move(t));
  }
  f.dataOffset = (c.at() + f.alignment - 1) / f.alignment * f.alignment;
  if (f.dataOffset > fileSize)
    return c.error("index: the data section starts at byte " + std::to_string(f.dataOffset) +
                   ", past the end of the file");
  const uint64_t dataSize = fileSize - f.dataOffset;
  std::vector<const GgufTensor *> byOffset;
  for (GgufTensor &t : f.tensors) {
    if (t.offset % f.alignment)
      return c.error("tensor " + shown(t.name) + ": offset " + std::to_string(t.offset) +
                     " is not a multiple of the alignment " + std::to_string(f.alignment));
    if (t.offset > dataSize || t.bytes > dataSize - t.offset)
      return c.error("tensor " + shown(t.name) + ": bytes [" + std::to_string(t.offset) + ", " +
                     std::to_string(t.offset + t.bytes) + ") of the data section run past its " +
                     std::to_string(dataSize) + " bytes");
    t.offset += f.dataOffset;
    byOffset.push_back(&t);
  }
  std::sort(byOffset.begin(), byOffset.end(),
            [](const GgufTensor *a, const GgufTensor *b) { return a->offset < b->offset; });
  for (size_t i = 1; i < byOffset.size(); ++i)
    if (byOffset[i]->offset < byOffset[i - 1]->offset + byOffset[i - 1]->bytes)
      return c.error("tensors " + shown(byOffset[i - 1]->name) + " and " +
                     shown(byOffset[i]->name) + " overlap");
  return f;
}

StatusOr<GgufFile> readGguf(const std::string &path) {
  StatusOr<MappedFile> file = MappedFile::open(path);
  if (!file.isOk())
    return file.status();
  return parseGguf(file->bytes(), file->size(), path);
}

} // namespace weft::io
