// PlanFile: read the bytes, check the identifier, run the FlatBuffers
// verifier, then check every index and size the runtime will trust.
#include "runtime/plan/PlanReader.h"

#include "runtime/base/Text.h"

#include <algorithm>
#include <cctype>
#include <tuple>
#include <cerrno>
#include <exception>
#include <limits>
#include <new>
#include <optional>
#include <cmath>
#include <set>
#include <string_view>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace weft::plan {

bool dtypeBytes(fb::DType dtype, uint64_t elements, uint64_t &bytes) {
  switch (dtype) {
  case fb::DType::F32:
  case fb::DType::I32:
    return !__builtin_mul_overflow(elements, uint64_t(4), &bytes);
  case fb::DType::F16:
  case fb::DType::BF16:
    return !__builtin_mul_overflow(elements, uint64_t(2), &bytes);
  case fb::DType::FP8_E4M3:
  case fb::DType::I8:
    bytes = elements;
    return true;
  case fb::DType::I4:
    bytes = elements / 2 + (elements & 1);
    return true;
  case fb::DType::I64:
    return !__builtin_mul_overflow(elements, uint64_t(8), &bytes);
  }
  return false;
}

namespace {

// FlatBuffers offsets are 32-bit signed; the verifier requires a buffer
// smaller than this.
constexpr uint64_t kMaxPlanFileSize = FLATBUFFERS_MAX_BUFFER_SIZE;

// Far more than any machine holds; bounds the per-device tables we build.
constexpr uint32_t kMaxDevices = 4096;

std::string str(uint64_t v) { return std::to_string(v); }
std::string str(int64_t v) { return std::to_string(v); }
std::string str(int32_t v) { return std::to_string(v); }

// "1 buffer", "12 buffers".
// The most dynamic shared memory a block may ask for on any GPU Weft targets
// (sm_90: 227 KiB; the device's own limit is checked when kernels load).
constexpr int32_t kMaxSharedBytes = 227 * 1024;
// A kernel's entry symbol (Kernel.symbol).
constexpr size_t kMaxSymbolBytes = 64 * 1024;

std::string nOf(int64_t n, const char *noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string_view view(const flatbuffers::String *s) {
  return s ? std::string_view(s->c_str(), s->size()) : std::string_view();
}

std::string quote(const flatbuffers::String *s) {
  return "'" + printableForMessage(view(s), 80) + "'";
}

template <typename T> uint32_t count(const flatbuffers::Vector<T> *v) {
  return v ? v->size() : 0;
}

template <typename T> std::string list(const flatbuffers::Vector<T> *v) {
  constexpr uint32_t kShown = 8;
  std::string out = "[";
  for (uint32_t i = 0; i < count(v) && i < kShown; ++i)
    out += (i ? ", " : "") + std::to_string(v->Get(i));
  if (count(v) > kShown)
    out += ", ... (" + str(uint64_t(count(v))) + " values)";
  return out + "]";
}

bool validDType(fb::DType d) {
  return d >= fb::DType::MIN && d <= fb::DType::MAX;
}

std::string dtypeProblem(fb::DType d) {
  return "unknown dtype " + str(int32_t(d)) + ": expected 0 (F32) to " +
         str(int32_t(fb::DType::MAX)) + " (" + fb::EnumNameDType(fb::DType::MAX) + ")";
}

// Where in the plan a check is looking, e.g. "buckets[2].steps[17].op.args[3]";
// kept as segments so that building it costs nothing until a check fails.
class FieldPath {
public:
  void push(const char *name, int64_t index) { segments_.push_back({name, index}); }
  void pop() { segments_.pop_back(); }
  std::string str() const {
    std::string out;
    for (const Segment &s : segments_) {
      if (s.name) {
        if (!out.empty())
          out += '.';
        out += s.name;
      }
      if (s.index >= 0)
        out += "[" + std::to_string(s.index) + "]";
    }
    return out;
  }

private:
  struct Segment {
    const char *name;
    int64_t index;
  };
  std::vector<Segment> segments_;
};

class Scope {
public:
  Scope(FieldPath &path, const char *name, int64_t index = -1) : path_(path) {
    path_.push(name, index);
  }
  ~Scope() { path_.pop(); }
  Scope(const Scope &) = delete;
  Scope &operator=(const Scope &) = delete;

private:
  FieldPath &path_;
};

struct StageInfo {
  int32_t first = 0;
  int32_t end = 0;
  std::vector<int32_t> devices;
};

// The semantic checks, in dependency order: later tables are checked against
// counts established by earlier ones (devices, layers, weights, kernels).
class Checker {
public:
  Checker(const uint8_t *buffer, std::string display)
      : buffer_(buffer), plan_(*fb::GetPlan(buffer)), display_(std::move(display)) {}

  Status run() {
    WEFT_RETURN_IF_ERROR(checkModel());
    WEFT_RETURN_IF_ERROR(checkTopology());
    WEFT_RETURN_IF_ERROR(checkPartition());
    WEFT_RETURN_IF_ERROR(checkManifest());
    WEFT_RETURN_IF_ERROR(checkKernels());
    WEFT_RETURN_IF_ERROR(checkKvCache());
    return checkBuckets();
  }

private:
  //===--------------------------------------------------------------------===//
  // Messages
  //===--------------------------------------------------------------------===//

  Status bad(const std::string &what) const {
    std::string where = path_.str();
    return invalidArgument(display_ + ": " + (where.empty() ? "" : where + ": ") + what);
  }
  Status badField(const char *field, const std::string &what) {
    Scope s(path_, field);
    return bad(what);
  }
  Status missing(const char *field, const std::string &expected) {
    return badField(field, "missing: expected " + expected);
  }

  template <typename T> Status positive(const char *field, T value) {
    if (value > 0)
      return Status::ok();
    return badField(field, std::to_string(value) + " is not positive: expected at least 1");
  }

  Status dtype(const char *field, fb::DType d) {
    return validDType(d) ? Status::ok() : badField(field, dtypeProblem(d));
  }

  Status deviceIndex(const char *field, int64_t device) {
    if (device >= 0 && device < numDevices_)
      return Status::ok();
    return badField(field, "device " + str(device) + " out of range (topology has " +
                               nOf(numDevices_, "device") + ")");
  }

  // A non-empty list of distinct, valid device indices.
  Status deviceList(const char *field, const flatbuffers::Vector<int32_t> *devices) {
    if (count(devices) == 0)
      return badField(field, "empty: expected at least one device");
    if (count(devices) > uint32_t(numDevices_))
      return badField(field, str(uint64_t(count(devices))) +
                                 " devices: expected at most the topology's " +
                                 str(numDevices_));
    std::vector<bool> seen(numDevices_, false);
    for (uint32_t i = 0; i < devices->size(); ++i) {
      Scope s(path_, field, i);
      int32_t d = devices->Get(i);
      if (d < 0 || d >= numDevices_)
        return bad("device " + str(d) + " out of range (topology has " +
                   nOf(numDevices_, "device") + ")");
      if (seen[d])
        return bad("device " + str(d) + " appears twice: expected distinct devices");
      seen[d] = true;
    }
    return Status::ok();
  }

  // The verifier checks only the 4-byte alignment of a vector's length, but
  // reading [long] elements needs 8; FlatBuffers writers always align them.
  Status aligned(const flatbuffers::Vector<int64_t> *v) const {
    if (!v)
      return Status::ok();
    const uint64_t at = uint64_t(reinterpret_cast<const uint8_t *>(v->data()) - buffer_);
    if (at % alignof(int64_t) == 0)
      return Status::ok();
    return bad("[long] data at byte " + str(at) +
               " is not 8-byte aligned: expected the alignment FlatBuffers writers give "
               "(corrupt plan)");
  }

  // Checks a shape and returns its element count.
  Status shape(const flatbuffers::Vector<int64_t> *dims, fb::DType type, uint64_t &elements) {
    Scope s(path_, "shape");
    WEFT_RETURN_IF_ERROR(aligned(dims));
    if (count(dims) > kMaxPlanRank)
      return bad("rank " + str(uint64_t(count(dims))) + ": expected at most " +
                 str(uint64_t(kMaxPlanRank)));
    elements = 1;
    for (uint32_t i = 0; i < count(dims); ++i) {
      int64_t d = dims->Get(i);
      if (d < 0)
        return bad(list(dims) + " has dim " + str(uint64_t(i)) + " = " + str(d) +
                   ": expected non-negative sizes");
      if (__builtin_mul_overflow(elements, uint64_t(d), &elements) ||
          elements > uint64_t(std::numeric_limits<int64_t>::max()))
        return bad(list(dims) + " has more elements than fit in 63 bits: expected a "
                                "realistic tensor size");
    }
    uint64_t bytes = 0;
    if (validDType(type) && !dtypeBytes(type, elements, bytes))
      return bad(list(dims) + " of " + fb::EnumNameDType(type) +
                 " takes more bytes than fit in 64 bits: expected a realistic tensor size");
    return Status::ok();
  }

  //===--------------------------------------------------------------------===//
  // Model, topology, partition
  //===--------------------------------------------------------------------===//

  Status checkModel() {
    const fb::ModelInfo *m = plan_.model();
    if (!m)
      return missing("model", "a ModelInfo table");
    Scope s(path_, "model");
    WEFT_RETURN_IF_ERROR(dtype("dtype", m->dtype()));
    WEFT_RETURN_IF_ERROR(positive("hidden_size", m->hidden_size()));
    WEFT_RETURN_IF_ERROR(positive("intermediate_size", m->intermediate_size()));
    WEFT_RETURN_IF_ERROR(positive("num_layers", m->num_layers()));
    WEFT_RETURN_IF_ERROR(positive("num_heads", m->num_heads()));
    WEFT_RETURN_IF_ERROR(positive("num_kv_heads", m->num_kv_heads()));
    WEFT_RETURN_IF_ERROR(positive("head_dim", m->head_dim()));
    WEFT_RETURN_IF_ERROR(positive("vocab_size", m->vocab_size()));
    const int32_t vocab = m->vocab_size();
    if (m->bos_token_id() < -1 || m->bos_token_id() >= vocab)
      return badField("bos_token_id", "token " + str(m->bos_token_id()) +
                                          " out of range (vocab_size " + str(vocab) +
                                          "): expected -1 or a token below " + str(vocab));
    const auto *eos = m->eos_token_ids();
    for (uint32_t i = 0; i < count(eos); ++i)
      if (eos->Get(i) < 0 || eos->Get(i) >= vocab) {
        Scope e(path_, "eos_token_ids", i);
        return bad("token " + str(eos->Get(i)) + " out of range (vocab_size " + str(vocab) +
                   "): expected a token below " + str(vocab));
      }
    numLayers_ = m->num_layers();
    return Status::ok();
  }

  Status checkTopology() {
    const fb::Topology *t = plan_.topology();
    if (!t)
      return missing("topology", "a Topology table");
    Scope s(path_, "topology");
    if (count(t->devices()) == 0)
      return badField("devices", "empty: expected at least one device");
    if (count(t->devices()) > kMaxDevices)
      return badField("devices", str(uint64_t(count(t->devices()))) +
                                     " devices: expected at most " + str(uint64_t(kMaxDevices)));
    numDevices_ = int32_t(t->devices()->size());
    for (uint32_t i = 0; i < t->devices()->size(); ++i) {
      Scope d(path_, "devices", i);
      const fb::Device *device = t->devices()->Get(i);
      WEFT_RETURN_IF_ERROR(positive("compute_capability", device->compute_capability()));
    }
    for (uint32_t i = 0; i < count(t->links()); ++i) {
      Scope l(path_, "links", i);
      const fb::Link *link = t->links()->Get(i);
      WEFT_RETURN_IF_ERROR(deviceIndex("a", link->a()));
      WEFT_RETURN_IF_ERROR(deviceIndex("b", link->b()));
      if (link->a() == link->b())
        return bad("links device " + str(link->a()) + " to itself: expected two devices");
    }
    return Status::ok();
  }

  Status checkPartition() {
    const fb::Partition *p = plan_.partition();
    if (!p)
      return missing("partition", "a Partition table");
    Scope s(path_, "partition");
    WEFT_RETURN_IF_ERROR(positive("batch", p->batch()));
    WEFT_RETURN_IF_ERROR(positive("context", p->context()));
    if (count(p->stages()) == 0)
      return badField("stages", "empty: expected stages covering layers [0, " +
                                    str(numLayers_) + ")");
    int32_t next = 0; // first layer not yet in a stage
    for (uint32_t i = 0; i < p->stages()->size(); ++i) {
      Scope st(path_, "stages", i);
      const fb::Stage *stage = p->stages()->Get(i);
      WEFT_RETURN_IF_ERROR(deviceList("devices", stage->devices()));
      const int32_t first = stage->first_layer(), end = stage->end_layer();
      if (first != next) {
        std::string what = "first_layer " + str(first);
        if (i == 0)
          what += ": expected 0 (the first stage starts at layer 0)";
        else if (first > next)
          what += " leaves layers [" + str(next) + ", " + str(first) +
                  ") in no stage: expected " + str(next) + " (stages[" + str(uint64_t(i - 1)) +
                  "].end_layer)";
        else
          what += " overlaps stages[" + str(uint64_t(i - 1)) + "], which ends at layer " +
                  str(next) + ": expected " + str(next);
        return badField("first_layer", what);
      }
      if (end <= first)
        return badField("end_layer", "end_layer " + str(end) +
                                         ": expected more than first_layer " + str(first) +
                                         " (a stage holds at least one layer)");
      if (end > numLayers_)
        return badField("end_layer", "end_layer " + str(end) + " is past the model's " +
                                         str(numLayers_) + " layers: expected at most " +
                                         str(numLayers_));
      if (stage->offloaded_layers() < 0 || stage->offloaded_layers() > end - first)
        return badField("offloaded_layers",
                        str(stage->offloaded_layers()) + ": expected 0 to " +
                            str(end - first) + " (the stage's layer count)");
      StageInfo info;
      info.first = first;
      info.end = end;
      info.devices.assign(stage->devices()->begin(), stage->devices()->end());
      stages_.push_back(std::move(info));
      next = end;
    }
    if (next != numLayers_)
      return badField("stages", "the last stage ends at layer " + str(next) +
                                    ": expected the stages to cover layers [0, " +
                                    str(numLayers_) + ") (model.num_layers)");
    return Status::ok();
  }

  // The stage holding `layer`, or nullptr; stages are contiguous and sorted.
  const StageInfo *stageOf(int32_t layer) const {
    for (const StageInfo &s : stages_)
      if (layer >= s.first && layer < s.end)
        return &s;
    return nullptr;
  }

  bool deviceHoldsLayers(int32_t device) const {
    for (const StageInfo &s : stages_)
      if (std::find(s.devices.begin(), s.devices.end(), device) != s.devices.end())
        return true;
    return false;
  }

  //===--------------------------------------------------------------------===//
  // Manifest
  //===--------------------------------------------------------------------===//

  Status checkManifest() {
    const fb::Manifest *m = plan_.manifest();
    if (!m)
      return missing("manifest", "a Manifest table");
    Scope s(path_, "manifest");
    numFiles_ = count(m->files());
    for (uint32_t i = 0; i < numFiles_; ++i) {
      Scope f(path_, "files", i);
      WEFT_RETURN_IF_ERROR(checkSourceFile(*m->files()->Get(i)));
    }
    for (uint32_t i = 0; i < count(m->weights()); ++i) {
      Scope w(path_, "weights", i);
      WEFT_RETURN_IF_ERROR(checkWeight(*m->weights()->Get(i)));
    }
    return Status::ok();
  }

  Status checkSourceFile(const fb::SourceFile &f) {
    std::string_view name = view(f.file());
    if (name.empty())
      return badField("file", "empty: expected a file name relative to the checkpoint "
                              "directory");
    // The loader opens checkpoint directory + name; a plan must not be able
    // to point it anywhere else.
    bool escapes = name.front() == '/' || name.find('\\') != std::string_view::npos ||
                   name.find('\0') != std::string_view::npos;
    for (size_t begin = 0; begin <= name.size() && !escapes;) {
      size_t end = std::min(name.find('/', begin), name.size());
      if (name.substr(begin, end - begin) == "..")
        escapes = true;
      begin = end + 1;
    }
    if (escapes)
      return badField("file", quote(f.file()) +
                                  " is not a plain relative path: expected a file inside "
                                  "the checkpoint directory (no leading '/', no '..')");
    uint64_t headerEnd = 0;
    if (__builtin_add_overflow(f.header_size(), uint64_t(8), &headerEnd) ||
        headerEnd > f.file_size())
      return badField("header_size", str(f.header_size()) +
                                         " bytes of header plus the 8-byte length prefix "
                                         "exceed file_size " +
                                         str(f.file_size()) + ": expected a header inside the file");
    return Status::ok();
  }

  Status checkWeight(const fb::Weight &w) {
    if (view(w.name()).empty())
      return badField("name", "empty: expected the weight's name");
    WEFT_RETURN_IF_ERROR(dtype("dtype", w.dtype()));
    uint64_t elements = 0;
    WEFT_RETURN_IF_ERROR(shape(w.shape(), w.dtype(), elements));
    const uint32_t rank = count(w.shape());

    const auto *sources = w.sources();
    if (count(sources) == 0)
      return badField("sources", "empty: expected at least one source tensor");
    for (uint32_t j = 0; j < sources->size(); ++j) {
      Scope src(path_, "sources", j);
      WEFT_RETURN_IF_ERROR(checkSourceTensor(*sources->Get(j)));
    }

    switch (w.transform()) {
    case fb::Transform::None: {
      if (sources->size() != 1)
        return badField("sources", str(uint64_t(sources->size())) +
                                       " sources for transform None: expected exactly one");
      const auto *srcShape = sources->Get(0)->shape();
      bool same = count(srcShape) == rank;
      for (uint32_t d = 0; same && d < rank; ++d)
        same = srcShape->Get(d) == w.shape()->Get(d);
      if (!same) {
        Scope src(path_, "sources", 0);
        return badField("shape", list(srcShape) + " differs from the weight's shape " +
                                     list(w.shape()) + ": expected the same shape "
                                                       "(transform None)");
      }
      break;
    }
    case fb::Transform::Concat:
      WEFT_RETURN_IF_ERROR(checkConcat(w));
      break;
    default:
      return badField("transform", "unknown transform " + str(int32_t(w.transform())) +
                                       ": expected 0 (None) or 1 (Concat)");
    }

    // Tensor parallelism: device i of `devices` holds slice i.
    const int32_t axis = w.shard_axis(), parts = w.shard_parts();
    if (parts < 1)
      return badField("shard_parts", str(parts) + " is not positive: expected at least 1");
    if (axis == -1 && parts != 1)
      return badField("shard_parts", str(parts) + " with shard_axis -1: expected 1 "
                                                  "(an unsharded weight)");
    if (axis != -1) {
      if (axis < 0 || uint32_t(axis) >= rank)
        return badField("shard_axis", str(axis) + " out of range for shape " +
                                          list(w.shape()) + ": expected -1 or 0 to " +
                                          str(int32_t(rank) - 1));
      if (w.shape()->Get(axis) % parts != 0)
        return badField("shard_parts", str(parts) + " does not divide shape[" + str(axis) +
                                           "] = " + str(w.shape()->Get(axis)) +
                                           ": expected equal slices");
    }
    if (parts > 1 && w.transform() == fb::Transform::Concat) {
      // Each source is cut along axis 0 and device i concatenates slice i
      // of every source.
      if (axis != 0 || w.concat_axis() != 0)
        return badField("shard_axis", str(axis) + " with concat_axis " +
                                          str(w.concat_axis()) +
                                          ": expected 0 and 0 for a sharded concat");
      for (uint32_t j = 0; j < sources->size(); ++j) {
        const auto *srcShape = sources->Get(j)->shape();
        if (count(srcShape) == 0 || srcShape->Get(0) % parts != 0) {
          Scope src(path_, "sources", j);
          return badField("shape", list(srcShape) + ": expected shape[0] divisible by " +
                                       str(parts) + " shards");
        }
      }
    }
    WEFT_RETURN_IF_ERROR(deviceList("devices", w.devices()));
    if (parts > 1 && int64_t(w.devices()->size()) != parts)
      return badField("devices", str(uint64_t(w.devices()->size())) + " devices for " +
                                     str(parts) + " shards: expected one device per shard");

    uint64_t shardBytes = 0;
    dtypeBytes(w.dtype(), elements / uint64_t(parts), shardBytes);
    weightBytes_.push_back(shardBytes);
    return Status::ok();
  }

  Status checkSourceTensor(const fb::SourceTensor &t) {
    if (view(t.name()).empty())
      return badField("name", "empty: expected the checkpoint tensor's name");
    if (t.file() < -1 || (t.file() >= 0 && uint32_t(t.file()) >= numFiles_))
      return badField("file", "file index " + str(t.file()) + " out of range (manifest has " +
                                  nOf(numFiles_, "file") +
                                  "): expected -1 (builtin model) or an index below " +
                                  str(uint64_t(numFiles_)));
    WEFT_RETURN_IF_ERROR(dtype("dtype", t.dtype()));
    uint64_t elements = 0;
    return shape(t.shape(), t.dtype(), elements);
  }

  // The sources, in order, concatenate along concat_axis to the weight's shape.
  Status checkConcat(const fb::Weight &w) {
    const uint32_t rank = count(w.shape());
    const int32_t axis = w.concat_axis();
    if (axis < 0 || uint32_t(axis) >= rank)
      return badField("concat_axis", str(axis) + " out of range for shape " + list(w.shape()) +
                                         ": expected 0 to " + str(int32_t(rank) - 1));
    int64_t total = 0;
    for (uint32_t j = 0; j < w.sources()->size(); ++j) {
      Scope src(path_, "sources", j);
      const auto *part = w.sources()->Get(j)->shape();
      if (count(part) != rank)
        return badField("shape", list(part) + " has rank " + str(uint64_t(count(part))) +
                                     ": expected rank " + str(uint64_t(rank)) +
                                     " like the weight's shape " + list(w.shape()));
      for (uint32_t d = 0; d < rank; ++d)
        if (int32_t(d) != axis && part->Get(d) != w.shape()->Get(d))
          return badField("shape", list(part) + " differs from the weight's shape " +
                                       list(w.shape()) + " in dim " + str(uint64_t(d)) +
                                       ": expected equal sizes outside concat_axis " +
                                       str(axis));
      // Each part was checked to be non-negative and below 2^63.
      if (__builtin_add_overflow(total, part->Get(axis), &total))
        total = std::numeric_limits<int64_t>::max();
    }
    if (total != w.shape()->Get(axis))
      return badField("sources", "sizes along concat_axis " + str(axis) + " add up to " +
                                     str(total) + ": expected shape[" + str(axis) + "] = " +
                                     str(w.shape()->Get(axis)));
    return Status::ok();
  }

  //===--------------------------------------------------------------------===//
  // Kernels and KV cache
  //===--------------------------------------------------------------------===//

  Status checkKernels() {
    numKernels_ = count(plan_.kernels());
    for (uint32_t k = 0; k < numKernels_; ++k) {
      Scope s(path_, "kernels", k);
      const fb::Kernel *kernel = plan_.kernels()->Get(k);
      if (view(kernel->name()).empty())
        return badField("name", "empty: expected the kernel's name");
      if (kernel->symbol()) {
        std::string_view symbol = view(kernel->symbol());
        // A C++ symbol: what cuModuleGetFunction takes, nothing else. A
        // template instance's grows with its pointer pack (the decode
        // stream kernel's takes every layer's weights: a few bytes each).
        if (symbol.empty() || symbol.size() > kMaxSymbolBytes ||
            std::any_of(symbol.begin(), symbol.end(), [](char c) {
              return !(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' ||
                       c == '.');
            }))
          return badField("symbol", quote(kernel->symbol()) +
                                        ": expected the entry's symbol (letters, digits, _, $ "
                                        "and ., at most " +
                                        std::to_string(kMaxSymbolBytes) + " bytes)");
      }
      if (count(kernel->binaries()) == 0)
        return badField("binaries", "empty: expected at least one cubin or PTX");
      for (uint32_t b = 0; b < kernel->binaries()->size(); ++b) {
        Scope bin(path_, "binaries", b);
        const fb::KernelBinary *binary = kernel->binaries()->Get(b);
        if (view(binary->arch()).empty())
          return badField("arch", "empty: expected the architecture it targets, e.g. 'sm_86'");
        if (count(binary->cubin()) == 0 && view(binary->ptx()).empty())
          return bad("neither cubin nor ptx: expected a non-empty cubin or PTX");
      }
      // The geometry and parameters the code was written for: launches are
      // checked against them (checkLaunch).
      WEFT_RETURN_IF_ERROR(launchDims("grid", kernel->grid()));
      WEFT_RETURN_IF_ERROR(launchDims("block", kernel->block()));
      if (kernel->shared_bytes() < 0 || kernel->shared_bytes() > kMaxSharedBytes)
        return badField("shared_bytes", str(kernel->shared_bytes()) +
                                            ": expected 0 to " + str(kMaxSharedBytes) +
                                            " bytes of dynamic shared memory");
      if (!kernel->params())
        return missing("params", "the kernel's parameter list");
      for (uint32_t i = 0; i < kernel->params()->size(); ++i) {
        Scope ps(path_, "params", i);
        const fb::KernelParam *p = kernel->params()->Get(i);
        if (p->kind() < fb::ArgKind::MIN || p->kind() > fb::ArgKind::MAX)
          return badField("kind", "unknown arg kind " + str(int32_t(p->kind())) +
                                      ": expected Buffer, Weight, KCache, VCache, Input or "
                                      "Scalar");
        WEFT_RETURN_IF_ERROR(dtype("dtype", p->dtype()));
      }
    }
    return Status::ok();
  }

  // The element type of what `arg` points to, where its storage has one:
  // weights (the manifest), inputs (fixed per kind) and the KV cache.
  std::optional<fb::DType> storageDType(const fb::Arg &arg) const {
    switch (arg.kind()) {
    case fb::ArgKind::Weight:
      return plan_.manifest()->weights()->Get(uint32_t(arg.index()))->dtype();
    case fb::ArgKind::KCache:
    case fb::ArgKind::VCache:
      return plan_.kv_cache()->dtype();
    case fb::ArgKind::Input:
      switch (fb::InputKind(arg.index())) {
      case fb::InputKind::Logits:
      case fb::InputKind::Temperature:
      case fb::InputKind::TopP:
      case fb::InputKind::Uniform:
        return fb::DType::F32;
      default:
        return fb::DType::I32;
      }
    default:
      return std::nullopt; // arena buffers are untyped; scalars are values
    }
  }

  // Bytes the runtime allocates for an input: a value per token of the
  // largest bucket, logits a row per token; block tables a row per sequence.
  uint64_t inputBytes(fb::InputKind kind) const {
    const uint64_t tokens = uint64_t(maxBucketTokens_);
    switch (kind) {
    case fb::InputKind::Logits:
      return tokens * uint64_t(plan_.model()->vocab_size()) * 4;
    case fb::InputKind::BlockTables:
      return uint64_t(plan_.kv_cache()->max_sequences()) *
             uint64_t(plan_.kv_cache()->max_blocks_per_sequence()) * 4;
    default:
      return tokens * 4;
    }
  }

  static bool sameKind(fb::ArgKind a, fb::ArgKind b) {
    auto activation = [](fb::ArgKind k) {
      return k == fb::ArgKind::Buffer || k == fb::ArgKind::Input;
    };
    return a == b || (activation(a) && activation(b));
  }

  // `arg` bound to parameter `p` on `device`: the kind the kernel expects,
  // storage of its element type, and at least the bytes it touches.
  Status checkParamArg(const fb::Arg *arg, const fb::KernelParam &p, int32_t device) {
    if (arg->kind() < fb::ArgKind::MIN || arg->kind() > fb::ArgKind::MAX)
      return checkArg(arg, device, 0); // names the unknown kind
    if (!sameKind(arg->kind(), p.kind()))
      return bad(std::string("kind ") + fb::EnumNameArgKind(arg->kind()) +
                 ": the kernel's parameter is a " + fb::EnumNameArgKind(p.kind()) +
                 (p.kind() == fb::ArgKind::Buffer || p.kind() == fb::ArgKind::Input
                      ? " (an activation: Buffer or Input)"
                      : ""));
    if (arg->kind() == fb::ArgKind::Scalar)
      return Status::ok();
    WEFT_RETURN_IF_ERROR(checkArg(arg, device, p.bytes()));
    if (arg->kind() == fb::ArgKind::Input &&
        p.bytes() > inputBytes(fb::InputKind(arg->index())))
      return bad("input " + std::string(fb::EnumNameInputKind(fb::InputKind(arg->index()))) +
                 " holds " + str(inputBytes(fb::InputKind(arg->index()))) +
                 " bytes: the kernel touches " + str(p.bytes()));
    std::optional<fb::DType> stored = storageDType(*arg);
    if (stored && *stored != p.dtype())
      return bad(std::string(fb::EnumNameArgKind(arg->kind())) + " " +
                 (arg->kind() == fb::ArgKind::Input
                      ? std::string(fb::EnumNameInputKind(fb::InputKind(arg->index())))
                      : str(arg->index())) +
                 " holds " + fb::EnumNameDType(*stored) + ": the kernel's parameter is " +
                 fb::EnumNameDType(p.dtype()));
    return Status::ok();
  }

  Status checkKvCache() {
    const fb::KvCacheSpec *kv = plan_.kv_cache();
    if (!kv)
      return missing("kv_cache", "a KvCacheSpec table");
    Scope s(path_, "kv_cache");
    WEFT_RETURN_IF_ERROR(positive("block_tokens", kv->block_tokens()));
    WEFT_RETURN_IF_ERROR(dtype("dtype", kv->dtype()));
    WEFT_RETURN_IF_ERROR(positive("num_kv_heads", kv->num_kv_heads()));
    WEFT_RETURN_IF_ERROR(positive("head_dim", kv->head_dim()));
    WEFT_RETURN_IF_ERROR(positive("max_sequences", kv->max_sequences()));
    WEFT_RETURN_IF_ERROR(positive("max_blocks_per_sequence", kv->max_blocks_per_sequence()));
    const auto *blocks = kv->blocks_per_device();
    {
      Scope b(path_, "blocks_per_device");
      WEFT_RETURN_IF_ERROR(aligned(blocks));
    }
    if (count(blocks) != uint32_t(numDevices_))
      return badField("blocks_per_device", str(uint64_t(count(blocks))) +
                                               " entries: expected one per topology device (" +
                                               str(numDevices_) + ")");
    for (int32_t d = 0; d < numDevices_; ++d) {
      Scope b(path_, "blocks_per_device", d);
      int64_t n = blocks->Get(d);
      if (n < 0)
        return bad(str(n) + " blocks on device " + str(d) + ": expected a non-negative count");
      if (n == 0 && deviceHoldsLayers(d))
        return bad("0 blocks on device " + str(d) +
                   ", which runs a stage: expected at least 1 (its layers need a KV cache)");
    }
    const auto *heads = kv->kv_heads_per_device();
    if (count(heads) != uint32_t(numDevices_))
      return badField("kv_heads_per_device",
                      str(uint64_t(count(heads))) + " entries: expected one per topology "
                                                    "device (" + str(numDevices_) + ")");
    for (int32_t d = 0; d < numDevices_; ++d) {
      Scope b(path_, "kv_heads_per_device", d);
      int32_t h = heads->Get(uint32_t(d));
      if (h < 0 || h > kv->num_kv_heads() || (h && kv->num_kv_heads() % h))
        return bad(str(h) + " KV heads on device " + str(d) + ": expected a divisor of " +
                   str(kv->num_kv_heads()));
      if (h == 0 && deviceHoldsLayers(d))
        return bad("0 KV heads on device " + str(d) +
                   ", which runs a stage: expected its share of the KV heads");
    }
    return Status::ok();
  }

  //===--------------------------------------------------------------------===//
  // Buckets and steps
  //===--------------------------------------------------------------------===//

  Status checkBuckets() {
    if (count(plan_.buckets()) == 0)
      return badField("buckets", "empty: expected at least one bucket");
    for (const fb::Bucket *bucket : *plan_.buckets())
      maxBucketTokens_ = std::max<int64_t>(maxBucketTokens_, bucket->tokens());
    std::set<std::string_view> names;
    for (uint32_t b = 0; b < plan_.buckets()->size(); ++b) {
      Scope s(path_, "buckets", b);
      const fb::Bucket *bucket = plan_.buckets()->Get(b);
      if (view(bucket->name()).empty())
        return badField("name", "empty: expected the bucket's name, e.g. 'decode_b8'");
      if (!names.insert(view(bucket->name())).second)
        return badField("name", quote(bucket->name()) +
                                    " names an earlier bucket too: expected unique names");
      WEFT_RETURN_IF_ERROR(positive("tokens", bucket->tokens()));
      WEFT_RETURN_IF_ERROR(checkBucketBuffers(*bucket));
      if (count(bucket->steps()) == 0)
        return badField("steps", "empty: expected at least one step");
      for (uint32_t i = 0; i < bucket->steps()->size(); ++i) {
        Scope st(path_, "steps", i);
        WEFT_RETURN_IF_ERROR(checkStep(*bucket->steps()->Get(i)));
      }
      WEFT_RETURN_IF_ERROR(checkPredictions(*bucket));
    }
    return Status::ok();
  }

  // The cost model's step times: finite and non-negative, contexts ascending
  // (weft-run interpolates between them).
  Status checkPredictions(const fb::Bucket &bucket) {
    if (!bucket.predictions())
      return Status::ok();
    int64_t last = -1;
    for (uint32_t i = 0; i < bucket.predictions()->size(); ++i) {
      Scope p(path_, "predictions", i);
      const fb::StepPrediction *sp = bucket.predictions()->Get(i);
      if (sp->context() < 0 || sp->context() <= last)
        return badField("context", "expected contexts >= 0 in ascending order, got " +
                                       std::to_string(sp->context()));
      last = sp->context();
      for (auto [name, v] : {std::pair<const char *, double>{"seconds", sp->seconds()},
                             {"raw_other_seconds", sp->raw_other_seconds()},
                             {"raw_attention_seconds", sp->raw_attention_seconds()}})
        if (!std::isfinite(v) || v < 0 || v > 3600)
          return badField(name, "expected seconds from 0 to 3600, got " + std::to_string(v));
    }
    return Status::ok();
  }

  Status checkBucketBuffers(const fb::Bucket &bucket) {
    buffers_.assign(numDevices_, nullptr);
    for (uint32_t i = 0; i < count(bucket.devices()); ++i) {
      Scope s(path_, "devices", i);
      const fb::DeviceBuffers *db = bucket.devices()->Get(i);
      WEFT_RETURN_IF_ERROR(deviceIndex("device", db->device()));
      if (buffers_[db->device()])
        return badField("device", "device " + str(db->device()) +
                                      " has a second entry: expected one per device");
      buffers_[db->device()] = db;
      const uint64_t arena = db->arena_bytes();
      for (uint32_t x = 0; x < count(db->buffers()); ++x) {
        Scope buf(path_, "buffers", x);
        const fb::Buffer *b = db->buffers()->Get(x);
        uint64_t end = 0;
        if (__builtin_add_overflow(b->offset(), b->bytes(), &end))
          return bad("offset " + str(b->offset()) + " + bytes " + str(b->bytes()) +
                     " overflows 64 bits: expected a range inside arena_bytes " + str(arena));
        if (end > arena)
          return bad("bytes [" + str(b->offset()) + ", " + str(end) +
                     ") end past arena_bytes " + str(arena) +
                     ": expected a range inside the device's arena");
      }
    }
    return Status::ok();
  }

  Status checkStep(const fb::Step &step) {
    WEFT_RETURN_IF_ERROR(deviceIndex("device", step.device()));
    const int32_t device = step.device();
    if (step.op_type() == fb::Op::NONE || !step.op())
      return missing("op", "a Launch, Gemm, Copy or AllReduce");
    switch (step.op_type()) {
    case fb::Op::Launch: {
      Scope s(path_, "op");
      return checkLaunch(*step.op_as_Launch(), device);
    }
    case fb::Op::Gemm: {
      Scope s(path_, "op");
      return checkGemm(*step.op_as_Gemm(), device);
    }
    case fb::Op::Copy: {
      Scope s(path_, "op");
      return checkCopy(*step.op_as_Copy(), device);
    }
    case fb::Op::AllReduce: {
      Scope s(path_, "op");
      return checkAllReduce(*step.op_as_AllReduce(), device);
    }
    default:
      return badField("op_type", "unknown op type " + str(int32_t(step.op_type())) +
                                     ": expected Launch, Gemm, Copy or AllReduce");
    }
  }

  Status checkLaunch(const fb::Launch &launch, int32_t device) {
    if (launch.kernel() < 0 || uint32_t(launch.kernel()) >= numKernels_)
      return badField("kernel", "kernel index " + str(launch.kernel()) +
                                    " out of range (plan has " +
                                    nOf(numKernels_, "kernel") + ")");
    WEFT_RETURN_IF_ERROR(launchDims("grid", launch.grid()));
    WEFT_RETURN_IF_ERROR(launchDims("block", launch.block()));
    if (launch.shared_bytes() < 0)
      return badField("shared_bytes", str(launch.shared_bytes()) +
                                          ": expected a non-negative byte count");
    // Exactly the geometry and parameters the kernel was written for.
    const fb::Kernel *kernel = plan_.kernels()->Get(uint32_t(launch.kernel()));
    const std::string name = quote(kernel->name());
    for (auto [field, dims, want] : {std::tuple{"grid", launch.grid(), kernel->grid()},
                                     {"block", launch.block(), kernel->block()}})
      for (uint32_t i = 0; i < 3; ++i)
        if (dims->Get(i) != want->Get(i))
          return badField(field, list(dims) + ": kernel " + name + " is written for " +
                                     list(want));
    if (launch.shared_bytes() != kernel->shared_bytes())
      return badField("shared_bytes", str(launch.shared_bytes()) + ": kernel " + name +
                                          " is written for " + str(kernel->shared_bytes()));
    const uint32_t params = kernel->params()->size();
    if (count(launch.args()) != params)
      return badField("args", nOf(count(launch.args()), "argument") + ": kernel " + name +
                                  " takes " + nOf(params, "parameter"));
    for (uint32_t a = 0; a < params; ++a) {
      Scope s(path_, "args", a);
      WEFT_RETURN_IF_ERROR(checkParamArg(launch.args()->Get(a), *kernel->params()->Get(a),
                                         device));
    }
    return Status::ok();
  }

  // CUDA's limits: grid y and z up to 65535; blocks of at most 1024 threads,
  // z at most 64.
  Status launchDims(const char *field, const flatbuffers::Vector<int32_t> *dims) {
    const bool block = field[0] == 'b';
    if (count(dims) != 3)
      return badField(field, str(uint64_t(count(dims))) + " values: expected 3 (x, y, z)");
    const int64_t x = dims->Get(0), y = dims->Get(1), z = dims->Get(2);
    if (x <= 0 || y <= 0 || z <= 0)
      return badField(field, list(dims) + " has a non-positive size: expected positive x, y, z");
    if (!block && (y > 65535 || z > 65535))
      return badField(field, list(dims) + ": expected y and z at most 65535");
    // The product is only computed once each factor is within its limit.
    if (block && (x > 1024 || y > 1024 || z > 64 || x * y * z > 1024))
      return badField(field, list(dims) + " has too many threads: expected at most 1024 "
                                          "(x and y at most 1024, z at most 64)");
    return Status::ok();
  }

  Status gemmBytes(const char *what, fb::DType type, int64_t a, int64_t b, uint64_t &bytes) {
    uint64_t elements = 0;
    if (__builtin_mul_overflow(uint64_t(a), uint64_t(b), &elements) ||
        !dtypeBytes(type, elements, bytes))
      return bad(std::string(what) + " of " + str(a) + " x " + str(b) + " " +
                 fb::EnumNameDType(type) + " overflows 64 bits: expected realistic sizes");
    return Status::ok();
  }

  Status checkGemm(const fb::Gemm &g, int32_t device) {
    WEFT_RETURN_IF_ERROR(positive("m", g.m()));
    WEFT_RETURN_IF_ERROR(positive("n", g.n()));
    WEFT_RETURN_IF_ERROR(positive("k", g.k()));
    WEFT_RETURN_IF_ERROR(dtype("dtype", g.dtype()));
    WEFT_RETURN_IF_ERROR(dtype("c_dtype", g.c_dtype()));
    // A is [m, k], the residual [m, n], the bias [n], all in dtype; C is
    // [m, n] in c_dtype; B may be quantized, so only its index and device
    // are checked.
    uint64_t aBytes = 0, cBytes = 0, residualBytes = 0, biasBytes = 0;
    WEFT_RETURN_IF_ERROR(gemmBytes("A", g.dtype(), g.m(), g.k(), aBytes));
    WEFT_RETURN_IF_ERROR(gemmBytes("C", g.c_dtype(), g.m(), g.n(), cBytes));
    WEFT_RETURN_IF_ERROR(gemmBytes("residual", g.dtype(), g.m(), g.n(), residualBytes));
    WEFT_RETURN_IF_ERROR(gemmBytes("bias", g.dtype(), 1, g.n(), biasBytes));
    struct Operand {
      const char *name;
      const fb::Arg *arg;
      bool required;
      uint64_t bytes;
    } operands[] = {{"a", g.a(), true, aBytes},
                    {"b", g.b(), true, 0},
                    {"c", g.c(), true, cBytes},
                    {"bias", g.bias(), false, biasBytes},
                    {"residual", g.residual(), false, residualBytes}};
    for (const Operand &op : operands) {
      if (!op.arg && op.required)
        return missing(op.name, "an Arg");
      Scope s(path_, op.name);
      if (op.arg)
        WEFT_RETURN_IF_ERROR(checkArg(op.arg, device, op.bytes));
    }
    // What each operand may be: the runtime hands cuBLASLt a weight as B
    // (or a buffer holding one: a quantized projection expanded to 16 bits
    // by the step before), the bias as a weight, activations as A, C and
    // the residual. An input in B's place, or a weight written as C, is
    // refused.
    auto kinds = [&](const char *name, const fb::Arg *arg, bool weight) -> Status {
      if (!arg)
        return Status::ok();
      bool ok = weight ? arg->kind() == fb::ArgKind::Weight ||
                             (std::string_view(name) == "b" && arg->kind() == fb::ArgKind::Buffer)
                       : arg->kind() == fb::ArgKind::Buffer || arg->kind() == fb::ArgKind::Input;
      if (ok)
        return Status::ok();
      Scope s(path_, name);
      return bad(std::string("kind ") + fb::EnumNameArgKind(arg->kind()) + ": expected " +
                 (weight ? (std::string_view(name) == "b" ? "a Weight or a Buffer" : "a Weight")
                         : "a Buffer or an Input"));
    };
    WEFT_RETURN_IF_ERROR(kinds("a", g.a(), false));
    WEFT_RETURN_IF_ERROR(kinds("b", g.b(), true));
    WEFT_RETURN_IF_ERROR(kinds("c", g.c(), false));
    WEFT_RETURN_IF_ERROR(kinds("bias", g.bias(), true));
    WEFT_RETURN_IF_ERROR(kinds("residual", g.residual(), false));
    // B in a buffer is [n, k] in the GEMM's dtype.
    if (g.b()->kind() == fb::ArgKind::Buffer) {
      uint64_t bBytes = 0;
      WEFT_RETURN_IF_ERROR(gemmBytes("B", g.dtype(), g.n(), g.k(), bBytes));
      Scope s(path_, "b");
      WEFT_RETURN_IF_ERROR(checkArg(g.b(), device, bBytes));
    }
    // An unquantized B is read as [n, k] in the GEMM's dtype: the weight
    // must be stored in it, and hold that many elements past the offset.
    for (auto [name, arg, rows] : {std::tuple{"b", g.b(), g.n()}, {"bias", g.bias(), 1}}) {
      if (!arg || arg->kind() != fb::ArgKind::Weight)
        continue;
      const fb::Weight *w = plan_.manifest()->weights()->Get(uint32_t(arg->index()));
      bool dense = w->dtype() == fb::DType::F16 || w->dtype() == fb::DType::BF16 ||
                   w->dtype() == fb::DType::F32;
      if (!dense)
        continue;
      Scope s(path_, name);
      if (w->dtype() != g.dtype())
        return bad("weight " + str(arg->index()) + " " + quote(w->name()) + " is " +
                   fb::EnumNameDType(w->dtype()) + ": expected the GEMM's " +
                   fb::EnumNameDType(g.dtype()));
      uint64_t need = 0;
      if (!dtypeBytes(g.dtype(), uint64_t(rows) * uint64_t(std::string_view(name) == "b" ? g.k() : g.n()), need))
        return bad("size overflows 64 bits");
      WEFT_RETURN_IF_ERROR(viewFits("weight " + str(arg->index()) + " on device " + str(device),
                                    arg->offset(), weightBytes_[size_t(arg->index())], need));
    }
    return Status::ok();
  }

  Status checkCopy(const fb::Copy &c, int32_t device) {
    WEFT_RETURN_IF_ERROR(deviceIndex("source_device", c.source_device()));
    WEFT_RETURN_IF_ERROR(deviceIndex("target_device", c.target_device()));
    if (c.source_device() != device)
      return badField("source_device", "device " + str(c.source_device()) +
                                           " differs from the step's device " + str(device) +
                                           ": expected the sender to run the copy");
    if (c.bytes() == 0)
      return badField("bytes", "0: expected a positive byte count");
    if (!c.source())
      return missing("source", "an Arg");
    if (!c.target())
      return missing("target", "an Arg");
    {
      Scope s(path_, "source");
      WEFT_RETURN_IF_ERROR(checkArg(c.source(), c.source_device(), c.bytes()));
    }
    Scope s(path_, "target");
    return checkArg(c.target(), c.target_device(), c.bytes());
  }

  Status checkAllReduce(const fb::AllReduce &r, int32_t device) {
    WEFT_RETURN_IF_ERROR(deviceList("devices", r.devices()));
    const auto *devices = r.devices();
    if (devices->size() < 2)
      return badField("devices", list(devices) + ": expected a group of at least 2 devices");
    if (devices->Get(0) != device)
      return badField("devices", list(devices) + " does not start with the step's device " +
                                     str(device) + ": expected rank 0 to run the step");
    WEFT_RETURN_IF_ERROR(dtype("dtype", r.dtype()));
    uint64_t bytes = 0;
    if (r.count() == 0)
      return badField("count", "0: expected a positive element count");
    if (!dtypeBytes(r.dtype(), r.count(), bytes))
      return badField("count", str(r.count()) + " elements of " + fb::EnumNameDType(r.dtype()) +
                                   " overflow 64 bits: expected a realistic count");
    if (count(r.buffers()) != devices->size())
      return badField("buffers", str(uint64_t(count(r.buffers()))) +
                                     " buffers: expected one per device of the group (" +
                                     str(uint64_t(devices->size())) + ")");
    for (uint32_t i = 0; i < devices->size(); ++i) {
      Scope s(path_, "buffers", i);
      WEFT_RETURN_IF_ERROR(checkArg(r.buffers()->Get(i), devices->Get(i), bytes));
    }
    if (!r.scratch())
      return missing("scratch", "an Arg");
    {
      Scope s(path_, "scratch");
      WEFT_RETURN_IF_ERROR(checkArg(r.scratch(), device, bytes));
    }
    if (r.accumulate_kernel() < 0 || uint32_t(r.accumulate_kernel()) >= numKernels_)
      return badField("accumulate_kernel",
                      str(r.accumulate_kernel()) + " out of range: expected a kernel index "
                                                   "below " + str(uint64_t(numKernels_)));
    // The runtime launches it as dst += src over the buffers and scratch.
    const fb::Kernel *acc = plan_.kernels()->Get(uint32_t(r.accumulate_kernel()));
    const auto *params = acc->params();
    if (params->size() != 2)
      return badField("accumulate_kernel",
                      "kernel " + quote(acc->name()) + " takes " +
                          nOf(params->size(), "parameter") + ": expected 2 (dst, src)");
    for (const fb::KernelParam *p : *params)
      if (p->kind() != fb::ArgKind::Buffer || p->dtype() != r.dtype() || p->bytes() > bytes)
        return badField("accumulate_kernel",
                        "kernel " + quote(acc->name()) + " takes a " +
                            fb::EnumNameArgKind(p->kind()) + " of " + str(p->bytes()) + " " +
                            fb::EnumNameDType(p->dtype()) + " bytes: expected Buffers of " +
                            str(bytes) + " " + fb::EnumNameDType(r.dtype()) + " bytes");
    return Status::ok();
  }

  // `arg` as used on `device`; a Buffer or Weight must hold `need` bytes
  // from its offset on.
  Status checkArg(const fb::Arg *arg, int32_t device, uint64_t need) {
    const int32_t index = arg->index();
    switch (arg->kind()) {
    case fb::ArgKind::Buffer: {
      const fb::DeviceBuffers *db = buffers_[device];
      const uint32_t n = db ? count(db->buffers()) : 0;
      if (index < 0 || uint32_t(index) >= n)
        return bad("buffer index " + str(index) + " out of range (device " + str(device) +
                   " has " + nOf(n, "buffer") + ")");
      return viewFits("buffer " + str(index) + " on device " + str(device), arg->offset(),
                      db->buffers()->Get(index)->bytes(), need);
    }
    case fb::ArgKind::Weight: {
      const fb::Manifest *m = plan_.manifest();
      const uint32_t n = count(m->weights());
      if (index < 0 || uint32_t(index) >= n)
        return bad("weight index " + str(index) + " out of range (manifest has " +
                   nOf(n, "weight") + ")");
      const fb::Weight *w = m->weights()->Get(index);
      const auto *holders = w->devices();
      if (std::find(holders->begin(), holders->end(), device) == holders->end())
        return bad("weight " + str(index) + " " + quote(w->name()) + " is not on device " +
                   str(device) + " (it is on devices " + list(holders) +
                   "): expected a weight the device holds");
      return viewFits("weight " + str(index) + " on device " + str(device), arg->offset(),
                      weightBytes_[index], need);
    }
    case fb::ArgKind::KCache:
    case fb::ArgKind::VCache: {
      const char *kind = arg->kind() == fb::ArgKind::KCache ? "KCache" : "VCache";
      if (index < 0 || index >= numLayers_)
        return bad(std::string(kind) + " layer " + str(index) + " out of range (model has " +
                   nOf(numLayers_, "layer") + ")");
      const StageInfo *stage = stageOf(index);
      if (std::find(stage->devices.begin(), stage->devices.end(), device) ==
          stage->devices.end())
        return bad(std::string(kind) + " layer " + str(index) + " is not on device " +
                   str(device) + " (its stage runs on devices " + deviceString(stage->devices) +
                   "): expected a layer of the device's stage");
      return Status::ok();
    }
    case fb::ArgKind::Input:
      if (index < int32_t(fb::InputKind::MIN) || index > int32_t(fb::InputKind::MAX))
        return bad("input kind " + str(index) + " unknown: expected 0 (TokenIds) to " +
                   str(int32_t(fb::InputKind::MAX)) + " (" +
                   fb::EnumNameInputKind(fb::InputKind::MAX) + ")");
      return Status::ok();
    case fb::ArgKind::Scalar:
      return Status::ok();
    }
    return badField("kind", "unknown arg kind " + str(int32_t(arg->kind())) +
                                ": expected Buffer, Weight, KCache, VCache, Input or Scalar");
  }

  static std::string deviceString(const std::vector<int32_t> &devices) {
    std::string out = "[";
    for (size_t i = 0; i < devices.size(); ++i)
      out += (i ? ", " : "") + std::to_string(devices[i]);
    return out + "]";
  }

  Status viewFits(const std::string &what, uint64_t offset, uint64_t size, uint64_t need) {
    if (offset > size)
      return bad("offset " + str(offset) + " is past the end of " + what + " (" + str(size) +
                 " bytes): expected at most " + str(size));
    if (need > size - offset)
      return bad(what + " holds " + str(size - offset) + " bytes from offset " + str(offset) +
                 ": expected at least " + str(need) + " for this operand");
    return Status::ok();
  }

  const uint8_t *buffer_; // 8-byte aligned (a std::vector's storage)
  const fb::Plan &plan_;
  std::string display_;
  FieldPath path_;
  int32_t numDevices_ = 0;
  int32_t numLayers_ = 0;
  uint32_t numFiles_ = 0;
  uint32_t numKernels_ = 0;
  int64_t maxBucketTokens_ = 0; // sizes the runtime's inputs
  std::vector<StageInfo> stages_;
  std::vector<uint64_t> weightBytes_;               // per device (one shard)
  std::vector<const fb::DeviceBuffers *> buffers_;  // of the current bucket
};

//===----------------------------------------------------------------------===//
// Bytes and files
//===----------------------------------------------------------------------===//

std::string sizeProblem(uint64_t size) {
  if (size < kMinPlanFileSize)
    return "plan is " + str(size) + " bytes: expected at least " + str(uint64_t(kMinPlanFileSize)) +
           " (a FlatBuffers root offset and the '" + kPlanFileIdentifier + "' identifier)";
  if (size >= kMaxPlanFileSize)
    return "plan is " + str(size) + " bytes: expected less than 2 GiB (the FlatBuffers limit)";
  return "";
}

StatusOr<std::vector<uint8_t>> readFile(const std::string &path, const std::string &display) {
  int fd;
  do
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK); // a FIFO must not block
  while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    int err = errno;
    std::string what = display + ": cannot open (" + std::generic_category().message(err) + ")";
    if (err == ENOENT || err == ENOTDIR)
      return notFound(what + ": expected an existing plan file");
    return failedPrecondition(what + ": expected a readable plan file");
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return internalError(display + ": cannot stat (" +
                         std::generic_category().message(errno) + "): expected a readable file");
  if (!S_ISREG(st.st_mode))
    return invalidArgument(display + (S_ISDIR(st.st_mode) ? ": is a directory" : ": is not a regular file") +
                           ": expected a plan file");
  const uint64_t size = uint64_t(st.st_size);
  if (std::string problem = sizeProblem(size); !problem.empty())
    return invalidArgument(display + ": " + problem);
  // The identifier first (bytes 4-8): a file that is not a plan is refused
  // before a byte more of it is read or memory is reserved for it.
  if (size >= 8) {
    uint8_t head[8];
    ssize_t n;
    do
      n = ::pread(fd, head, sizeof head, 0);
    while (n < 0 && errno == EINTR);
    if (n == ssize_t(sizeof head) && !fb::PlanBufferHasIdentifier(head)) {
      std::string_view id(reinterpret_cast<const char *>(head) + 4, 4);
      return invalidArgument(display + ": not a Weft plan (identifier '" +
                             printableForMessage(id) + "', expected '" + kPlanFileIdentifier +
                             "')");
    }
  }
  std::vector<uint8_t> bytes(size);
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd, bytes.data() + done, size - done, off_t(done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return internalError(display + ": read failed at byte " + str(done) + " (" +
                           std::generic_category().message(errno) +
                           "): expected a readable file");
    if (n == 0)
      return outOfRange(display + ": file ended at byte " + str(done) + " although stat reported " +
                        str(size) + ": expected the file not to shrink while it is read");
    done += uint64_t(n);
  }
  return bytes;
}

Status checkBytes(const std::vector<uint8_t> &bytes, const std::string &display,
                  const SealPolicy &seal) {
  if (std::string problem = sizeProblem(bytes.size()); !problem.empty())
    return invalidArgument(display + ": " + problem);
  if (!fb::PlanBufferHasIdentifier(bytes.data())) {
    std::string_view id(reinterpret_cast<const char *>(bytes.data()) + 4, 4);
    return invalidArgument(display + ": not a Weft plan (identifier '" +
                           printableForMessage(id) + "', expected '" + kPlanFileIdentifier +
                           "')");
  }
  // The table cap bounds the work a hostile file can cause by sharing one
  // subtree from many places; an honest table takes at least 4 bytes.
  const size_t maxTables = std::max<size_t>(1000000, bytes.size() / 4 + 1);
  flatbuffers::Verifier verifier(bytes.data(), bytes.size(), /*max_depth=*/64, maxTables);
  if (!fb::VerifyPlanBuffer(verifier))
    return invalidArgument(display +
                           ": corrupt or truncated plan (FlatBuffers verification failed)");
  const fb::Plan &plan = *fb::GetPlan(bytes.data());
  if (plan.version() != kPlanFormatVersion)
    return unimplemented(display + ": version " + str(uint64_t(plan.version())) +
                         ": expected " + str(uint64_t(kPlanFormatVersion)) +
                         " (the plan format this runtime reads; recompile the plan)");
  WEFT_RETURN_IF_ERROR(checkSeal(bytes, display, seal));
  return Checker(bytes.data(), display).run();
}

// Library code must not let an exception (in practice bad_alloc) escape into
// callers that were promised a Status.
template <typename Fn>
StatusOr<PlanFile> guarded(const std::string &display, Fn &&fn) {
  try {
    return fn();
  } catch (const std::bad_alloc &) {
    return Status(StatusCode::kResourceExhausted,
                  display + ": out of memory while reading the plan: expected enough memory");
  } catch (const std::exception &e) {
    return internalError(display + ": unexpected exception (" +
                         printableForMessage(e.what()) + "): expected none");
  } catch (...) {
    return internalError(display + ": unexpected exception: expected none");
  }
}

} // namespace

StatusOr<PlanFile> PlanFile::open(const std::string &path, const SealPolicy &seal) {
  const std::string display = printableForMessage(path, 4096);
  return guarded(display, [&]() -> StatusOr<PlanFile> {
    StatusOr<std::vector<uint8_t>> bytes = readFile(path, display);
    if (!bytes)
      return bytes.status();
    WEFT_RETURN_IF_ERROR(checkBytes(*bytes, display, seal));
    PlanFile file(std::move(bytes).value(), path);
    size_t slash = path.rfind('/');
    file.directory_ = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    return file;
  });
}

StatusOr<PlanFile> PlanFile::fromBytes(std::vector<uint8_t> bytes, std::string displayName,
                                       const SealPolicy &seal) {
  const std::string display = printableForMessage(displayName, 4096);
  return guarded(display, [&]() -> StatusOr<PlanFile> {
    WEFT_RETURN_IF_ERROR(checkBytes(bytes, display, seal));
    return PlanFile(std::move(bytes), std::move(displayName));
  });
}

} // namespace weft::plan
