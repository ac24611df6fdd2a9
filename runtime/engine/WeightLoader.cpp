// Reading checkpoint weights (or random ones) onto the devices, through
// pinned staging buffers: while one goes up to the GPU, the next is filled
// from the checkpoint by several threads.
#include "runtime/engine/WeightLoader.h"

#include "runtime/io/MappedFile.h"
#include "runtime/io/Safetensors.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sys/stat.h>

namespace weft::engine {

namespace fb = ::weft::plan::fb;

namespace {

constexpr size_t kStagingBytes = 64u << 20;
constexpr int kStagingBuffers = 2;
constexpr size_t kParallelCopyBytes = 8u << 20; // smaller pieces: one thread
constexpr unsigned kCopyThreads = 4;

// memcpy from the (memory-mapped) checkpoint into pinned memory, on several
// threads for large pieces: one thread cannot fault in and copy page-cache
// pages as fast as PCIe takes them.
void copyIn(char *dst, const char *src, size_t n) {
  unsigned threads = std::min(kCopyThreads, std::max(1u, std::thread::hardware_concurrency()));
  if (n < kParallelCopyBytes || threads < 2) {
    std::memcpy(dst, src, n);
    return;
  }
  size_t part = (n + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < threads && i * part < n; ++i)
    pool.emplace_back([=] { std::memcpy(dst + i * part, src + i * part, std::min(part, n - i * part)); });
  std::memcpy(dst, src, std::min(part, n));
  for (std::thread &t : pool)
    t.join();
}

// Pinned buffers that take turns: the filled one is copied to the device
// asynchronously while the next is filled; a buffer is refilled only once
// its copy is done (an event on the device's stream).
class StagingRing {
public:
  StagingRing() = default;
  StagingRing(const StagingRing &) = delete;
  StagingRing &operator=(const StagingRing &) = delete;
  ~StagingRing() {
    for (Slot &s : slots_) {
      if (s.event) {
        cudaEventSynchronize(s.event);
        cudaEventDestroy(s.event);
      }
      if (s.host)
        cudaFreeHost(s.host);
    }
  }

  Status allocate() {
    for (Slot &s : slots_)
      WEFT_CUDA(cudaMallocHost(&s.host, kStagingBytes), "pinned staging buffer");
    return Status::ok();
  }

  // The buffer being filled.
  char *current() { return static_cast<char *>(slots_[next_].host); }

  // Sends the current buffer's first `bytes` to `dst` on `dev`'s stream and
  // moves to the next buffer, waiting until its previous copy is done.
  Status send(Device &dev, void *dst, size_t bytes) {
    Slot &s = slots_[next_];
    if (s.event && s.gpu != dev.gpu) {
      WEFT_CUDA(cudaEventSynchronize(s.event), "uploading weights");
      WEFT_CUDA(cudaEventDestroy(s.event), "uploading weights");
      s.event = nullptr;
    }
    WEFT_CUDA(cudaSetDevice(dev.gpu), "cudaSetDevice");
    if (!s.event) {
      WEFT_CUDA(cudaEventCreateWithFlags(&s.event, cudaEventDisableTiming), "uploading weights");
      s.gpu = dev.gpu;
    }
    WEFT_CUDA(cudaMemcpyAsync(dst, s.host, bytes, cudaMemcpyHostToDevice, dev.stream),
              "uploading weights");
    WEFT_CUDA(cudaEventRecord(s.event, dev.stream), "uploading weights");
    next_ = (next_ + 1) % kStagingBuffers;
    if (slots_[next_].event)
      WEFT_CUDA(cudaEventSynchronize(slots_[next_].event), "uploading weights");
    return Status::ok();
  }

  // Waits for every copy in flight.
  Status drain() {
    for (Slot &s : slots_)
      if (s.event)
        WEFT_CUDA(cudaEventSynchronize(s.event), "uploading weights");
    return Status::ok();
  }

private:
  struct Slot {
    void *host = nullptr;
    cudaEvent_t event = nullptr;
    int gpu = -1;
  };
  Slot slots_[kStagingBuffers];
  int next_ = 0;
};
constexpr uint64_t kRandomPool = 32u << 20;   // bytes copied per piece
constexpr uint64_t kRandomSlack = 1u << 20;   // room for rotating offsets

io::DType ioType(fb::DType t) {
  switch (t) {
  case fb::DType::F16: return io::DType::F16;
  case fb::DType::BF16: return io::DType::BF16;
  case fb::DType::F32: return io::DType::F32;
  case fb::DType::I8: return io::DType::I8;
  case fb::DType::I32: return io::DType::I32;
  case fb::DType::I64: return io::DType::I64;
  default: return io::DType::U8;
  }
}

uint64_t elements(const flatbuffers::Vector<int64_t> *shape) {
  uint64_t n = 1;
  for (int64_t d : *shape)
    n *= uint64_t(d);
  return n;
}

// Random 16-bit values (|x| < 2^-5 as fp16 or bf16: no inf or NaN), one
// pool per device and dtype, for --random-weights.
class RandomPools {
public:
  explicit RandomPools(DeviceSet &devices) : devices(devices) {}

  StatusOr<const char *> get(int device, fb::DType dtype) {
    bool bf16 = dtype == fb::DType::BF16;
    auto key = std::make_pair(device, int(bf16));
    auto it = randomPools.find(key);
    if (it != randomPools.end())
      return static_cast<const char *>(it->second);
    uint64_t bytes = kRandomPool + kRandomSlack;
    StatusOr<void *> pool = devices.allocate(device, bytes, "random weights");
    if (!pool.isOk())
      return pool.status();
    std::vector<uint16_t> host(bytes / 2);
    uint64_t state = 0x9e3779b97f4a7c15ull ^ uint64_t(bf16);
    for (uint16_t &h : host) {
      state ^= state << 13, state ^= state >> 7, state ^= state << 17;
      uint16_t sign = uint16_t(((state >> 20) & 1) << 15);
      // 2^-7 * (1 + mantissa): exponent 120 in bf16, 8 in fp16.
      h = bf16 ? uint16_t(0x3C00 | (state & 0x7f) | sign) : uint16_t(0x2000 | (state & 0x3ff) | sign);
    }
    WEFT_CUDA(cudaMemcpy(*pool, host.data(), bytes, cudaMemcpyHostToDevice), "random weights");
    randomPools[key] = *pool;
    return static_cast<const char *>(*pool);
  }

  // Gives the pools' memory back once every weight is filled; a failed
  // load leaves them to the DeviceSet, which frees every allocation.
  Status release() {
    for (auto &[key, pool] : randomPools) {
      Device &dev = devices[size_t(key.first)];
      WEFT_CUDA(cudaSetDevice(dev.gpu), "cudaSetDevice");
      WEFT_CUDA(cudaFree(pool), "freeing the random-weight pool");
      dev.allocations.erase(std::find(dev.allocations.begin(), dev.allocations.end(), pool));
      dev.used -= kRandomPool + kRandomSlack;
    }
    randomPools.clear();
    return Status::ok();
  }

private:
  DeviceSet &devices;
  std::map<std::pair<int, int>, void *> randomPools;
};

} // namespace

std::string sourcePath(const fb::SourceFile &f, const EngineOptions &options) {
  return (f.beside_plan() ? options.planDir : options.weightsDir) + "/" + f.file()->str();
}

Status checkWeightsSource(const fb::Plan &plan, const EngineOptions &options) {
  if (options.randomWeights)
    return Status::ok();
  if (options.weightsDir.empty())
    return invalidArgument("no weights: give a checkpoint directory (--weights DIR) or "
                           "--random-weights");
  const auto *files = plan.manifest()->files();
  if (!files || files->size() == 0)
    return failedPrecondition("the plan was compiled from a built-in model without a "
                              "checkpoint: use --random-weights");
  struct stat st {};
  if (::stat(options.weightsDir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return notFound(options.weightsDir + ": not a directory (the checkpoint the plan was "
                                         "compiled from)");
  for (const fb::SourceFile *f : *files) {
    std::string path = sourcePath(*f, options);
    if (::stat(path.c_str(), &st) != 0)
      return notFound(path + ": missing (" +
                      (f->beside_plan() ? std::string("the weights the compiler wrote beside the "
                                                      "plan; copy them with it")
                                        : "the plan's weights are in " + f->file()->str()) +
                      ")");
  }
  return Status::ok();
}

Status loadWeights(const fb::Plan &plan, const EngineOptions &options, DeviceSet &devices,
                   const Progress &progress) {
  RandomPools randomPools(devices);
  const fb::Manifest *m = plan.manifest();
  size_t count = m->weights()->size();
  for (Device &d : devices)
    d.weights.assign(count, nullptr);
  uint64_t totalBytes = 0;
  for (const fb::Weight *w : *m->weights()) {
    uint64_t b = 0;
    weft::plan::dtypeBytes(w->dtype(), elements(w->shape()), b);
    totalBytes += b / uint64_t(std::max(1, w->shard_parts())) * w->devices()->size();
  }
  // Source files, checked against the headers the plan was compiled for.
  std::vector<io::SafetensorsHeader> headers;
  std::vector<io::MappedFile> maps;
  WEFT_RETURN_IF_ERROR(checkWeightsSource(plan, options));
  if (!options.randomWeights) {
    for (const fb::SourceFile *f : *m->files()) {
      std::string path = sourcePath(*f, options);
      StatusOr<io::SafetensorsHeader> h = io::readSafetensorsHeader(path);
      if (!h.isOk())
        return h.status();
      StatusOr<io::MappedFile> map = io::MappedFile::open(path);
      if (!map.isOk())
        return map.status();
      std::string_view bytes = map->bytes();
      uint64_t fnv = weft::plan::fnv1a64(bytes.data() + 8, h->headerSize);
      if (!options.skipHeaderChecksums &&
          (fnv != f->header_fnv1a64() || h->headerSize != f->header_size()))
        return failedPrecondition(path + ": safetensors header differs from the one the "
                                  "plan was compiled against (checksum); recompile the "
                                  "plan for these weights");
      headers.push_back(std::move(h.value()));
      maps.push_back(std::move(map.value()));
    }
  }

  StagingRing staging;
  if (!options.randomWeights)
    WEFT_RETURN_IF_ERROR(staging.allocate());
  uint64_t copied = 0, state = 0x9e3779b97f4a7c15ull;

  for (uint32_t wi = 0; wi < count; ++wi) {
    const fb::Weight *w = m->weights()->Get(wi);
    // Tensor parallelism: rank r of `devices` holds slice r along
    // shard_axis (of every source, for a concat).
    int parts = std::max(1, w->shard_parts());
    int axis = parts > 1 ? w->shard_axis() : -1;
    uint64_t full = 0;
    weft::plan::dtypeBytes(w->dtype(), elements(w->shape()), full);
    uint64_t bytes = full / uint64_t(parts);
    for (uint32_t rank = 0; rank < w->devices()->size(); ++rank) {
      int32_t device = w->devices()->Get(rank);
      uint64_t r = parts > 1 ? rank : 0;
      Device &dev = devices[size_t(device)];
      StatusOr<void *> dst = devices.allocate(device, bytes, "weight '" + w->name()->str() + "'");
      if (!dst.isOk())
        return dst.status();
      dev.weights[wi] = *dst;
      // Bytes gather in the pinned staging buffer and go up a chunk at a
      // time (a column shard arrives as many short row pieces).
      uint64_t offset = 0, filled = 0;
      auto flush = [&]() -> Status {
        if (!filled)
          return Status::ok();
        WEFT_RETURN_IF_ERROR(staging.send(dev, static_cast<char *>(*dst) + offset, filled));
        offset += filled;
        copied += filled;
        filled = 0;
        progress("loading weights", copied, totalBytes);
        return Status::ok();
      };
      auto append = [&](const char *src, uint64_t n) -> Status {
        while (n) {
          if (offset + filled + n > bytes)
            return failedPrecondition("weight '" + w->name()->str() +
                                      "': sources hold more than the plan's " +
                                      std::to_string(bytes) + " bytes");
          uint64_t chunk = std::min<uint64_t>(n, kStagingBytes - filled);
          copyIn(staging.current() + filled, src, chunk);
          filled += chunk;
          src += chunk;
          n -= chunk;
          if (filled == kStagingBytes)
            WEFT_RETURN_IF_ERROR(flush());
        }
        return Status::ok();
      };
      if (options.randomWeights) {
        // Pieces of a pool of random values already on the device, from
        // rotating offsets: device-to-device copies, so 16 GB of weights
        // take a fraction of a second instead of a host loop over them.
        StatusOr<const char *> pool = randomPools.get(device, w->dtype());
        if (!pool.isOk())
          return pool.status();
        uint64_t done = 0;
        while (done < bytes) {
          state ^= state << 13, state ^= state >> 7, state ^= state << 17;
          uint64_t offset = (state % (kRandomSlack / 16)) * 16;
          uint64_t chunk = std::min<uint64_t>(bytes - done, kRandomPool);
          WEFT_CUDA(cudaMemcpy(static_cast<char *>(*dst) + done, *pool + offset, chunk,
                               cudaMemcpyDeviceToDevice),
                    "filling weight '" + w->name()->str() + "'");
          done += chunk;
        }
        copied += bytes;
        progress("loading weights", copied, totalBytes);
        continue;
      }
      if (w->transform() == fb::Transform::Concat && w->concat_axis() != 0)
        return unimplemented("weight '" + w->name()->str() + "': concat along axis " +
                             std::to_string(w->concat_axis()));
      for (const fb::SourceTensor *src : *w->sources()) {
        if (src->file() < 0 || size_t(src->file()) >= headers.size())
          return invalidArgument("weight '" + w->name()->str() + "': source '" +
                                 src->name()->str() + "' has no checkpoint file");
        const io::SafetensorsHeader &h = headers[size_t(src->file())];
        const io::TensorInfo *t = h.find(src->name()->str());
        if (!t)
          return notFound(h.path + ": tensor '" + src->name()->str() +
                          "' that the plan needs is missing");
        std::vector<int64_t> shape(src->shape()->begin(), src->shape()->end());
        if (t->shape != shape || t->dtype != ioType(src->dtype()))
          return failedPrecondition(h.path + ": tensor '" + src->name()->str() +
                                    "' does not match the plan's manifest (dtype or shape)");
        const char *data = maps[size_t(src->file())].bytes().data() + h.dataOffset() +
                           t->dataBegin;
        uint64_t n = t->numBytes();
        if (axis < 0) {
          WEFT_RETURN_IF_ERROR(append(data, n));
        } else if (axis == 0) {
          // Rows [r * R/parts, (r+1) * R/parts): one contiguous piece.
          uint64_t rows = uint64_t(shape[0]), piece = n / rows * (rows / uint64_t(parts));
          WEFT_RETURN_IF_ERROR(append(data + r * piece, piece));
        } else if (axis == 1 && shape.size() == 2) {
          // Columns [r * C/parts, (r+1) * C/parts) of every row.
          uint64_t rows = uint64_t(shape[0]), rowBytes = n / rows;
          uint64_t piece = rowBytes / uint64_t(parts);
          for (uint64_t row = 0; row < rows; ++row)
            WEFT_RETURN_IF_ERROR(append(data + row * rowBytes + r * piece, piece));
        } else {
          return unimplemented("weight '" + w->name()->str() + "': shards along axis " +
                               std::to_string(axis));
        }
      }
      WEFT_RETURN_IF_ERROR(flush());
      if (offset != bytes)
        return failedPrecondition("weight '" + w->name()->str() + "': sources hold " +
                                  std::to_string(offset) + " bytes, the plan expects " +
                                  std::to_string(bytes));
    }
  }
  WEFT_RETURN_IF_ERROR(staging.drain());
  progress("loading weights", totalBytes, totalBytes);
  WEFT_RETURN_IF_ERROR(randomPools.release());
  return Status::ok();
}

} // namespace weft::engine
