// Safetensors header and shard-index parsing: one SAX pass over the JSON (so
// duplicate keys are seen and nothing throws), then byte-range validation.
#include "runtime/io/Safetensors.h"

#include "runtime/base/Text.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <exception>
#include <limits>
#include <new>
#include <system_error>
#include <unordered_set>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace weft::io {

//===----------------------------------------------------------------------===//
// DType
//===----------------------------------------------------------------------===//

namespace {

struct DTypeEntry {
  DType dtype;
  const char *name;
  uint64_t size;
};

constexpr DTypeEntry kDTypes[] = {
    {DType::F64, "F64", 8},         {DType::F32, "F32", 4},
    {DType::F16, "F16", 2},         {DType::BF16, "BF16", 2},
    {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E5M2, "F8_E5M2", 1},
    {DType::I64, "I64", 8},         {DType::I32, "I32", 4},
    {DType::I16, "I16", 2},         {DType::I8, "I8", 1},
    {DType::U8, "U8", 1},           {DType::BOOL, "BOOL", 1},
    {DType::U16, "U16", 2},         {DType::U32, "U32", 4},
    {DType::U64, "U64", 8},
};

const DTypeEntry *lookup(DType dtype) {
  for (const DTypeEntry &e : kDTypes)
    if (e.dtype == dtype)
      return &e;
  return nullptr;
}

} // namespace

std::optional<DType> parseDType(std::string_view safetensorsName) {
  for (const DTypeEntry &e : kDTypes)
    if (safetensorsName == e.name)
      return e.dtype;
  return std::nullopt;
}

const char *dtypeName(DType dtype) {
  const DTypeEntry *e = lookup(dtype);
  return e ? e->name : "?";
}

uint64_t dtypeSize(DType dtype) {
  const DTypeEntry *e = lookup(dtype);
  return e ? e->size : 0;
}

uint64_t TensorInfo::numElements() const {
  uint64_t n = 1;
  for (int64_t d : shape)
    n *= static_cast<uint64_t>(d);
  return n;
}

uint64_t TensorInfo::numBytes() const { return numElements() * dtypeSize(dtype); }

const TensorInfo *SafetensorsHeader::find(std::string_view name) const {
  auto it = index_.find(name);
  if (it == index_.end() || it->second >= tensors.size() ||
      tensors[it->second].name != name)
    return nullptr;
  return &tensors[it->second];
}

void SafetensorsHeader::rebuildIndex() {
  index_.clear();
  for (size_t i = 0; i < tensors.size(); ++i)
    index_.emplace(tensors[i].name, i);
}

std::vector<std::string> ShardIndex::shardFiles() const {
  std::vector<std::string> files;
  files.reserve(weightMap.size());
  for (const auto &entry : weightMap)
    files.push_back(entry.second);
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

namespace {

//===----------------------------------------------------------------------===//
// Message helpers
//===----------------------------------------------------------------------===//

using ::weft::firstInvalidUtf8;
using ::weft::kAllValidUtf8;

std::string printable(std::string_view s, size_t maxBytes = 160) {
  return printableForMessage(s, maxBytes);
}

std::string quote(std::string_view s) { return "'" + printable(s) + "'"; }

std::string str(uint64_t v) { return std::to_string(v); }

std::string shapeString(const std::vector<int64_t> &shape) {
  constexpr size_t kShown = 12;
  std::string out = "[";
  for (size_t i = 0; i < shape.size() && i < kShown; ++i) {
    if (i)
      out += ", ";
    out += std::to_string(shape[i]);
  }
  if (shape.size() > kShown)
    out += ", ... (" + str(shape.size()) + " dims)";
  return out + "]";
}

std::string rangeString(uint64_t begin, uint64_t end) {
  return "[" + str(begin) + ", " + str(end) + ")";
}

bool mulOverflows(uint64_t a, uint64_t b, uint64_t &out) {
  return __builtin_mul_overflow(a, b, &out);
}

// Every message is "<display>: <what is wrong>: <what was expected>".
class Messages {
public:
  explicit Messages(std::string_view displayName)
      : display_(printable(displayName, 4096)) {}
  std::string operator()(const std::string &what,
                         const std::string &expected) const {
    return display_ + ": " + what + ": " + expected;
  }
  // For the few messages whose expectation reads better inline.
  std::string line(const std::string &whatAndExpected) const {
    return display_ + ": " + whatAndExpected;
  }

private:
  std::string display_;
};

//===----------------------------------------------------------------------===//
// SAX base: the JSON path, duplicate keys, syntax errors
//===----------------------------------------------------------------------===//

using Json = nlohmann::json;

struct Value {
  enum Kind { Null, Bool, NegativeInt, UnsignedInt, Float, String, Object, Array };
  Kind kind = Null;
  bool boolean = false;
  int64_t negative = 0;
  uint64_t unsignedInt = 0;
  double real = 0;
  const std::string *text = nullptr; // String contents, or a Float's spelling
};

std::string describe(const Value &v) {
  switch (v.kind) {
  case Value::Null: return "null";
  case Value::Bool: return v.boolean ? "true" : "false";
  case Value::NegativeInt: return std::to_string(v.negative);
  case Value::UnsignedInt: return str(v.unsignedInt);
  case Value::Float: return printable(*v.text, 40);
  case Value::String: return "the string " + quote(*v.text);
  case Value::Object: return "an object";
  case Value::Array: return "an array";
  }
  return "?";
}

// Neither file format nests deeper than 3; the cap keeps a hostile index from
// growing our frame stack without bound.
constexpr size_t kMaxDepth = 64;

class StrictSax : public nlohmann::json_sax<Json> {
public:
  StrictSax(const Messages &msg, std::string what, uint64_t fileOffset)
      : msg_(msg), what_(std::move(what)), fileOffset_(fileOffset) {}

  Status takeError() { return std::move(error_); }

  bool null() override { return value(Value{}); }
  bool boolean(bool b) override {
    Value v;
    v.kind = Value::Bool;
    v.boolean = b;
    return value(v);
  }
  bool number_integer(number_integer_t x) override {
    Value v;
    if (x >= 0) {
      v.kind = Value::UnsignedInt;
      v.unsignedInt = static_cast<uint64_t>(x);
    } else {
      v.kind = Value::NegativeInt;
      v.negative = x;
    }
    return value(v);
  }
  bool number_unsigned(number_unsigned_t x) override {
    Value v;
    v.kind = Value::UnsignedInt;
    v.unsignedInt = x;
    return value(v);
  }
  bool number_float(number_float_t x, const string_t &spelling) override {
    Value v;
    v.kind = Value::Float;
    v.real = x;
    v.text = &spelling;
    return value(v);
  }
  bool string(string_t &s) override {
    Value v;
    v.kind = Value::String;
    v.text = &s;
    return value(v);
  }
  bool binary(binary_t &) override {
    // Only the binary formats (CBOR, ...) produce this; JSON never does.
    return fail(invalidArgument(msg_(what_ + " holds a binary value", "expected JSON")));
  }
  bool start_object(std::size_t) override { return open(Value::Object); }
  bool start_array(std::size_t) override { return open(Value::Array); }
  bool key(string_t &k) override {
    Frame &f = frames_.back();
    if (!f.keys.insert(k).second)
      return fail(duplicateKey(k));
    f.key = k;
    return onKey(k);
  }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t position, const std::string &,
                   const nlohmann::detail::exception &ex) override {
    // nlohmann counts bytes read, so the offending byte is one before.
    uint64_t at = position ? position - 1 : 0;
    std::string where = "at byte " + str(at);
    if (fileOffset_)
      where += " (file offset " + str(at + fileOffset_) + ")";
    return fail(invalidArgument(msg_.line(what_ + " is not valid JSON " + where + ": " +
                                          parserDetail(ex.what()))));
  }

protected:
  struct Frame {
    bool isObject = true;
    std::string key;    // the current key, in objects
    uint64_t count = 0; // values seen so far, in arrays
    std::unordered_set<std::string> keys;
  };

  // Called for every value (and container start) with frames_ describing
  // where it sits; frames_.size() is its depth.
  virtual bool onValue(const Value &v) = 0;
  virtual bool onKey(const std::string &) { return true; }
  // Called before the innermost frame is popped.
  virtual bool onClose() { return true; }
  virtual Status duplicateKey(const std::string &key) = 0;

  bool fail(Status status) {
    error_ = std::move(status);
    return false;
  }

  // "weight_map", "metadata.extra[2]": where frames_[0..depth) point.
  std::string jsonPath(size_t depth) const {
    std::string path;
    for (size_t i = 0; i < depth && i < frames_.size(); ++i) {
      if (frames_[i].isObject)
        path += (path.empty() ? "" : ".") + printable(frames_[i].key, 60);
      else // the element we are inside was counted when it started
        path += "[" + str(frames_[i].count ? frames_[i].count - 1 : 0) + "]";
    }
    return path;
  }

  const Messages &msg_;
  std::string what_;
  std::vector<Frame> frames_;

private:
  static std::string parserDetail(std::string_view text) {
    // Drop "[json.exception.parse_error.101] parse error at line 1, column 8: ",
    // since the byte offset we report is more useful for a one-line JSON blob.
    if (size_t p = text.find("] "); p != std::string_view::npos)
      text.remove_prefix(p + 2);
    if (text.substr(0, 11) == "parse error")
      if (size_t p = text.find(": "); p != std::string_view::npos)
        text.remove_prefix(p + 2);
    // nlohmann ends most details with "; expected X"; make that our
    // "<what>: <expected>" tail, or supply one.
    std::string detail = printable(text, 200);
    if (size_t p = detail.rfind("; expected "); p != std::string::npos)
      return detail.replace(p, 1, ":");
    return detail + ": expected one JSON object";
  }

  bool value(const Value &v) {
    if (!onValue(v))
      return false;
    if (!frames_.empty() && !frames_.back().isObject)
      ++frames_.back().count;
    return true;
  }

  bool open(Value::Kind kind) {
    Value v;
    v.kind = kind;
    if (!value(v))
      return false;
    if (frames_.size() >= kMaxDepth)
      return fail(invalidArgument(msg_(what_ + " nests deeper than " + str(kMaxDepth) +
                                           " levels at " + jsonPath(frames_.size()),
                                       "expected a flat structure")));
    frames_.emplace_back();
    frames_.back().isObject = kind == Value::Object;
    return true;
  }

  bool close() {
    bool ok = onClose();
    frames_.pop_back();
    return ok;
  }

  uint64_t fileOffset_;
  Status error_;
};

//===----------------------------------------------------------------------===//
// Safetensors header
//===----------------------------------------------------------------------===//

// Real checkpoints stay below rank 8; the cap keeps a hostile shape from
// costing memory.
constexpr size_t kMaxRank = 64;

class HeaderSax final : public StrictSax {
public:
  HeaderSax(const Messages &msg, uint64_t dataSize, uint64_t fileSize,
            uint64_t headerSize, SafetensorsHeader &out)
      : StrictSax(msg, "header", 8), dataSize_(dataSize), fileSize_(fileSize),
        headerSize_(headerSize), out_(out) {}

private:
  struct Pending {
    TensorInfo info;
    bool hasDtype = false, hasShape = false, hasOffsets = false;
  };

  std::string label() const { return "tensor " + quote(pending_.info.name); }

  Status invalid(const std::string &what, const std::string &expected) const {
    return invalidArgument(msg_(what, expected));
  }

  bool onValue(const Value &v) override {
    switch (frames_.size()) {
    case 0:
      if (v.kind != Value::Object)
        return fail(invalid("header is " + describe(v), "expected a JSON object"));
      return true;
    case 1:
      return topLevelValue(v);
    case 2:
      return entryField(v);
    default:
      return arrayElement(v);
    }
  }

  bool topLevelValue(const Value &v) {
    const std::string &name = frames_[0].key;
    if (name == "__metadata__") {
      inMetadata_ = true;
      if (v.kind != Value::Object)
        return fail(invalid("__metadata__ is " + describe(v),
                            "expected an object of string values"));
      return true;
    }
    inMetadata_ = false;
    pending_ = Pending();
    pending_.info.name = name;
    if (v.kind != Value::Object)
      return fail(invalid(label() + " is " + describe(v),
                          "expected an object with dtype, shape and data_offsets"));
    return true;
  }

  bool entryField(const Value &v) {
    const std::string &field = frames_[1].key;
    if (inMetadata_) {
      if (v.kind != Value::String)
        return fail(invalid("__metadata__ " + quote(field) + " is " + describe(v),
                            "expected a string"));
      out_.metadata.emplace(field, *v.text);
      return true;
    }
    if (field == "dtype") {
      if (v.kind != Value::String)
        return fail(invalid(label() + ": dtype is " + describe(v),
                            "expected a string such as \"F16\""));
      std::optional<DType> dtype = parseDType(*v.text);
      if (!dtype)
        return fail(unimplemented(msg_(label() + ": unknown dtype " + quote(*v.text),
                                       "expected one of F64, F32, F16, BF16, F8_E4M3, "
                                       "F8_E5M2, I64, I32, I16, I8, U64, U32, U16, "
                                       "U8, BOOL")));
      pending_.info.dtype = *dtype;
      pending_.hasDtype = true;
      return true;
    }
    if (field == "shape" || field == "data_offsets") {
      if (v.kind != Value::Array)
        return fail(invalid(label() + ": " + field + " is " + describe(v),
                            field == "shape" ? "expected an array of non-negative integers"
                                             : "expected [begin, end]"));
      (field == "shape" ? pending_.hasShape : pending_.hasOffsets) = true;
      return true;
    }
    // A field we do not know could change what the bytes mean (scales,
    // quantization); ignoring it would load wrong weights silently.
    return fail(invalid(label() + ": unknown field " + quote(field),
                        "expected only dtype, shape and data_offsets"));
  }

  bool arrayElement(const Value &v) {
    // Only shape and data_offsets arrays are ever opened below a tensor.
    const std::string &field = frames_[1].key;
    const uint64_t index = frames_[2].count;
    const std::string where = label() + ": " + field + "[" + str(index) + "]";
    bool nonNegative = v.kind == Value::UnsignedInt;
    if (field == "shape") {
      if (index >= kMaxRank)
        return fail(invalid(label() + ": shape has more than " + str(kMaxRank) +
                                " dimensions",
                            "expected at most " + str(kMaxRank)));
      if (!nonNegative || v.unsignedInt > uint64_t(std::numeric_limits<int64_t>::max()))
        return fail(invalid(where + " is " + describe(v),
                            "expected a non-negative integer below 2^63"));
      pending_.info.shape.push_back(static_cast<int64_t>(v.unsignedInt));
      return true;
    }
    if (index >= 2)
      return fail(invalid(label() + ": data_offsets has more than 2 entries",
                          "expected exactly [begin, end]"));
    if (!nonNegative)
      return fail(invalid(where + " is " + describe(v),
                          "expected a non-negative integer"));
    (index == 0 ? pending_.info.dataBegin : pending_.info.dataEnd) = v.unsignedInt;
    return true;
  }

  bool onClose() override {
    if (frames_.size() == 3 && frames_[1].key == "data_offsets" &&
        frames_[2].count != 2)
      return fail(invalid(label() + ": data_offsets has " + str(frames_[2].count) +
                              " entries",
                          "expected exactly [begin, end]"));
    if (frames_.size() == 2 && !inMetadata_)
      return finishTensor();
    return true;
  }

  bool onKey(const std::string &key) override {
    if (frames_.size() == 1 && key.empty())
      return fail(invalid("header has a tensor with an empty name",
                          "expected a non-empty tensor name"));
    return true;
  }

  Status duplicateKey(const std::string &key) override {
    if (frames_.size() == 1)
      return invalid((key == "__metadata__" ? std::string("__metadata__")
                                            : "tensor " + quote(key)) +
                         " appears twice in the header",
                     "expected each tensor name once");
    std::string owner = inMetadata_ ? std::string("__metadata__") : label();
    return invalid(owner + ": key " + quote(key) + " appears twice",
                   "expected each key once");
  }

  bool finishTensor() {
    TensorInfo &t = pending_.info;
    const char *missing = !pending_.hasDtype   ? "dtype"
                          : !pending_.hasShape ? "shape"
                          : !pending_.hasOffsets ? "data_offsets"
                                                 : nullptr;
    if (missing)
      return fail(invalid(label() + ": missing \"" + missing + "\"",
                          "expected an object with dtype, shape and data_offsets"));

    // Multiply only the non-zero extents so that whether a zero-size tensor
    // "overflows" does not depend on where its zero sits.
    uint64_t nonZeroProduct = 1;
    bool hasZero = false;
    for (int64_t d : t.shape) {
      if (d == 0)
        hasZero = true;
      else if (mulOverflows(nonZeroProduct, static_cast<uint64_t>(d), nonZeroProduct))
        return fail(invalid(label() + ": shape " + shapeString(t.shape) +
                                " has more than 2^64 elements",
                            "expected a shape that fits in the file"));
    }
    const uint64_t elements = hasZero ? 0 : nonZeroProduct;
    uint64_t bytes = 0;
    const bool bytesOverflow = mulOverflows(elements, dtypeSize(t.dtype), bytes);
    const std::string typed =
        std::string(dtypeName(t.dtype)) + " shape " + shapeString(t.shape);
    if (bytesOverflow || bytes > dataSize_)
      return fail(outOfRange(msg_(
          label() + ": " + typed + " needs " +
              (bytesOverflow ? std::string("more than 2^64") : str(bytes)) +
              " bytes but the data section holds only " + str(dataSize_),
          "expected the tensor to fit in the file")));

    const std::string range = rangeString(t.dataBegin, t.dataEnd);
    if (t.dataBegin > t.dataEnd)
      return fail(invalid(label() + ": data_offsets " + range + " begin after they end",
                          "expected begin <= end"));
    const uint64_t held = t.dataEnd - t.dataBegin;
    if (held != bytes)
      return fail(invalidArgument(msg_.line(label() + ": data_offsets " + range +
                                            " hold " + str(held) + " bytes but " +
                                            typed + " needs " + str(bytes))));
    if (t.dataEnd > dataSize_)
      return fail(outOfRange(msg_(
          label() + ": data_offsets " + range + " run past the data section",
          "expected end <= " + str(dataSize_) + " (file size " + str(fileSize_) +
              " - 8 - header size " + str(headerSize_) + ")")));
    out_.tensors.push_back(std::move(t));
    return true;
  }

  uint64_t dataSize_, fileSize_, headerSize_;
  SafetensorsHeader &out_;
  bool inMetadata_ = false;
  Pending pending_;
};

Status checkOverlaps(const Messages &msg, const std::vector<TensorInfo> &tensors) {
  std::vector<const TensorInfo *> byBegin;
  byBegin.reserve(tensors.size());
  for (const TensorInfo &t : tensors)
    if (t.dataEnd > t.dataBegin) // empty ranges share bytes with nothing
      byBegin.push_back(&t);
  std::sort(byBegin.begin(), byBegin.end(),
            [](const TensorInfo *a, const TensorInfo *b) {
              return a->dataBegin != b->dataBegin ? a->dataBegin < b->dataBegin
                                                  : a->dataEnd < b->dataEnd;
            });
  // With no overlap so far the ranges are disjoint and sorted, so the
  // previous one reaches furthest.
  for (size_t i = 1; i < byBegin.size(); ++i) {
    const TensorInfo &prev = *byBegin[i - 1], &cur = *byBegin[i];
    if (cur.dataBegin < prev.dataEnd)
      return invalidArgument(
          msg("tensor " + quote(cur.name) + ": data_offsets " +
                  rangeString(cur.dataBegin, cur.dataEnd) + " overlap tensor " +
                  quote(prev.name) + " at " + rangeString(prev.dataBegin, prev.dataEnd),
              "expected disjoint byte ranges"));
  }
  return Status::ok();
}

Status checkHeaderLength(const Messages &msg, uint64_t headerSize, uint64_t fileSize) {
  if (headerSize == 0)
    return invalidArgument(msg("header length prefix is 0",
                               "expected the byte size of a JSON header"));
  if (headerSize > kMaxSafetensorsHeaderSize)
    return invalidArgument(msg("header length prefix is " + str(headerSize) + " bytes",
                               "expected at most " + str(kMaxSafetensorsHeaderSize) +
                                   " (100 MiB); is this a safetensors file?"));
  if (headerSize > fileSize - 8)
    return outOfRange(msg("header length prefix is " + str(headerSize) +
                              " bytes but only " + str(fileSize - 8) + " follow it",
                          "expected the header to fit in the file"));
  return Status::ok();
}

uint64_t decodeLittleEndian64(std::string_view bytes) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(bytes[i]);
  return v;
}

// Checks that `json` is UTF-8 and starts like an object, then runs `sax`.
Status runSax(const Messages &msg, const std::string &what, std::string_view json,
              uint64_t fileOffset, StrictSax &sax) {
  if (size_t bad = firstInvalidUtf8(json); bad != kAllValidUtf8) {
    std::string where = "at byte " + str(bad);
    if (fileOffset)
      where += " (file offset " + str(bad + fileOffset) + ")";
    return invalidArgument(msg(what + " has invalid UTF-8 " + where, "expected UTF-8 JSON"));
  }
  // nlohmann stops at a NUL as if the input ended there, which would accept
  // "{}\0garbage"; JSON text never holds a raw NUL, so reject it up front.
  if (size_t nul = json.find('\0'); nul != std::string_view::npos) {
    std::string where = "at byte " + str(nul);
    if (fileOffset)
      where += " (file offset " + str(nul + fileOffset) + ")";
    return invalidArgument(msg(what + " has a NUL byte " + where,
                               "expected JSON text (padding must be spaces)"));
  }
  // The safetensors spec requires '{' first; it also rules out a BOM, which
  // nlohmann would skip.
  if (json.empty() || json.front() != '{')
    return invalidArgument(msg(what + (json.empty() ? std::string(" is empty")
                                                    : " starts with " +
                                                          quote(json.substr(0, 1))),
                               "expected a JSON object starting with '{'"));
  bool ok = Json::sax_parse(json.data(), json.data() + json.size(), &sax,
                            nlohmann::detail::input_format_t::json,
                            /*strict=*/true, /*ignore_comments=*/false);
  Status status = sax.takeError();
  if (!ok && status.isOk())
    return internalError(msg(what + " was rejected by the JSON parser without a reason",
                             "expected a reported error"));
  return status;
}

StatusOr<SafetensorsHeader> parseHeaderImpl(std::string_view prefix, uint64_t fileSize,
                                            std::string_view displayName) {
  const Messages msg(displayName);
  if (prefix.size() > fileSize)
    return invalidArgument(msg(str(prefix.size()) + " bytes given for a file of " +
                                   str(fileSize) + " bytes",
                               "expected at most the file size"));
  if (fileSize < 8)
    return invalidArgument(msg("file is " + str(fileSize) + " bytes long",
                               "expected at least 8 bytes (the header length prefix)"));
  if (prefix.size() < 8)
    return invalidArgument(msg("only " + str(prefix.size()) + " bytes of the file given",
                               "expected at least the 8-byte length prefix"));
  const uint64_t headerSize = decodeLittleEndian64(prefix);
  WEFT_RETURN_IF_ERROR(checkHeaderLength(msg, headerSize, fileSize));
  if (prefix.size() - 8 < headerSize)
    return invalidArgument(msg("only " + str(prefix.size() - 8) + " of the " +
                                   str(headerSize) + " header bytes given",
                               "expected the whole header"));

  SafetensorsHeader header;
  header.path = std::string(displayName);
  header.headerSize = headerSize;
  header.fileSize = fileSize;
  HeaderSax sax(msg, header.dataSize(), fileSize, headerSize, header);
  WEFT_RETURN_IF_ERROR(runSax(msg, "header", prefix.substr(8, headerSize), 8, sax));
  WEFT_RETURN_IF_ERROR(checkOverlaps(msg, header.tensors));
  header.rebuildIndex();
  return header;
}

//===----------------------------------------------------------------------===//
// Shard index
//===----------------------------------------------------------------------===//

class IndexSax final : public StrictSax {
public:
  IndexSax(const Messages &msg, ShardIndex &out)
      : StrictSax(msg, "index", 0), out_(out) {}

  bool sawWeightMap() const { return sawWeightMap_; }

private:
  Status invalid(const std::string &what, const std::string &expected) const {
    return invalidArgument(msg_(what, expected));
  }

  bool onValue(const Value &v) override {
    const size_t depth = frames_.size();
    if (depth == 0) {
      if (v.kind != Value::Object)
        return fail(invalid("index is " + describe(v), "expected a JSON object"));
      return true;
    }
    const std::string &section = frames_[0].key;
    if (depth == 1) {
      if (section == "weight_map") {
        sawWeightMap_ = true;
        if (v.kind != Value::Object)
          return fail(invalid("weight_map is " + describe(v),
                              "expected an object mapping tensor names to shard files"));
      } else if (section == "metadata" && v.kind != Value::Object) {
        return fail(invalid("metadata is " + describe(v), "expected an object"));
      }
      return true; // other top-level keys carry nothing we use
    }
    if (depth == 2 && section == "weight_map")
      return shardFile(frames_[1].key, v);
    if (depth == 2 && section == "metadata" && frames_[1].key == "total_size")
      return totalSize(v);
    return true;
  }

  bool shardFile(const std::string &tensor, const Value &v) {
    const std::string what = "weight_map: tensor " + quote(tensor);
    if (v.kind != Value::String)
      return fail(invalid(what + " maps to " + describe(v),
                          "expected a shard file name (a string)"));
    const std::string &file = *v.text;
    bool bad = file.empty() || file == "." || file == "..";
    for (char c : file)
      if (c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20)
        bad = true;
    if (bad)
      return fail(invalid(what + " maps to " + quote(file),
                          "expected a plain file name in the index's directory "
                          "(no path separators, not '..')"));
    out_.weightMap.emplace(tensor, file);
    return true;
  }

  bool totalSize(const Value &v) {
    // Some writers emit total_size as a float; accept it when it is integral.
    if (v.kind == Value::UnsignedInt) {
      out_.totalSize = v.unsignedInt;
      return true;
    }
    if (v.kind == Value::Float && v.real >= 0 && v.real <= 9007199254740992.0 &&
        std::floor(v.real) == v.real) {
      out_.totalSize = static_cast<uint64_t>(v.real);
      return true;
    }
    return fail(invalid("metadata.total_size is " + describe(v),
                        "expected a non-negative integer"));
  }

  bool onKey(const std::string &key) override {
    if (frames_.size() == 2 && frames_[0].key == "weight_map" && key.empty())
      return fail(invalid("weight_map has an empty tensor name",
                          "expected non-empty tensor names"));
    return true;
  }

  Status duplicateKey(const std::string &key) override {
    if (frames_.size() == 2 && frames_[0].key == "weight_map")
      return invalid("weight_map: tensor " + quote(key) + " appears twice",
                     "expected each tensor once");
    std::string where = frames_.size() == 1 ? std::string("the top level")
                                            : jsonPath(frames_.size() - 1);
    return invalid("key " + quote(key) + " appears twice in " + where,
                   "expected each key once");
  }

  ShardIndex &out_;
  bool sawWeightMap_ = false;
};

StatusOr<ShardIndex> parseIndexImpl(std::string_view json, std::string_view displayName) {
  const Messages msg(displayName);
  ShardIndex index;
  IndexSax sax(msg, index);
  WEFT_RETURN_IF_ERROR(runSax(msg, "index", json, 0, sax));
  if (!sax.sawWeightMap())
    return invalidArgument(msg("missing \"weight_map\"",
                               "expected an object mapping tensor names to shard files"));
  if (index.weightMap.empty())
    return invalidArgument(msg("weight_map is empty", "expected at least one tensor"));
  return index;
}

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

class File {
public:
  ~File() {
    if (fd_ >= 0)
      ::close(fd_);
  }

  Status open(const std::string &path, const Messages &msg) {
    do
      fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK); // a FIFO must not block
    while (fd_ < 0 && errno == EINTR);
    if (fd_ < 0) {
      int err = errno;
      std::string what = "cannot open (" + std::generic_category().message(err) + ")";
      if (err == ENOENT || err == ENOTDIR)
        return notFound(msg(what, "expected an existing file"));
      if (err == EACCES || err == EPERM)
        return failedPrecondition(msg(what, "expected a readable file"));
      return internalError(msg(what, "expected a readable file"));
    }
    struct stat st;
    if (::fstat(fd_, &st) != 0)
      return internalError(msg("cannot stat (" + std::generic_category().message(errno) + ")",
                               "expected a readable file"));
    if (!S_ISREG(st.st_mode))
      return invalidArgument(msg(S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file",
                                 "expected a regular file"));
    size_ = static_cast<uint64_t>(st.st_size);
    return Status::ok();
  }

  uint64_t size() const { return size_; }

  // Appends bytes [offset, offset + length) of the file to `out`.
  Status read(uint64_t offset, uint64_t length, std::string &out, const Messages &msg) {
    size_t start = out.size();
    out.resize(start + length);
    char *dst = out.data() + start;
    while (length > 0) {
      ssize_t n = ::pread(fd_, dst, length, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return internalError(msg("read failed at byte " + str(offset) + " (" +
                                     std::generic_category().message(errno) + ")",
                                 "expected a readable file"));
      if (n == 0)
        return outOfRange(msg("file ended at byte " + str(offset) +
                                  " although stat reported " + str(size_),
                              "expected the file not to shrink while it is read"));
      dst += n;
      offset += static_cast<uint64_t>(n);
      length -= static_cast<uint64_t>(n);
    }
    return Status::ok();
  }

private:
  int fd_ = -1;
  uint64_t size_ = 0;
};

StatusOr<SafetensorsHeader> readHeaderImpl(const std::string &path) {
  const Messages msg(path);
  File file;
  WEFT_RETURN_IF_ERROR(file.open(path, msg));
  std::string bytes;
  WEFT_RETURN_IF_ERROR(file.read(0, std::min<uint64_t>(file.size(), 8), bytes, msg));
  // Too-short files and bad length prefixes are reported by the parser, so
  // both entry points word them the same way.
  if (bytes.size() == 8) {
    const uint64_t headerSize = decodeLittleEndian64(bytes);
    if (checkHeaderLength(msg, headerSize, file.size()).isOk())
      WEFT_RETURN_IF_ERROR(file.read(8, headerSize, bytes, msg));
  }
  return parseHeaderImpl(bytes, file.size(), path);
}

// An index of a 1000-shard checkpoint is well below a megabyte.
constexpr uint64_t kMaxIndexSize = 100ull << 20;

StatusOr<ShardIndex> readIndexImpl(const std::string &path) {
  const Messages msg(path);
  File file;
  WEFT_RETURN_IF_ERROR(file.open(path, msg));
  if (file.size() > kMaxIndexSize)
    return invalidArgument(msg("index is " + str(file.size()) + " bytes",
                               "expected at most " + str(kMaxIndexSize) + " (100 MiB)"));
  std::string bytes;
  WEFT_RETURN_IF_ERROR(file.read(0, file.size(), bytes, msg));
  return parseIndexImpl(bytes, path);
}

// Library code must not let an exception (in practice only bad_alloc)
// escape into callers that were promised a Status.
template <typename Fn>
auto guarded(std::string_view displayName, Fn &&fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::bad_alloc &) {
    return Status(StatusCode::kResourceExhausted,
                  printable(displayName, 4096) +
                      ": out of memory while parsing: expected enough memory");
  } catch (const std::exception &e) {
    return internalError(printable(displayName, 4096) + ": unexpected exception (" +
                         printable(e.what()) + "): expected none");
  } catch (...) {
    return internalError(printable(displayName, 4096) +
                         ": unexpected exception: expected none");
  }
}

} // namespace

StatusOr<SafetensorsHeader> readSafetensorsHeader(const std::string &path) {
  return guarded(path, [&] { return readHeaderImpl(path); });
}

StatusOr<SafetensorsHeader> parseSafetensorsHeader(std::string_view prefix,
                                                   uint64_t fileSize,
                                                   std::string_view displayName) {
  return guarded(displayName,
                 [&] { return parseHeaderImpl(prefix, fileSize, displayName); });
}

StatusOr<ShardIndex> readShardIndex(const std::string &path) {
  return guarded(path, [&] { return readIndexImpl(path); });
}

StatusOr<ShardIndex> parseShardIndex(std::string_view json, std::string_view displayName) {
  return guarded(displayName, [&] { return parseIndexImpl(json, displayName); });
}

} // namespace weft::io
