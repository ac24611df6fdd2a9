// Loading plans and weights onto GPUs, and running buckets step by step.
#include "runtime/engine/Engine.h"

#include "runtime/gpu/Cuda.h"
#include "runtime/gpu/Gemm.h"
#include "runtime/gpu/Nccl.h"
#include "runtime/io/MappedFile.h"
#include "runtime/io/Safetensors.h"
#include "runtime/serve/BlockTables.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

namespace weft::engine {

namespace fb = ::weft::plan::fb;
using gpu::cudaStatus;

namespace {

constexpr size_t kGemmWorkspace = 32u << 20;
constexpr size_t kStagingBytes = 64u << 20;
constexpr uint64_t kRandomPool = 32u << 20;   // bytes copied per piece
constexpr uint64_t kRandomSlack = 1u << 20;   // room for rotating offsets

std::string devName(int d) { return "device " + std::to_string(d); }

cudaDataType_t cudaType(fb::DType t) {
  switch (t) {
  case fb::DType::F16: return CUDA_R_16F;
  case fb::DType::BF16: return CUDA_R_16BF;
  case fb::DType::F32: return CUDA_R_32F;
  default: return CUDA_R_16F;
  }
}

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

} // namespace

struct Engine::Impl {
  plan::PlanFile file;
  const fb::Plan *p = nullptr;
  EngineOptions options;
  const gpu::Driver *drv = nullptr;
  int maxTokens = 1;
  int vocab = 0;
  int maxSequences = 0, maxBlocks = 0, blockTokens = 0;
  KvLayout layout;
  // The host's block tables; each device records the version it holds.
  std::optional<serve::BlockTables> tables;
  std::vector<uint64_t> tablesVersion;
  std::vector<int> prefill, decode;

  struct Device {
    int gpu = 0;
    uint64_t capacity = 0, used = 0; // declared memory (cap), allocated
    cudaStream_t stream = nullptr;
    cudaEvent_t done = nullptr;
    cudaEvent_t join = nullptr; // forks and joins graph captures and launches
    std::vector<CUfunction> functions;
    void *arena = nullptr;
    std::vector<void *> weights;
    std::vector<void *> kCache, vCache;
    void *blockTables = nullptr;
    std::map<int, void *> inputs; // InputKind -> buffer
    std::unique_ptr<gpu::GemmRunner> gemm;
    std::vector<void *> allocations;
  };
  std::vector<Device> devices;
  std::map<std::pair<int, int>, CUmodule> modules; // (gpu, kernel)
  std::map<int, cudaGraphExec_t> graphs;           // bucket -> replayable steps
  std::set<int> uncapturable; // buckets run step by step (NCCL, or a failed capture)
  // NCCL communicators of each tensor-parallel group (by its devices);
  // groups without an entry reduce through peer copies.
  const gpu::Nccl *nccl = nullptr;
  std::map<std::vector<int>, std::vector<gpu::NcclComm>> comms;
  std::string collectives = "none";

  explicit Impl(plan::PlanFile f) : file(std::move(f)) { p = &file.plan(); }

  ~Impl() {
    for (auto &[bucket, g] : graphs)
      cudaGraphExecDestroy(g);
    for (auto &[group, list] : comms)
      for (gpu::NcclComm c : list)
        nccl->destroy(c);
    for (Device &d : devices) {
      cudaSetDevice(d.gpu);
      for (void *a : d.allocations)
        cudaFree(a);
      d.gemm.reset();
      if (d.done) cudaEventDestroy(d.done);
      if (d.join) cudaEventDestroy(d.join);
      if (d.stream) cudaStreamDestroy(d.stream);
    }
    if (drv)
      for (auto &[key, m] : modules)
        drv->moduleUnload(m);
  }

  void progress(const std::string &phase, uint64_t done, uint64_t total) {
    if (options.progress)
      options.progress(phase, done, total);
  }

  StatusOr<void *> allocate(Device &d, int index, uint64_t bytes, const std::string &what) {
    bytes = std::max<uint64_t>(bytes, 256);
    if (d.used + bytes > d.capacity)
      return Status(StatusCode::kResourceExhausted,
                    devName(index) + ": " + what + " needs " + std::to_string(bytes) +
                        " bytes but only " + std::to_string(d.capacity - d.used) +
                        " of its declared " + std::to_string(d.capacity) + " remain");
    WEFT_CUDA(cudaSetDevice(d.gpu), "cudaSetDevice");
    void *ptr = nullptr;
    WEFT_RETURN_IF_ERROR(cudaStatus(cudaMalloc(&ptr, bytes),
                                    devName(index) + ": allocating " + what));
    d.used += bytes;
    d.allocations.push_back(ptr);
    return ptr;
  }

  Status setUpDevices() {
    StatusOr<int> count = gpu::deviceCount();
    if (!count.isOk())
      return count.status();
    StatusOr<const gpu::Driver *> d = gpu::driver();
    if (!d.isOk())
      return d.status();
    drv = *d;
    const auto *declared = p->topology()->devices();
    size_t n = declared->size();
    if (!options.deviceMap.empty() && options.deviceMap.size() != n)
      return invalidArgument("--devices lists " + std::to_string(options.deviceMap.size()) +
                             " GPUs for a plan of " + std::to_string(n) + " devices");
    devices.resize(n);
    for (size_t i = 0; i < n; ++i) {
      Device &dev = devices[i];
      dev.gpu = options.deviceMap.empty() ? (int(i) < *count ? int(i) : 0)
                                          : options.deviceMap[i];
      if (dev.gpu < 0 || dev.gpu >= *count)
        return invalidArgument("--devices: GPU " + std::to_string(dev.gpu) +
                               " does not exist (found " + std::to_string(*count) + ")");
      const fb::Device *decl = declared->Get(uint32_t(i));
      cudaDeviceProp prop{};
      WEFT_CUDA(cudaGetDeviceProperties(&prop, dev.gpu), "cudaGetDeviceProperties");
      int cc = prop.major * 10 + prop.minor;
      std::string arch = decl->arch() ? decl->arch()->str() : "";
      int planCc = arch.size() > 3 ? std::atoi(arch.c_str() + 3) : 0;
      if (planCc / 10 > cc / 10 || (planCc / 10 == cc / 10 && planCc > cc))
        return failedPrecondition(devName(int(i)) + " (" + decl->name()->str() +
                                  "): the plan's code is for " + arch + " but GPU " +
                                  std::to_string(dev.gpu) + " (" + prop.name + ") is sm_" +
                                  std::to_string(cc));
      uint64_t declaredBytes = decl->memory_cap_bytes()
                                   ? std::min(decl->memory_bytes(), decl->memory_cap_bytes())
                                   : decl->memory_bytes();
      dev.capacity = std::min<uint64_t>(declaredBytes, prop.totalGlobalMem);
      WEFT_CUDA(cudaSetDevice(dev.gpu), "cudaSetDevice");
      WEFT_CUDA(cudaStreamCreateWithFlags(&dev.stream, cudaStreamNonBlocking), "stream");
      WEFT_CUDA(cudaEventCreateWithFlags(&dev.done, cudaEventDisableTiming), "event");
      WEFT_CUDA(cudaEventCreateWithFlags(&dev.join, cudaEventDisableTiming), "event");
      StatusOr<std::unique_ptr<gpu::GemmRunner>> g =
          gpu::GemmRunner::create(dev.gpu, kGemmWorkspace);
      if (!g.isOk())
        return g.status();
      dev.gemm = std::move(g.value());
      dev.used += kGemmWorkspace;
      dev.functions.assign(p->kernels()->size(), nullptr);
    }
    return Status::ok();
  }

  // A communicator per tensor-parallel group whose devices are distinct
  // GPUs, when NCCL loads and is allowed.
  Status setUpCollectives() {
    std::set<std::vector<int>> groups;
    for (const fb::Bucket *b : *p->buckets())
      for (const fb::Step *s : *b->steps())
        if (const fb::AllReduce *r = s->op_as_AllReduce())
          groups.insert(std::vector<int>(r->devices()->begin(), r->devices()->end()));
    if (groups.empty())
      return Status::ok();
    std::string why;
    if (!options.allowNccl) {
      why = "NCCL disabled";
    } else {
      StatusOr<const gpu::Nccl *> loaded = gpu::Nccl::load();
      if (loaded.isOk())
        nccl = *loaded;
      else
        why = loaded.status().message();
    }
    for (const std::vector<int> &group : groups) {
      std::vector<int> gpus;
      for (int d : group)
        gpus.push_back(devices[size_t(d)].gpu);
      if (std::set<int>(gpus.begin(), gpus.end()).size() != gpus.size()) {
        why = "ranks share a GPU";
        continue;
      }
      if (!nccl)
        continue;
      StatusOr<std::vector<gpu::NcclComm>> c = nccl->initAll(gpus);
      if (!c.isOk())
        return c.status();
      comms[group] = std::move(c.value());
    }
    // Buckets with NCCL all-reduces stay step by step: captured, Llama 3.1
    // 8B TP over two H200s took 5.18 ms per token against 4.96 launched.
    for (uint32_t bi = 0; bi < p->buckets()->size(); ++bi)
      for (const fb::Step *s : *p->buckets()->Get(bi)->steps())
        if (const fb::AllReduce *r = s->op_as_AllReduce())
          if (comms.count(std::vector<int>(r->devices()->begin(), r->devices()->end())))
            uncapturable.insert(int(bi));
    collectives = comms.size() == groups.size()
                      ? "NCCL " + nccl->version()
                      : comms.empty() ? "peer copies (" + why + ")"
                                      : "NCCL " + nccl->version() + " and peer copies (" + why + ")";
    return Status::ok();
  }

  // Which devices launch each kernel, and which layers' caches each holds.
  Status loadKernels() {
    std::set<std::pair<int, uint32_t>> needed;
    for (const fb::Bucket *b : *p->buckets())
      for (const fb::Step *s : *b->steps())
        if (const fb::Launch *l = s->op_as_Launch())
          needed.insert({s->device(), l->kernel()});
        else if (const fb::AllReduce *r = s->op_as_AllReduce())
          needed.insert({s->device(), uint32_t(r->accumulate_kernel())});
    size_t done = 0;
    for (auto [device, k] : needed) {
      progress("loading kernels", done++, needed.size());
      Device &dev = devices[size_t(device)];
      const fb::Kernel *kernel = p->kernels()->Get(k);
      auto it = modules.find({dev.gpu, int(k)});
      if (it == modules.end()) {
        cudaDeviceProp prop{};
        WEFT_CUDA(cudaGetDeviceProperties(&prop, dev.gpu), "cudaGetDeviceProperties");
        std::string want = "sm_" + std::to_string(prop.major * 10 + prop.minor);
        const fb::KernelBinary *cubin = nullptr, *ptx = nullptr;
        for (const fb::KernelBinary *bin : *kernel->binaries()) {
          if (bin->arch()->str() == want && bin->cubin() && bin->cubin()->size())
            cubin = bin;
          if (bin->ptx() && bin->ptx()->size())
            ptx = bin;
        }
        std::string image;
        const void *data = nullptr;
        if (cubin) {
          data = cubin->cubin()->data();
        } else if (ptx && options.allowPtxJit) {
          image = ptx->ptx()->str();
          data = image.c_str();
        } else {
          return failedPrecondition("kernel " + kernel->name()->str() + ": no " + want +
                                    " binary in the plan (and PTX JIT is off)");
        }
        WEFT_CUDA(cudaSetDevice(dev.gpu), "cudaSetDevice");
        WEFT_CUDA(cudaFree(nullptr), "creating the CUDA context");
        CUmodule m;
        WEFT_CU(drv->moduleLoadData(&m, data), "loading kernel " + kernel->name()->str());
        it = modules.emplace(std::make_pair(dev.gpu, int(k)), m).first;
      }
      CUfunction fn;
      WEFT_CU(drv->moduleGetFunction(&fn, it->second, kernel->name()->c_str()),
              "kernel " + kernel->name()->str());
      dev.functions[k] = fn;
    }
    progress("loading kernels", needed.size(), needed.size());
    return Status::ok();
  }

  Status allocateBuffers() {
    const fb::KvCacheSpec *kv = p->kv_cache();
    maxSequences = kv->max_sequences();
    maxBlocks = kv->max_blocks_per_sequence();
    blockTokens = kv->block_tokens();
    vocab = p->model()->vocab_size();
    for (const fb::Bucket *b : *p->buckets())
      maxTokens = std::max(maxTokens, b->tokens());
    // A tensor-parallel rank holds its share of the KV heads.
    auto blockBytesOn = [&](size_t device, uint64_t &bytes) {
      const auto *heads = kv->kv_heads_per_device();
      uint64_t h = heads && device < heads->size() ? uint64_t(heads->Get(uint32_t(device)))
                                                   : uint64_t(kv->num_kv_heads());
      return plan::dtypeBytes(kv->dtype(), uint64_t(blockTokens) * h * uint64_t(kv->head_dim()),
                              bytes);
    };
    std::vector<std::set<int>> layers(devices.size());
    std::vector<uint64_t> arena(devices.size(), 0);
    for (const fb::Bucket *b : *p->buckets()) {
      for (const fb::Step *s : *b->steps())
        if (const fb::Launch *l = s->op_as_Launch())
          for (const fb::Arg *a : *l->args())
            if (a->kind() == fb::ArgKind::KCache || a->kind() == fb::ArgKind::VCache)
              layers[size_t(s->device())].insert(a->index());
      for (const fb::DeviceBuffers *db : *b->devices())
        arena[size_t(db->device())] = std::max(arena[size_t(db->device())], db->arena_bytes());
    }
    // Page ids are shared by every device's cache (one block table), so
    // the pool is the smallest count among the devices that hold layers.
    layout.pages = -1;
    for (size_t i = 0; i < devices.size(); ++i)
      if (!layers[i].empty()) {
        int64_t n = kv->blocks_per_device() && i < kv->blocks_per_device()->size()
                        ? kv->blocks_per_device()->Get(uint32_t(i))
                        : 0;
        if (n < 1 || n > INT32_MAX)
          return invalidArgument("kv_cache.blocks_per_device[" + std::to_string(i) + "]: " +
                                 std::to_string(n) + " pages for a device with layers");
        layout.pages = layout.pages < 0 ? int(n) : std::min(layout.pages, int(n));
      }
    layout.pages = std::max(layout.pages, 0);
    layout.blockTokens = blockTokens;
    layout.maxSequences = maxSequences;
    layout.maxBlocksPerSequence = maxBlocks;
    StatusOr<serve::BlockTables> bt = serve::BlockTables::create(layout);
    if (!bt.isOk())
      return bt.status();
    tables.emplace(std::move(bt.value()));
    tablesVersion.assign(devices.size(), tables->version());
    int layerCount = p->model()->num_layers();
    for (size_t i = 0; i < devices.size(); ++i) {
      Device &dev = devices[i];
      int d = int(i);
      StatusOr<void *> a = allocate(dev, d, arena[i], "its activation arena");
      if (!a.isOk()) return a.status();
      dev.arena = *a;
      // Inputs: token vectors for the largest bucket, outputs, sampling.
      for (fb::InputKind k : {fb::InputKind::TokenIds, fb::InputKind::Positions,
                              fb::InputKind::Slots, fb::InputKind::NextTokens,
                              fb::InputKind::Temperature, fb::InputKind::TopK,
                              fb::InputKind::TopP, fb::InputKind::Uniform}) {
        StatusOr<void *> in = allocate(dev, d, uint64_t(maxTokens) * 4, "inputs");
        if (!in.isOk()) return in.status();
        WEFT_CUDA(cudaMemset(*in, 0, uint64_t(maxTokens) * 4), "zeroing inputs");
        dev.inputs[int(k)] = *in;
      }
      StatusOr<void *> logits =
          allocate(dev, d, uint64_t(maxTokens) * uint64_t(vocab) * 4, "logits");
      if (!logits.isOk()) return logits.status();
      dev.inputs[int(fb::InputKind::Logits)] = *logits;
      // top_p = 1 means no nucleus cut; temperature 0 means greedy.
      std::vector<float> ones(size_t(maxTokens), 1.0f);
      WEFT_CUDA(cudaMemcpy(dev.inputs[int(fb::InputKind::TopP)], ones.data(),
                           ones.size() * 4, cudaMemcpyHostToDevice), "top_p");
      // Block tables: one row per slot, filled by setBlockTable.
      const std::vector<int32_t> &rows = tables->data();
      StatusOr<void *> bt = allocate(dev, d, rows.size() * 4, "block tables");
      if (!bt.isOk()) return bt.status();
      dev.blockTables = *bt;
      WEFT_CUDA(cudaMemcpy(dev.blockTables, rows.data(), rows.size() * 4,
                           cudaMemcpyHostToDevice), "block tables");
      dev.inputs[int(fb::InputKind::BlockTables)] = dev.blockTables;
      dev.kCache.assign(size_t(layerCount), nullptr);
      dev.vCache.assign(size_t(layerCount), nullptr);
      uint64_t blockBytes = 0;
      if (!blockBytesOn(i, blockBytes))
        return invalidArgument("kv_cache: unsupported dtype");
      uint64_t cacheBytes = uint64_t(layout.pages) * blockBytes;
      for (int layer : layers[i]) {
        StatusOr<void *> k = allocate(dev, d, cacheBytes, "the K cache of layer " + std::to_string(layer));
        if (!k.isOk()) return k.status();
        StatusOr<void *> v = allocate(dev, d, cacheBytes, "the V cache of layer " + std::to_string(layer));
        if (!v.isOk()) return v.status();
        dev.kCache[size_t(layer)] = *k;
        dev.vCache[size_t(layer)] = *v;
      }
    }
    return Status::ok();
  }

  Status loadWeights() {
    const fb::Manifest *m = p->manifest();
    size_t count = m->weights()->size();
    for (Device &d : devices)
      d.weights.assign(count, nullptr);
    uint64_t totalBytes = 0;
    for (const fb::Weight *w : *m->weights()) {
      uint64_t b = 0;
      plan::dtypeBytes(w->dtype(), elements(w->shape()), b);
      totalBytes += b / uint64_t(std::max(1, w->shard_parts())) * w->devices()->size();
    }
    // Source files, checked against the headers the plan was compiled for.
    std::vector<io::SafetensorsHeader> headers;
    std::vector<io::MappedFile> maps;
    if (!options.randomWeights) {
      if (options.weightsDir.empty())
        return invalidArgument("no weights: give a checkpoint directory or --random-weights");
      for (const fb::SourceFile *f : *m->files()) {
        std::string path = options.weightsDir + "/" + f->file()->str();
        StatusOr<io::SafetensorsHeader> h = io::readSafetensorsHeader(path);
        if (!h.isOk())
          return h.status();
        StatusOr<io::MappedFile> map = io::MappedFile::open(path);
        if (!map.isOk())
          return map.status();
        std::string_view bytes = map->bytes();
        uint64_t fnv = plan::fnv1a64(bytes.data() + 8, h->headerSize);
        if (!options.skipHeaderChecksums &&
            (fnv != f->header_fnv1a64() || h->headerSize != f->header_size()))
          return failedPrecondition(path + ": safetensors header differs from the one the "
                                    "plan was compiled against (checksum); recompile the "
                                    "plan for these weights");
        headers.push_back(std::move(h.value()));
        maps.push_back(std::move(map.value()));
      }
      if (m->files()->size() == 0)
        return failedPrecondition("the plan was compiled from a built-in model without a "
                                  "checkpoint: use --random-weights");
    }

    void *staging = nullptr;
    WEFT_CUDA(cudaMallocHost(&staging, kStagingBytes), "pinned staging buffer");
    struct FreeHost {
      void *p;
      ~FreeHost() { cudaFreeHost(p); }
    } freeStaging{staging};
    uint64_t copied = 0, state = 0x9e3779b97f4a7c15ull;

    for (uint32_t wi = 0; wi < count; ++wi) {
      const fb::Weight *w = m->weights()->Get(wi);
      // Tensor parallelism: rank r of `devices` holds slice r along
      // shard_axis (of every source, for a concat).
      int parts = std::max(1, w->shard_parts());
      int axis = parts > 1 ? w->shard_axis() : -1;
      uint64_t full = 0;
      plan::dtypeBytes(w->dtype(), elements(w->shape()), full);
      uint64_t bytes = full / uint64_t(parts);
      for (uint32_t rank = 0; rank < w->devices()->size(); ++rank) {
        int32_t device = w->devices()->Get(rank);
        uint64_t r = parts > 1 ? rank : 0;
        Device &dev = devices[size_t(device)];
        StatusOr<void *> dst = allocate(dev, device, bytes, "weight '" + w->name()->str() + "'");
        if (!dst.isOk())
          return dst.status();
        dev.weights[wi] = *dst;
        // Bytes gather in the pinned staging buffer and go up a chunk at a
        // time (a column shard arrives as many short row pieces).
        uint64_t offset = 0, filled = 0;
        auto flush = [&]() -> Status {
          if (!filled)
            return Status::ok();
          WEFT_CUDA(cudaMemcpy(static_cast<char *>(*dst) + offset, staging, filled,
                               cudaMemcpyHostToDevice), "uploading weights");
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
            std::memcpy(static_cast<char *>(staging) + filled, src, chunk);
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
          StatusOr<const char *> pool = randomPool(dev, device, w->dtype());
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
    progress("loading weights", totalBytes, totalBytes);
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

  // Random 16-bit values (|x| < 2^-5 as fp16 or bf16: no inf or NaN), one
  // pool per device and dtype, for --random-weights.
  std::map<std::pair<int, int>, void *> randomPools;
  StatusOr<const char *> randomPool(Device &dev, int device, fb::DType dtype) {
    bool bf16 = dtype == fb::DType::BF16;
    auto key = std::make_pair(device, int(bf16));
    auto it = randomPools.find(key);
    if (it != randomPools.end())
      return static_cast<const char *>(it->second);
    uint64_t bytes = kRandomPool + kRandomSlack;
    StatusOr<void *> pool = allocate(dev, device, bytes, "random weights");
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

  StatusOr<uint64_t> pointer(const fb::Bucket *b, int device, const fb::Arg *a) {
    Device &dev = devices[size_t(device)];
    switch (a->kind()) {
    case fb::ArgKind::Buffer: {
      for (const fb::DeviceBuffers *db : *b->devices())
        if (db->device() == device)
          return uint64_t(reinterpret_cast<uintptr_t>(dev.arena)) +
                 db->buffers()->Get(uint32_t(a->index()))->offset() + a->offset();
      return internalError("buffer on a device without buffers");
    }
    case fb::ArgKind::Weight:
      return uint64_t(reinterpret_cast<uintptr_t>(dev.weights[size_t(a->index())])) + a->offset();
    case fb::ArgKind::KCache:
      return uint64_t(reinterpret_cast<uintptr_t>(dev.kCache[size_t(a->index())]));
    case fb::ArgKind::VCache:
      return uint64_t(reinterpret_cast<uintptr_t>(dev.vCache[size_t(a->index())]));
    case fb::ArgKind::Input:
      return uint64_t(reinterpret_cast<uintptr_t>(dev.inputs[a->index()])) + a->offset();
    case fb::ArgKind::Scalar:
      return uint64_t(a->value());
    }
    return internalError("unknown argument kind");
  }

  Status run(int bi, const StepInputs &in, bool wantLogits, StepOutputs &out) {
    const fb::Bucket *b = p->buckets()->Get(uint32_t(bi));
    size_t T = size_t(b->tokens());
    std::string where = "bucket " + b->name()->str();
    if (in.ids.size() != T || in.positions.size() != T || in.slots.size() != T)
      return invalidArgument(where + ": expects " + std::to_string(T) + " tokens");
    for (size_t n : {in.temperature.size(), in.topP.size(), in.uniform.size(), in.topK.size()})
      if (n != 0 && n != T)
        return invalidArgument(where + ": sampling parameters for " + std::to_string(n) +
                               " tokens, expected " + std::to_string(T));
    // Every index a kernel will follow, checked on the host first.
    WEFT_RETURN_IF_ERROR(tables->check(where, in, vocab));
    std::set<int> used;
    int outputDevice = -1;
    for (const fb::Step *s : *b->steps()) {
      used.insert(s->device());
      if (const fb::Copy *c = s->op_as_Copy())
        used.insert(c->target_device());
      if (const fb::AllReduce *r = s->op_as_AllReduce())
        used.insert(r->devices()->begin(), r->devices()->end());
      if (const fb::Launch *l = s->op_as_Launch())
        for (const fb::Arg *a : *l->args())
          if (a->kind() == fb::ArgKind::Input &&
              a->index() == int32_t(fb::InputKind::NextTokens))
            outputDevice = s->device();
    }
    for (int d : used) {
      Device &dev = devices[size_t(d)];
      WEFT_CUDA(cudaSetDevice(dev.gpu), "cudaSetDevice");
      if (tablesVersion[size_t(d)] != tables->version()) {
        // Pageable source: the copy is staged before the call returns, so
        // the host may change the tables again right away.
        const std::vector<int32_t> &rows = tables->data();
        WEFT_CUDA(cudaMemcpyAsync(dev.blockTables, rows.data(), rows.size() * 4,
                                  cudaMemcpyHostToDevice, dev.stream),
                  where + ": block tables");
        tablesVersion[size_t(d)] = tables->version();
      }
      for (auto [kind, vec] : {std::pair{fb::InputKind::TokenIds, &in.ids},
                               {fb::InputKind::Positions, &in.positions},
                               {fb::InputKind::Slots, &in.slots},
                               {fb::InputKind::TopK, &in.topK}})
        if (!vec->empty())
          WEFT_CUDA(cudaMemcpyAsync(dev.inputs[int(kind)], vec->data(), T * 4,
                                    cudaMemcpyHostToDevice, dev.stream), where + ": inputs");
      for (auto [kind, vec] : {std::pair{fb::InputKind::Temperature, &in.temperature},
                               {fb::InputKind::TopP, &in.topP},
                               {fb::InputKind::Uniform, &in.uniform}})
        if (!vec->empty())
          WEFT_CUDA(cudaMemcpyAsync(dev.inputs[int(kind)], vec->data(), T * 4,
                                    cudaMemcpyHostToDevice, dev.stream), where + ": inputs");
    }
    // A bucket on one device replays a CUDA graph of its steps: the
    // arguments point at fixed buffers, so one recording serves every run.
    // A bucket spanning several devices (pipeline stages, tensor-parallel
    // ranks sharing a GPU) is one graph too: the other devices' streams join
    // the capture from the first one's and rejoin it at the end; copies and
    // the events between streams become graph edges. If a capture fails, the
    // bucket runs step by step from then on. Buckets with NCCL all-reduces
    // start out that way (see setUpCollectives).
    bool graph = options.cudaGraphs && !uncapturable.count(bi);
    if (graph) {
      int rootIndex = *used.begin();
      Device &root = devices[size_t(rootIndex)];
      auto it = graphs.find(bi);
      if (it == graphs.end()) {
        StatusOr<cudaGraphExec_t> exec = capture(b, where, used, rootIndex);
        if (!exec.isOk() && used.size() == 1)
          return exec.status();
        if (exec.isOk())
          it = graphs.emplace(bi, *exec).first;
        else
          uncapturable.insert(bi);
      }
      if (it != graphs.end()) {
        // The inputs were copied on each device's stream: the graph, on the
        // root's stream, waits for them, and every stream waits for it.
        for (int d : used)
          if (d != rootIndex) {
            WEFT_CUDA(cudaSetDevice(devices[size_t(d)].gpu), "cudaSetDevice");
            WEFT_CUDA(cudaEventRecord(devices[size_t(d)].join, devices[size_t(d)].stream), where);
            WEFT_CUDA(cudaSetDevice(root.gpu), "cudaSetDevice");
            WEFT_CUDA(cudaStreamWaitEvent(root.stream, devices[size_t(d)].join, 0), where);
          }
        WEFT_CUDA(cudaSetDevice(root.gpu), "cudaSetDevice");
        WEFT_CUDA(cudaGraphLaunch(it->second, root.stream), where + ": graph launch");
        WEFT_CUDA(cudaEventRecord(root.join, root.stream), where);
        for (int d : used)
          if (d != rootIndex) {
            WEFT_CUDA(cudaSetDevice(devices[size_t(d)].gpu), "cudaSetDevice");
            WEFT_CUDA(cudaStreamWaitEvent(devices[size_t(d)].stream, root.join, 0), where);
          }
        return finish(b, where, T, used, outputDevice, wantLogits, out);
      }
    }
    WEFT_RETURN_IF_ERROR(enqueue(b, where));
    return finish(b, where, T, used, outputDevice, wantLogits, out);
  }

  // Records the steps of `b` as one graph, captured from `root`'s stream
  // with every other used device's stream joined to the capture.
  StatusOr<cudaGraphExec_t> capture(const fb::Bucket *b, const std::string &where,
                                    const std::set<int> &used, int rootIndex) {
    Device &root = devices[size_t(rootIndex)];
    WEFT_CUDA(cudaSetDevice(root.gpu), "cudaSetDevice");
    WEFT_CUDA(cudaStreamBeginCapture(root.stream, cudaStreamCaptureModeThreadLocal),
              where + ": recording a CUDA graph");
    Status st = Status::ok();
    auto step = [&](cudaError_t e, const char *what) {
      if (st.isOk() && e != cudaSuccess)
        st = gpu::cudaStatus(e, where + ": " + what);
    };
    step(cudaEventRecord(root.join, root.stream), "forking the capture");
    for (int d : used)
      if (d != rootIndex) {
        step(cudaSetDevice(devices[size_t(d)].gpu), "cudaSetDevice");
        step(cudaStreamWaitEvent(devices[size_t(d)].stream, root.join, 0), "forking the capture");
      }
    if (st.isOk())
      st = enqueue(b, where);
    for (int d : used)
      if (d != rootIndex && st.isOk()) {
        step(cudaSetDevice(devices[size_t(d)].gpu), "cudaSetDevice");
        step(cudaEventRecord(devices[size_t(d)].join, devices[size_t(d)].stream),
             "joining the capture");
        step(cudaSetDevice(root.gpu), "cudaSetDevice");
        step(cudaStreamWaitEvent(root.stream, devices[size_t(d)].join, 0), "joining the capture");
      }
    cudaSetDevice(root.gpu);
    cudaGraph_t g = nullptr;
    cudaError_t ended = cudaStreamEndCapture(root.stream, &g);
    if (!st.isOk()) {
      if (g) cudaGraphDestroy(g);
      cudaGetLastError();
      return st;
    }
    WEFT_CUDA(ended, where + ": recording a CUDA graph");
    cudaGraphExec_t exec = nullptr;
    cudaError_t made = cudaGraphInstantiate(&exec, g, 0);
    cudaGraphDestroy(g);
    WEFT_CUDA(made, where + ": instantiating its CUDA graph");
    return exec;
  }

  // Puts every step of `b` on the devices' streams.
  Status enqueue(const fb::Bucket *b, const std::string &where) {
    std::vector<uint64_t> values;
    std::vector<void *> params;
    for (uint32_t si = 0; si < b->steps()->size(); ++si) {
      const fb::Step *s = b->steps()->Get(si);
      Device &dev = devices[size_t(s->device())];
      std::string at = where + " step " + std::to_string(si) + " (" + s->region()->str() + ")";
      WEFT_CUDA(cudaSetDevice(dev.gpu), "cudaSetDevice");
      if (const fb::Launch *l = s->op_as_Launch()) {
        values.assign(l->args()->size(), 0);
        params.assign(l->args()->size(), nullptr);
        for (uint32_t i = 0; i < l->args()->size(); ++i) {
          StatusOr<uint64_t> v = pointer(b, s->device(), l->args()->Get(i));
          if (!v.isOk()) return v.status();
          values[i] = *v;
          params[i] = &values[i];
        }
        CUfunction fn = dev.functions[l->kernel()];
        if (l->shared_bytes() > 48 * 1024)
          WEFT_CU(drv->funcSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        l->shared_bytes()), at);
        WEFT_CU(drv->launchKernel(fn, uint32_t(l->grid()->Get(0)), uint32_t(l->grid()->Get(1)),
                                  uint32_t(l->grid()->Get(2)), uint32_t(l->block()->Get(0)),
                                  uint32_t(l->block()->Get(1)), uint32_t(l->block()->Get(2)),
                                  uint32_t(l->shared_bytes()),
                                  reinterpret_cast<CUstream>(dev.stream), params.data(), nullptr),
                at);
      } else if (const fb::Gemm *g = s->op_as_Gemm()) {
        gpu::GemmArgs args;
        args.m = g->m();
        args.n = g->n();
        args.k = g->k();
        auto ptr = [&](const fb::Arg *a) -> StatusOr<void *> {
          if (!a) return static_cast<void *>(nullptr);
          StatusOr<uint64_t> v = pointer(b, s->device(), a);
          if (!v.isOk()) return v.status();
          return reinterpret_cast<void *>(uintptr_t(*v));
        };
        StatusOr<void *> A = ptr(g->a()), B = ptr(g->b()), C = ptr(g->c()),
                         bias = ptr(g->bias()), res = ptr(g->residual());
        for (auto *x : {&A, &B, &C, &bias, &res})
          if (!x->isOk()) return x->status();
        args.a = *A;
        args.b = *B;
        args.c = *C;
        args.bias = *bias;
        args.residual = *res;
        args.abType = cudaType(g->dtype());
        args.cType = cudaType(g->c_dtype());
        Status st = dev.gemm->run(args, dev.stream);
        if (!st.isOk())
          return Status(st.code(), at + ": " + st.message());
      } else if (const fb::Copy *c = s->op_as_Copy()) {
        Device &dst = devices[size_t(c->target_device())];
        StatusOr<uint64_t> from = pointer(b, c->source_device(), c->source());
        StatusOr<uint64_t> to = pointer(b, c->target_device(), c->target());
        if (!from.isOk()) return from.status();
        if (!to.isOk()) return to.status();
        WEFT_CUDA(cudaEventRecord(dev.done, dev.stream), at);
        WEFT_CUDA(cudaSetDevice(dst.gpu), "cudaSetDevice");
        WEFT_CUDA(cudaStreamWaitEvent(dst.stream, dev.done, 0), at);
        WEFT_CUDA(cudaMemcpyPeerAsync(reinterpret_cast<void *>(uintptr_t(*to)), dst.gpu,
                                      reinterpret_cast<void *>(uintptr_t(*from)), dev.gpu,
                                      c->bytes(), dst.stream), at);
      } else if (const fb::AllReduce *r = s->op_as_AllReduce()) {
        WEFT_RETURN_IF_ERROR(allReduce(b, r, at));
      } else {
        return unimplemented(at + ": unknown step kind");
      }
    }
    return Status::ok();
  }

  // Sums rank i's buffers[i] over the group, in place: one NCCL group call,
  // or (ranks sharing a GPU, no NCCL) copies of every partial to rank 0,
  // the plan's accumulate kernel there, and copies of the total back.
  Status allReduce(const fb::Bucket *b, const fb::AllReduce *r, const std::string &at) {
    std::vector<int> group(r->devices()->begin(), r->devices()->end());
    std::vector<void *> buffers;
    for (uint32_t i = 0; i < group.size(); ++i) {
      StatusOr<uint64_t> v = pointer(b, group[i], r->buffers()->Get(i));
      if (!v.isOk()) return v.status();
      buffers.push_back(reinterpret_cast<void *>(uintptr_t(*v)));
    }
    uint64_t bytes = 0;
    plan::dtypeBytes(r->dtype(), r->count(), bytes);
    auto it = comms.find(group);
    if (it != comms.end()) {
      std::vector<cudaStream_t> streams;
      for (int d : group)
        streams.push_back(devices[size_t(d)].stream);
      gpu::NcclType type = r->dtype() == fb::DType::F16    ? gpu::NcclType::F16
                           : r->dtype() == fb::DType::BF16 ? gpu::NcclType::BF16
                                                           : gpu::NcclType::F32;
      Status st = nccl->allReduce(buffers, r->count(), type, it->second, streams);
      if (!st.isOk())
        return Status(st.code(), at + ": " + st.message());
      return Status::ok();
    }
    Device &root = devices[size_t(group[0])];
    StatusOr<uint64_t> scratchPtr = pointer(b, group[0], r->scratch());
    if (!scratchPtr.isOk()) return scratchPtr.status();
    void *scratch = reinterpret_cast<void *>(uintptr_t(*scratchPtr));
    CUfunction accumulate = root.functions[size_t(r->accumulate_kernel())];
    unsigned blocks = unsigned(std::min<uint64_t>((r->count() + 255) / 256, 1024));
    for (size_t i = 1; i < group.size(); ++i) {
      Device &peer = devices[size_t(group[i])];
      WEFT_CUDA(cudaSetDevice(peer.gpu), "cudaSetDevice");
      WEFT_CUDA(cudaEventRecord(peer.done, peer.stream), at);
      WEFT_CUDA(cudaSetDevice(root.gpu), "cudaSetDevice");
      WEFT_CUDA(cudaStreamWaitEvent(root.stream, peer.done, 0), at);
      WEFT_CUDA(cudaMemcpyPeerAsync(scratch, root.gpu, buffers[i], peer.gpu, bytes, root.stream),
                at);
      void *params[] = {&buffers[0], &scratch};
      WEFT_CU(drv->launchKernel(accumulate, blocks, 1, 1, 256, 1, 1, 0,
                                reinterpret_cast<CUstream>(root.stream), params, nullptr),
              at);
    }
    WEFT_CUDA(cudaSetDevice(root.gpu), "cudaSetDevice");
    WEFT_CUDA(cudaEventRecord(root.done, root.stream), at);
    for (size_t i = 1; i < group.size(); ++i) {
      Device &peer = devices[size_t(group[i])];
      WEFT_CUDA(cudaSetDevice(peer.gpu), "cudaSetDevice");
      WEFT_CUDA(cudaStreamWaitEvent(peer.stream, root.done, 0), at);
      WEFT_CUDA(cudaMemcpyPeerAsync(buffers[i], peer.gpu, buffers[0], root.gpu, bytes,
                                    peer.stream),
                at);
    }
    return Status::ok();
  }

  Status finish(const fb::Bucket *b, const std::string &where, size_t T,
                const std::set<int> &used, int outputDevice, bool wantLogits,
                StepOutputs &out) {
    (void)b;
    if (outputDevice < 0)
      return internalError(where + ": no step writes the next tokens");
    Device &od = devices[size_t(outputDevice)];
    WEFT_CUDA(cudaSetDevice(od.gpu), "cudaSetDevice");
    out.next.resize(T);
    WEFT_CUDA(cudaMemcpyAsync(out.next.data(), od.inputs[int(fb::InputKind::NextTokens)], T * 4,
                              cudaMemcpyDeviceToHost, od.stream), where + ": next tokens");
    if (wantLogits) {
      out.logits.resize(T * size_t(vocab));
      WEFT_CUDA(cudaMemcpyAsync(out.logits.data(), od.inputs[int(fb::InputKind::Logits)],
                                out.logits.size() * 4, cudaMemcpyDeviceToHost, od.stream),
                where + ": logits");
    }
    for (int d : used) {
      WEFT_CUDA(cudaSetDevice(devices[size_t(d)].gpu), "cudaSetDevice");
      WEFT_CUDA(cudaStreamSynchronize(devices[size_t(d)].stream), where);
    }
    return Status::ok();
  }
};

Engine::Engine() = default;
Engine::~Engine() = default;

StatusOr<std::unique_ptr<Engine>> Engine::create(plan::PlanFile plan, const EngineOptions &options) {
  std::unique_ptr<Engine> e(new Engine());
  e->impl_ = std::make_unique<Impl>(std::move(plan));
  Impl &impl = *e->impl_;
  impl.options = options;
  WEFT_RETURN_IF_ERROR(impl.setUpDevices());
  WEFT_RETURN_IF_ERROR(impl.setUpCollectives());
  WEFT_RETURN_IF_ERROR(impl.loadKernels());
  WEFT_RETURN_IF_ERROR(impl.allocateBuffers());
  WEFT_RETURN_IF_ERROR(impl.loadWeights());
  for (uint32_t i = 0; i < impl.p->buckets()->size(); ++i)
    (impl.p->buckets()->Get(i)->prefill() ? impl.prefill : impl.decode).push_back(int(i));
  auto byTokens = [&](int a, int b) { return e->bucketTokens(a) < e->bucketTokens(b); };
  std::sort(impl.prefill.begin(), impl.prefill.end(), byTokens);
  std::sort(impl.decode.begin(), impl.decode.end(), byTokens);
  if (options.warmUp) {
    uint32_t count = impl.p->buckets()->size();
    for (uint32_t i = 0; i < count; ++i) {
      impl.progress("warming up buckets", i, count);
      size_t T = size_t(e->bucketTokens(int(i)));
      StepInputs in;
      in.ids.assign(T, 0);
      in.positions.assign(T, 0);
      in.slots.assign(T, kPaddingSlot);
      StepOutputs out;
      WEFT_RETURN_IF_ERROR(impl.run(int(i), in, false, out));
    }
    impl.progress("warming up buckets", count, count);
  }
  return e;
}

const plan::fb::Plan &Engine::plan() const { return *impl_->p; }

int Engine::bucketIndex(const std::string &name) const {
  for (uint32_t i = 0; i < impl_->p->buckets()->size(); ++i)
    if (impl_->p->buckets()->Get(i)->name()->str() == name)
      return int(i);
  return -1;
}

const std::vector<int> &Engine::prefillBuckets() const { return impl_->prefill; }
const std::vector<int> &Engine::decodeBuckets() const { return impl_->decode; }
int Engine::bucketTokens(int b) const { return impl_->p->buckets()->Get(uint32_t(b))->tokens(); }
const KvLayout &Engine::kvLayout() const { return impl_->layout; }
int Engine::vocabSize() const { return impl_->vocab; }

std::vector<int> Engine::stepSizes() const {
  std::set<int> sizes;
  for (const plan::fb::Bucket *b : *impl_->p->buckets())
    sizes.insert(b->tokens());
  return std::vector<int>(sizes.begin(), sizes.end());
}

Status Engine::runStep(const StepInputs &in, bool wantLogits, StepOutputs &out) {
  int tokens = int(in.ids.size());
  for (const std::vector<int> *list : {&impl_->decode, &impl_->prefill})
    for (int b : *list)
      if (bucketTokens(b) == tokens)
        return impl_->run(b, in, wantLogits, out);
  return invalidArgument("no bucket of " + std::to_string(tokens) + " tokens in the plan");
}
Status Engine::setBlockTable(int slot, const std::vector<int32_t> &pages) {
  return impl_->tables->set(slot, pages);
}
const std::string &Engine::collectives() const { return impl_->collectives; }

bool Engine::samples() const {
  for (const plan::fb::Kernel *k : *impl_->p->kernels())
    if (k->region_kind() && k->region_kind()->str().find("sample") != std::string::npos)
      return true;
  return false;
}

Status Engine::run(int bucket, const StepInputs &in, bool wantLogits, StepOutputs &out) {
  if (bucket < 0 || uint32_t(bucket) >= impl_->p->buckets()->size())
    return invalidArgument("no bucket " + std::to_string(bucket));
  return impl_->run(bucket, in, wantLogits, out);
}

} // namespace weft::engine
