// Lowering of specialized modules to the FlatBuffers plan.
#include "targets/Plan/PlanBuilder.h"

#include "compiler/Import/QuantizedWeights.h"

#include "runtime/io/ReadFile.h"

#include "compiler/Partition/ShardRegion.h"
#include "dialects/Dist/IR/DistDialect.h"
#include "dialects/Plan/IR/PlanDialect.h"
#include "dialects/Weft/IR/WeftOps.h"
#include "runtime/plan/PlanReader.h"
#include "runtime/plan/plan_generated.h"
#include "runtime/chat/ChatTemplate.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "targets/CUDA/KernelEmitter.h"
#include "targets/CUDA/Nvrtc.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <array>
#include <map>

using namespace mlir;

namespace weft::plan {
namespace {

llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

fb::DType dtypeOf(Type t) {
  if (t.isF16()) return fb::DType::F16;
  if (t.isBF16()) return fb::DType::BF16;
  if (t.isF32()) return fb::DType::F32;
  if (t.isInteger(64)) return fb::DType::I64;
  if (t.isInteger(8)) return fb::DType::I8;
  return fb::DType::I32;
}

fb::DType dtypeOf(cuda::ElementType t) {
  switch (t) {
  case cuda::ElementType::F16: return fb::DType::F16;
  case cuda::ElementType::BF16: return fb::DType::BF16;
  case cuda::ElementType::F32: return fb::DType::F32;
  }
  return fb::DType::F32;
}

fb::DType dtypeOf(io::DType t) {
  switch (t) {
  case io::DType::F16: return fb::DType::F16;
  case io::DType::BF16: return fb::DType::BF16;
  case io::DType::F32: return fb::DType::F32;
  case io::DType::I8: return fb::DType::I8;
  case io::DType::I32: return fb::DType::I32;
  case io::DType::I64: return fb::DType::I64;
  case io::DType::F8_E4M3: return fb::DType::FP8_E4M3;
  default: return fb::DType::F32;
  }
}

uint64_t bytesOf(Type type) {
  auto t = llvm::cast<RankedTensorType>(type);
  uint64_t n = uint64_t(t.getNumElements());
  return n * std::max<uint64_t>(1, t.getElementTypeBitWidth() / 8);
}

constexpr uint64_t kAlignment = 256;
uint64_t alignUp(uint64_t x) { return (x + kAlignment - 1) / kAlignment * kAlignment; }

struct ArgRef {
  fb::ArgKind kind = fb::ArgKind::Scalar;
  int32_t index = 0; // for Buffer: a bucket-wide buffer id until written
  uint64_t offset = 0;
  int64_t value = 0;
};

// What a kernel parameter must be bound to (plan.fbs KernelParam).
struct KernelParamRec {
  fb::ArgKind kind = fb::ArgKind::Scalar;
  fb::DType dtype = fb::DType::I64;
  uint64_t bytes = 0;
};

// Buffer and Input are both activations: a kernel parameter may be bound to
// either.
bool sameParamKind(fb::ArgKind a, fb::ArgKind b) {
  auto activation = [](fb::ArgKind k) {
    return k == fb::ArgKind::Buffer || k == fb::ArgKind::Input;
  };
  return a == b || (activation(a) && activation(b));
}

const char *argKindName(fb::ArgKind k) {
  switch (k) {
  case fb::ArgKind::Buffer: return "buffer";
  case fb::ArgKind::Weight: return "weight";
  case fb::ArgKind::KCache: return "k_cache";
  case fb::ArgKind::VCache: return "v_cache";
  case fb::ArgKind::Input: return "input";
  case fb::ArgKind::Scalar: return "scalar";
  }
  return "scalar";
}

// The plan dialect's argument kinds are plan.fbs's, value for value.
static_assert(int(plan_ir::ArgKind::Buffer) == int(fb::ArgKind::Buffer) &&
              int(plan_ir::ArgKind::Weight) == int(fb::ArgKind::Weight) &&
              int(plan_ir::ArgKind::KCache) == int(fb::ArgKind::KCache) &&
              int(plan_ir::ArgKind::VCache) == int(fb::ArgKind::VCache) &&
              int(plan_ir::ArgKind::Input) == int(fb::ArgKind::Input) &&
              int(plan_ir::ArgKind::Scalar) == int(fb::ArgKind::Scalar));
plan_ir::ArgKind irArgKind(fb::ArgKind k) { return plan_ir::ArgKind(int(k)); }
fb::ArgKind fbArgKind(plan_ir::ArgKind k) { return fb::ArgKind(int(k)); }

const char *dtypeName(fb::DType t) {
  switch (t) {
  case fb::DType::F16: return "f16";
  case fb::DType::BF16: return "bf16";
  case fb::DType::F32: return "f32";
  default: return "f32";
  }
}

fb::DType dtypeOfName(llvm::StringRef name) {
  return name == "f16" ? fb::DType::F16 : name == "bf16" ? fb::DType::BF16 : fb::DType::F32;
}

struct BufferRec {
  int device = 0;
  uint64_t bytes = 0;
  int first = 0, last = 0; // live steps, inclusive
  uint64_t offset = 0;
  int local = 0;           // index within the device's buffer list
};

struct StepRec {
  enum Kind { Launch, Gemm, Copy, AllReduce } kind = Launch;
  int device = 0;
  std::string region;
  int kernel = 0;
  std::array<int, 3> grid{}, block{};
  int shared = 0;
  std::vector<ArgRef> args;
  int64_t m = 0, n = 0, k = 0;
  ArgRef a, b, c;
  std::optional<ArgRef> bias, residual;
  fb::DType dtype = fb::DType::F16;
  fb::DType cDtype = fb::DType::F16;
  int source = 0, target = 0;
  ArgRef from, to;
  uint64_t bytes = 0;
  std::vector<int> devices;
  uint64_t count = 0;
  std::vector<ArgRef> buffers; // AllReduce: one per device of the group
  ArgRef scratch;              // AllReduce: staging on devices[0]
  int accumulateKernel = -1;
};

struct BucketRec {
  std::string name;
  bool prefill = false;
  int64_t tokens = 0;
  std::vector<BufferRec> buffers;
  std::vector<StepRec> steps;
};

struct WeightRec {
  std::string name;
  fb::DType dtype = fb::DType::F16;
  std::vector<int64_t> shape;
  bool concat = false;
  int concatAxis = 0;
  std::vector<std::pair<std::string, std::vector<int64_t>>> sources; // name, shape
  int shardAxis = -1, shardParts = 1;
  std::set<int> devices;
  // Part of a quantized weight (#weft.quant): its codes or its (scale,
  // zero) pairs, read from the file the compiler writes beside the plan.
  bool kernelWeights = false;

  uint64_t bytes() const {
    uint64_t n = 1;
    for (int64_t d : shape)
      n *= uint64_t(d);
    switch (dtype) {
    case fb::DType::F32:
    case fb::DType::I32: return n * 4;
    case fb::DType::I64: return n * 8;
    case fb::DType::I8:
    case fb::DType::FP8_E4M3: return n;
    case fb::DType::I4: return n / 2;
    default: return n * 2;
    }
  }
};

class Lowering {
public:
  Lowering(const ModelSource &source, const hardware::Topology &topology,
           const partition::PartitionOptions &popts, const PlanBuildOptions &options)
      : source(source), topology(topology), popts(popts), options(options) {
    maxBlocksPerSequence =
        (popts.context + options.blockTokens - 1) / options.blockTokens;
    maxSequences = popts.batch;
  }

  llvm::Error lowerFunction(func::FuncOp fn) {
    BucketRec bucket;
    bucket.name = fn.getSymName().str();
    bucket.prefill = llvm::StringRef(bucket.name).starts_with("prefill");
    if (auto t = fn->getAttrOfType<IntegerAttr>("weft.tokens"))
      bucket.tokens = t.getInt();
    current = &bucket;
    locations.clear();
    shardTypes.clear();
    outputs.clear();

    // What the function returns goes to the runtime's output buffers.
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    for (auto [i, v] : llvm::enumerate(ret.getOperands()))
      outputs[v] = i == 0 ? fb::InputKind::Logits : fb::InputKind::NextTokens;

    for (Operation &op : fn.getBody().front()) {
      if (auto region = dyn_cast<FusionOp>(op)) {
        if (llvm::Error e = lowerRegion(region))
          return e;
      } else if (auto transfer = dyn_cast<dist::TransferOp>(op)) {
        if (llvm::Error e = lowerTransfer(transfer))
          return e;
      } else if (auto reduce = dyn_cast<dist::AllReduceOp>(op)) {
        if (llvm::Error e = lowerAllReduce(reduce))
          return e;
      } else if (isa<WeightOp, WeightConcatOp, func::ReturnOp>(op)) {
        continue;
      } else {
        return makeError("@" + bucket.name + ": cannot lower '" +
                         op.getName().getStringRef() + "' to a plan step");
      }
    }
    assignOffsets(bucket);
    buckets.push_back(std::move(bucket));
    return llvm::Error::success();
  }

  llvm::Error lowerRegion(FusionOp region) {
    std::string what = llvm::formatv("@{0}: region {1} ({2})", current->name,
                                     regionCounter++, region.getKind());
    SmallVector<int> devices = {0};
    if (auto placement = region->getAttrOfType<dist::PlacementAttr>("dist.placement"))
      devices.assign(placement.getDevices().asArrayRef().begin(),
                     placement.getDevices().asArrayRef().end());
    for (int device : devices)
      if (device < 0 || device >= int(topology.devices.size()))
        return makeError(what + ": placed on device " + llvm::Twine(device) +
                         " of a topology with " + llvm::Twine(topology.devices.size()));
    gatherInputs(region, devices);
    if (devices.size() == 1)
      return lowerOn(region, region, devices[0], what);
    // Tensor parallel: every device runs the region at its shard's sizes.
    int64_t parts = int64_t(devices.size());
    for (int64_t rank = 0; rank < parts; ++rank) {
      llvm::Expected<partition::ShardedRegion> shard =
          partition::shardRegion(region, rank, parts, shardTypes);
      if (!shard)
        return makeError(what + ": " + llvm::toString(shard.takeError()));
      // Results stay sharded until an all-reduce or a later region of the
      // group consumes them.
      for (auto [full, part] : llvm::zip(region.getResults(), shard->region.getResults()))
        if (full.getType() != part.getType())
          shardTypes[full] = part.getType();
      if (llvm::Error e = lowerOn(region, shard->region, devices[size_t(rank)],
                                  what + " rank " + llvm::Twine(rank).str()))
        return e;
    }
    return llvm::Error::success();
  }

  // An activation a region of a tensor-parallel group reads is copied to
  // every device of the group that lacks it (the embedding runs on one
  // device; a transfer from the previous stage reaches one device).
  void gatherInputs(FusionOp region, ArrayRef<int> devices) {
    if (devices.size() < 2)
      return;
    for (Value v : region.getInputs()) {
      if (llvm::isa<BlockArgument>(v) || isa_and_nonnull<WeightOp, WeightConcatOp>(v.getDefiningOp()))
        continue;
      std::optional<int> holder;
      for (int d : devices)
        if (locations.count({v, d})) {
          holder = d;
          break;
        }
      if (!holder)
        continue; // bindValue reports it
      for (int d : devices) {
        if (locations.count({v, d}))
          continue;
        int step = int(current->steps.size());
        int from = locations[{v, *holder}];
        StepRec s;
        s.kind = StepRec::Copy;
        s.source = *holder;
        s.target = d;
        s.device = *holder;
        s.region = "broadcast";
        s.bytes = bytesOf(typeOn(v));
        touch(from, step);
        s.from.kind = fb::ArgKind::Buffer;
        s.from.index = from;
        int dst = newBuffer(d, s.bytes, step);
        locations[{v, d}] = dst;
        s.to.kind = fb::ArgKind::Buffer;
        s.to.index = dst;
        current->steps.push_back(std::move(s));
      }
    }
  }

  // Emits `emitted` (the region itself, or one device's shard of it) on
  // `device`; its parameters bind to the inputs and results of `region`.
  llvm::Error lowerOn(FusionOp region, FusionOp emitted, int device, const std::string &what) {
    cuda::EmitOptions eo = emitOptions(device);
    llvm::Expected<std::vector<cuda::EmittedStep>> steps = cuda::emitRegion(emitted, eo);
    if (!steps)
      return makeError(what + ": " + llvm::toString(steps.takeError()));
    std::map<int64_t, int> scratch; // region scratch id -> buffer
    for (cuda::EmittedStep &es : *steps) {
      StepRec step;
      step.device = device;
      step.region = emitted.getKind().str();
      int index = int(current->steps.size());
      auto resolve = [&](const cuda::ParamBinding &p) -> llvm::Expected<ArgRef> {
        return bind(region, p, device, index, scratch, what);
      };
      if (es.kernel) {
        // Identical sources share one kernel, but each launch binds its own
        // parameters (the layer of a cache, say), so keep this one's.
        step.kind = StepRec::Launch;
        std::vector<cuda::ParamBinding> params = es.kernel->params;
        step.grid = es.kernel->grid;
        step.block = es.kernel->block;
        step.shared = es.kernel->sharedBytes;
        step.kernel = kernelIndex(std::move(*es.kernel), device);
        std::vector<KernelParamRec> meta;
        for (const cuda::ParamBinding &p : params) {
          llvm::Expected<ArgRef> a = resolve(p);
          if (!a)
            return a.takeError();
          step.args.push_back(*a);
          meta.push_back(paramRecord(region, p, *a));
        }
        if (llvm::Error e = recordParams(step.kernel, std::move(meta), what))
          return e;
      } else if (es.gemm) {
        step.kind = StepRec::Gemm;
        const cuda::GemmStep &g = *es.gemm;
        step.m = g.m;
        step.n = g.n;
        step.k = g.k;
        step.dtype = dtypeOf(g.aType);
        step.cDtype = dtypeOf(g.cType); // f32 for logits
        for (auto [slot, binding] :
             {std::pair(&step.a, &g.a), std::pair(&step.b, &g.b), std::pair(&step.c, &g.c)}) {
          llvm::Expected<ArgRef> a = resolve(*binding);
          if (!a)
            return a.takeError();
          *slot = *a;
        }
        if (g.bias) {
          llvm::Expected<ArgRef> a = resolve(*g.bias);
          if (!a)
            return a.takeError();
          step.bias = *a;
        }
        if (g.residual) {
          llvm::Expected<ArgRef> a = resolve(*g.residual);
          if (!a)
            return a.takeError();
          step.residual = *a;
        }
      } else {
        return makeError(what + ": the emitter returned an empty step");
      }
      current->steps.push_back(std::move(step));
    }
    return llvm::Error::success();
  }

  // What the kernel touches through `p`, now bound to `a`: the bound
  // value's element type and size (its shard on this device).
  KernelParamRec paramRecord(FusionOp region, const cuda::ParamBinding &p, const ArgRef &a) {
    KernelParamRec r;
    r.kind = a.kind;
    auto ofValue = [&](Value v) {
      Type t = typeOn(v);
      r.dtype = dtypeOf(llvm::cast<RankedTensorType>(t).getElementType());
      r.bytes = bytesOf(t);
    };
    switch (p.kind) {
    case cuda::ParamBinding::Kind::RegionInput:
      ofValue(region.getInputs()[size_t(p.index)]);
      if (a.kind == fb::ArgKind::Weight) { // one device's shard of it, as stored
        const WeightRec &w = weights[size_t(a.index)];
        r.dtype = w.dtype;
        r.bytes = w.bytes() / uint64_t(std::max(1, w.shardParts));
      }
      break;
    case cuda::ParamBinding::Kind::RegionResult:
      ofValue(region.getResult(unsigned(p.index)));
      break;
    case cuda::ParamBinding::Kind::KCache:
    case cuda::ParamBinding::Kind::VCache:
      r.dtype = dtypeOf(source.config.dtype); // reached through the block tables
      break;
    case cuda::ParamBinding::Kind::BlockTables:
      r.dtype = fb::DType::I32; // rows indexed by slot, sized by the runtime
      break;
    case cuda::ParamBinding::Kind::Scratch:
      r.dtype = fb::DType::I8; // raw bytes
      r.bytes = p.bytes;
      break;
    case cuda::ParamBinding::Kind::Scalar:
      r.dtype = fb::DType::I64;
      break;
    }
    return r;
  }

  // The first launch of a kernel records its parameters; every later one
  // (another layer, another bucket) must bind the same kinds, types and sizes.
  llvm::Error recordParams(int kernel, std::vector<KernelParamRec> params,
                           const std::string &what) {
    if (size_t(kernel) >= kernelParams.size())
      kernelParams.resize(size_t(kernel) + 1);
    std::optional<std::vector<KernelParamRec>> &known = kernelParams[size_t(kernel)];
    if (!known) {
      known = std::move(params);
      return llvm::Error::success();
    }
    for (size_t i = 0; i < params.size() && i < known->size(); ++i) {
      const KernelParamRec &a = (*known)[i], &b = params[i];
      if (!sameParamKind(a.kind, b.kind) || a.dtype != b.dtype || a.bytes != b.bytes)
        return makeError(llvm::formatv(
            "internal error: {0}: kernel {1} parameter {2} bound as {3} {4} of {5} bytes, "
            "earlier as {6} {7} of {8} bytes",
            what, kernels[size_t(kernel)].name, i, argKindName(b.kind),
            fb::EnumNameDType(b.dtype), b.bytes, argKindName(a.kind),
            fb::EnumNameDType(a.dtype), a.bytes));
    }
    if (params.size() != known->size())
      return makeError(what + ": internal error: kernel " + kernels[size_t(kernel)].name +
                       " launched with a different parameter count");
    return llvm::Error::success();
  }

  llvm::Expected<ArgRef> bind(FusionOp region, const cuda::ParamBinding &p, int device,
                              int step, std::map<int64_t, int> &scratch,
                              const std::string &what) {
    ArgRef a;
    switch (p.kind) {
    case cuda::ParamBinding::Kind::RegionInput: {
      if (p.index < 0 || p.index >= int64_t(region.getInputs().size()))
        return makeError(what + ": parameter '" + p.name + "' binds input " +
                         llvm::Twine(p.index) + " of " +
                         llvm::Twine(region.getInputs().size()));
      return bindValue(region.getInputs()[size_t(p.index)], device, step, what, p.part);
    }
    case cuda::ParamBinding::Kind::RegionResult: {
      if (p.index < 0 || p.index >= int64_t(region.getNumResults()))
        return makeError(what + ": parameter '" + p.name + "' binds result " +
                         llvm::Twine(p.index));
      Value v = region.getResult(unsigned(p.index));
      auto out = outputs.find(v);
      if (out != outputs.end()) {
        a.kind = fb::ArgKind::Input;
        a.index = int32_t(out->second);
        return a;
      }
      auto it = locations.find({v, device});
      if (it == locations.end())
        it = locations.try_emplace({v, device}, newBuffer(device, bytesOf(typeOn(v)), step))
                 .first;
      touch(it->second, step);
      a.kind = fb::ArgKind::Buffer;
      a.index = it->second;
      return a;
    }
    case cuda::ParamBinding::Kind::KCache:
    case cuda::ParamBinding::Kind::VCache:
      a.kind = p.kind == cuda::ParamBinding::Kind::KCache ? fb::ArgKind::KCache
                                                          : fb::ArgKind::VCache;
      a.index = int32_t(p.index);
      return a;
    case cuda::ParamBinding::Kind::BlockTables:
      a.kind = fb::ArgKind::Input;
      a.index = int32_t(fb::InputKind::BlockTables);
      return a;
    case cuda::ParamBinding::Kind::Scratch: {
      auto it = scratch.find(p.index);
      if (it == scratch.end())
        it = scratch.emplace(p.index, newBuffer(device, p.bytes, step)).first;
      touch(it->second, step);
      a.kind = fb::ArgKind::Buffer;
      a.index = it->second;
      return a;
    }
    case cuda::ParamBinding::Kind::Scalar:
      a.kind = fb::ArgKind::Scalar;
      a.value = p.value;
      return a;
    }
    return makeError(what + ": unknown parameter binding");
  }

  llvm::Expected<ArgRef> bindValue(Value v, int device, int step, const std::string &what,
                                   int part = 0) {
    ArgRef a;
    if (auto arg = llvm::dyn_cast<BlockArgument>(v)) {
      static const fb::InputKind kArgs[] = {
          fb::InputKind::TokenIds, fb::InputKind::Positions, fb::InputKind::Slots,
          fb::InputKind::TokenIds /*cache: never bound*/, fb::InputKind::Temperature,
          fb::InputKind::TopK, fb::InputKind::TopP, fb::InputKind::Uniform};
      unsigned i = arg.getArgNumber();
      if (i == 3 || i >= std::size(kArgs))
        return makeError(what + ": function argument " + llvm::Twine(i) +
                         " cannot be bound to a kernel parameter");
      a.kind = fb::ArgKind::Input;
      a.index = int32_t(kArgs[i]);
      return a;
    }
    Operation *def = v.getDefiningOp();
    if (isa<WeightOp, WeightConcatOp>(def)) {
      a.kind = fb::ArgKind::Weight;
      a.index = weightIndex(def, device, part);
      return a;
    }
    if (part != 0)
      return makeError(what + ": a weight part bound to an activation");
    auto it = locations.find({v, device});
    if (it == locations.end()) {
      for (int other = 0; other < int(topology.devices.size()); ++other)
        if (locations.count({v, other}))
          return makeError(what + llvm::formatv(": an input lives on device {0}, not {1} "
                                                "(missing dist.transfer)",
                                                other, device));
      return makeError(what + ": an input is not computed on any device before use");
    }
    touch(it->second, step);
    a.kind = fb::ArgKind::Buffer;
    a.index = it->second;
    return a;
  }

  llvm::Error lowerTransfer(dist::TransferOp op) {
    std::string what = "@" + current->name + ": dist.transfer";
    int step = int(current->steps.size());
    auto it = locations.find({op.getInput(), int(op.getSource())});
    if (it == locations.end())
      return makeError(what + ": its input is not computed on device " +
                       llvm::Twine(op.getSource()) + " before it");
    StepRec s;
    s.kind = StepRec::Copy;
    s.source = int(op.getSource());
    s.target = int(op.getTarget());
    s.device = s.source;
    s.region = "transfer";
    s.bytes = bytesOf(op.getType());
    touch(it->second, step);
    s.from.kind = fb::ArgKind::Buffer;
    s.from.index = it->second;
    int dst = newBuffer(s.target, s.bytes, step);
    locations[{op.getResult(), s.target}] = dst;
    s.to.kind = fb::ArgKind::Buffer;
    s.to.index = dst;
    current->steps.push_back(std::move(s));
    return llvm::Error::success();
  }

  llvm::Error lowerAllReduce(dist::AllReduceOp op) {
    std::string what = "@" + current->name + ": dist.all_reduce";
    int step = int(current->steps.size());
    StepRec s;
    s.kind = StepRec::AllReduce;
    s.region = "all_reduce";
    for (int64_t d : op.getDevices())
      s.devices.push_back(int(d));
    if (s.devices.size() < 2)
      return makeError(what + ": needs a group of at least 2 devices");
    s.device = s.devices.front();
    auto type = llvm::cast<RankedTensorType>(op.getType());
    s.count = uint64_t(type.getNumElements());
    s.dtype = dtypeOf(type.getElementType());
    for (int d : s.devices) {
      auto it = locations.find({op.getInput(), d});
      if (it == locations.end())
        return makeError(what + ": its input is not computed on device " + llvm::Twine(d) +
                         " before it");
      touch(it->second, step);
      ArgRef a;
      a.kind = fb::ArgKind::Buffer;
      a.index = it->second;
      s.buffers.push_back(a);
      locations[{op.getResult(), d}] = it->second; // in place
    }
    s.scratch.kind = fb::ArgKind::Buffer;
    s.scratch.index = newBuffer(s.device, bytesOf(op.getType()), step);
    std::optional<cuda::ElementType> et;
    Type elem = type.getElementType();
    if (elem.isF16())
      et = cuda::ElementType::F16;
    else if (elem.isBF16())
      et = cuda::ElementType::BF16;
    else if (elem.isF32())
      et = cuda::ElementType::F32;
    if (!et)
      return makeError(what + ": only f16, bf16 and f32 values are reduced");
    s.accumulateKernel = kernelIndex(cuda::emitAccumulateKernel(*et, int64_t(s.count)), s.device);
    // dst += src, both count elements in the reduced dtype.
    KernelParamRec operand{fb::ArgKind::Buffer, s.dtype, bytesOf(op.getType())};
    if (llvm::Error e = recordParams(s.accumulateKernel, {operand, operand}, what))
      return e;
    current->steps.push_back(std::move(s));
    return llvm::Error::success();
  }

  int newBuffer(int device, uint64_t bytes, int step) {
    BufferRec b;
    b.device = device;
    b.bytes = std::max<uint64_t>(bytes, 1);
    b.first = b.last = step;
    current->buffers.push_back(b);
    return int(current->buffers.size()) - 1;
  }

  void touch(int buffer, int step) {
    BufferRec &b = current->buffers[size_t(buffer)];
    b.first = std::min(b.first, step);
    b.last = std::max(b.last, step);
  }

  // First fit by decreasing size among buffers whose lifetimes overlap.
  static void assignOffsets(BucketRec &bucket) {
    std::map<int, std::vector<size_t>> byDevice;
    for (size_t i = 0; i < bucket.buffers.size(); ++i)
      byDevice[bucket.buffers[i].device].push_back(i);
    for (auto &[device, ids] : byDevice) {
      std::vector<size_t> order = ids;
      llvm::stable_sort(order, [&](size_t x, size_t y) {
        return bucket.buffers[x].bytes > bucket.buffers[y].bytes;
      });
      std::vector<size_t> placed;
      for (size_t id : order) {
        BufferRec &b = bucket.buffers[id];
        std::vector<std::pair<uint64_t, uint64_t>> busy;
        for (size_t other : placed) {
          const BufferRec &o = bucket.buffers[other];
          if (o.first <= b.last && b.first <= o.last)
            busy.push_back({o.offset, o.offset + alignUp(o.bytes)});
        }
        llvm::sort(busy);
        uint64_t offset = 0;
        for (auto [lo, hi] : busy) {
          if (offset + alignUp(b.bytes) <= lo)
            break;
          offset = std::max(offset, hi);
        }
        b.offset = offset;
        placed.push_back(id);
      }
      for (size_t i = 0; i < ids.size(); ++i)
        bucket.buffers[ids[i]].local = int(i);
    }
  }

  // One plan kernel per (name, launch geometry). A kernel whose code does
  // not depend on the token count (one block per token row) has the same
  // source, name and binary in every bucket but its own grid there, so each
  // bucket gets an entry with its geometry and the binary is compiled once.
  int kernelIndex(cuda::EmittedKernel kernel, int device) {
    std::string arch = archOf(device);
    KernelKey key{kernel.name, kernel.grid, kernel.block, kernel.sharedBytes};
    auto it = kernelByKey.find(key);
    if (it != kernelByKey.end()) {
      kernelArchs[size_t(it->second)].insert(arch);
      return it->second;
    }
    int index = int(kernels.size());
    kernelByKey[key] = index;
    kernels.push_back(std::move(kernel));
    kernelArchs.push_back({arch});
    return index;
  }

  // The manifest weight of a weight value on `device`; for a quantized
  // one (#weft.quant), part 0 is its codes and part 1 its scales, two
  // weights of the manifest.
  int weightIndex(Operation *def, int device, int part = 0) {
    std::string key;
    WeightRec rec;
    auto type = llvm::cast<RankedTensorType>(def->getResult(0).getType());
    rec.dtype = dtypeOf(type.getElementType());
    rec.shape.assign(type.getShape().begin(), type.getShape().end());
    QuantAttr quant = quantOf(def->getResult(0));
    // [out, in] as stored: codes [out, in * bits / 32] I32; integer codes'
    // scales [out, 2 * in / group] (scale, zero) pairs in the weight's
    // 16-bit type, E4M3's [out, 1] F32.
    const bool e4m3 = quant && quant.getFormat() == QuantFormat::E4M3;
    auto stored = [&](llvm::ArrayRef<int64_t> shape) -> std::vector<int64_t> {
      if (!quant)
        return std::vector<int64_t>(shape.begin(), shape.end());
      if (part == 0)
        return {shape[0], shape[1] * quant.getBits() / 32};
      return {shape[0], e4m3 ? 1 : 2 * shape[1] / quant.getGroup()};
    };
    const char *suffix = "";
    if (quant) {
      rec.kernelWeights = true;
      rec.dtype = part == 0 ? fb::DType::I32 : e4m3 ? fb::DType::F32 : rec.dtype;
      rec.shape = stored(type.getShape());
      suffix = part == 0 ? ".codes" : ".scales";
    }
    auto addSource = [&](WeightOp w) {
      auto t = w.getType();
      rec.sources.push_back({w.getName().str() + suffix, stored(t.getShape())});
      if (auto shard = w->getAttrOfType<dist::ShardAttr>("dist.shard")) {
        rec.shardAxis = int(shard.getAxis());
        rec.shardParts = int(shard.getParts());
      }
    };
    if (auto w = dyn_cast<WeightOp>(def)) {
      addSource(w);
      key = rec.name = w.getName().str() + suffix;
    } else {
      auto c = cast<WeightConcatOp>(def);
      rec.concat = true;
      rec.concatAxis = int(c.getAxis());
      for (Value v : c.getInputs())
        if (auto w = v.getDefiningOp<WeightOp>()) {
          addSource(w);
          key += (key.empty() ? "" : "+") + w.getName().str();
        }
      key += suffix;
      rec.name = key;
    }
    auto it = weightByKey.find(key);
    if (it == weightByKey.end()) {
      it = weightByKey.emplace(key, int(weights.size())).first;
      weights.push_back(rec);
    }
    weights[size_t(it->second)].devices.insert(device);
    return it->second;
  }

  std::string archOf(int device) const {
    if (options.archOverride)
      return *options.archOverride;
    return topology.devices[size_t(device)].smArch();
  }

  cuda::EmitOptions emitOptions(int device) const {
    cuda::EmitOptions eo;
    eo.blockTokens = options.blockTokens;
    eo.maxSequences = maxSequences;
    eo.maxBlocksPerSequence = maxBlocksPerSequence;
    eo.smCount = topology.devices[size_t(device)].smCount;
    eo.maxGemvTokens = options.maxGemvTokens;
    std::string arch = archOf(device);
    int cc = 0;
    llvm::StringRef(arch).drop_front(3).getAsInteger(10, cc);
    eo.computeCapability = cc ? cc : topology.devices[size_t(device)].computeCapability;
    return eo;
  }

  const ModelSource &source;
  const hardware::Topology &topology;
  const partition::PartitionOptions &popts;
  const PlanBuildOptions &options;
  int64_t maxBlocksPerSequence = 0;
  int64_t maxSequences = 1; // block-table rows (sequences in flight)

  BucketRec *current = nullptr;
  unsigned regionCounter = 0;
  llvm::DenseMap<std::pair<Value, int>, int> locations; // (value, device) -> buffer
  partition::ShardedValues shardTypes; // activations held as per-device shards

  // The type of `v` as each device holds it.
  Type typeOn(Value v) const {
    auto it = shardTypes.find(v);
    return it == shardTypes.end() ? v.getType() : it->second;
  }
  llvm::DenseMap<Value, fb::InputKind> outputs;
  std::vector<BucketRec> buckets;
  std::vector<cuda::EmittedKernel> kernels;
  std::vector<std::optional<std::vector<KernelParamRec>>> kernelParams; // per kernel
  std::vector<std::set<std::string>> kernelArchs;
  using KernelKey = std::tuple<std::string, std::array<int, 3>, std::array<int, 3>, int>;
  std::map<KernelKey, int> kernelByKey;
  std::vector<WeightRec> weights;
  std::map<std::string, int> weightByKey;
};

} // namespace

namespace {

// Everything about the source checkpoint the loader checks against.
struct SourceFiles {
  struct File {
    std::string name;
    uint64_t headerSize = 0, fileSize = 0, headerFnv = 0;
    bool besidePlan = false;
  };
  std::vector<File> files;
  std::map<std::string, int> fileOfTensor;
};

llvm::Expected<SourceFiles> describeSources(const ModelSource &source) {
  SourceFiles out;
  if (!source.checkpoint)
    return out;
  const Checkpoint &ck = *source.checkpoint;
  for (size_t i = 0; i < ck.files.size(); ++i) {
    const io::SafetensorsHeader &h = ck.files[i];
    auto buffer = llvm::MemoryBuffer::getFileSlice(h.path, h.headerSize, 8);
    if (!buffer)
      return makeError(h.path + ": cannot read the header again: " +
                       buffer.getError().message());
    llvm::StringRef bytes = (*buffer)->getBuffer();
    out.files.push_back({llvm::sys::path::filename(h.path).str(), h.headerSize, h.fileSize,
                         fnv1a64(bytes.data(), bytes.size()), false});
  }
  for (const auto &[name, tensor] : ck.tensors)
    out.fileOfTensor[name] = int(tensor.file);
  return out;
}

// What the chat route needs from the checkpoint: the template (a
// chat_template.jinja file, or tokenizer_config.json's chat_template, a
// string or the "default" of a list of named ones) and the BOS/EOS token
// strings (strings, or objects with "content").
// Side files a checkpoint may carry (tokenizer_config.json, the chat
// template, generation_config.json): real ones are kilobytes.
constexpr uint64_t kMaxSideFileBytes = 16u << 20;

struct ChatConfig {
  std::string source, file, bos, eos;
};

llvm::Expected<std::string> readOptional(const ModelSource &source, llvm::StringRef name,
                                         uint64_t maxBytes);

llvm::Expected<ChatConfig> readChatConfig(const ModelSource &source) {
  ChatConfig c;
  llvm::Expected<std::string> config =
      readOptional(source, "tokenizer_config.json", kMaxSideFileBytes);
  if (!config)
    return config.takeError();
  // Nesting is measured before llvm::json recurses into it.
  if (weft::Status deep = weft::io::checkJsonNesting(*config, weft::io::kMaxJsonDepth,
                                                    "tokenizer_config.json");
      !deep.isOk())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), deep.message());
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(*config);
  const llvm::json::Object *obj = nullptr;
  if (!config->empty() && parsed)
    obj = parsed->getAsObject();
  else if (!parsed)
    llvm::consumeError(parsed.takeError());
  auto token = [&](llvm::StringRef key) -> std::string {
    if (!obj)
      return "";
    if (auto s = obj->getString(key))
      return s->str();
    if (const llvm::json::Object *o = obj->getObject(key))
      if (auto s = o->getString("content"))
        return s->str();
    return "";
  };
  c.bos = token("bos_token");
  c.eos = token("eos_token");
  llvm::Expected<std::string> jinja = readOptional(source, "chat_template.jinja", kMaxSideFileBytes);
  if (!jinja)
    return jinja.takeError();
  c.source = std::move(*jinja);
  c.file = "chat_template.jinja";
  if (!c.source.empty() || !obj)
    return c;
  c.file = "tokenizer_config.json (chat_template)";
  if (auto s = obj->getString("chat_template")) {
    c.source = s->str();
  } else if (const llvm::json::Array *list = obj->getArray("chat_template")) {
    for (const llvm::json::Value &v : *list)
      if (const llvm::json::Object *named = v.getAsObject())
        if (named->getString("name") == llvm::StringRef("default"))
          if (auto t = named->getString("template"))
            c.source = t->str();
  }
  return c;
}

// A checkpoint's side file, or "" when it has none; one that is there but
// is not a regular file, or is larger than `maxBytes`, is an error (it
// would be embedded in the plan).
llvm::Expected<std::string> readOptional(const ModelSource &source, llvm::StringRef name,
                                         uint64_t maxBytes) {
  if (!source.checkpoint)
    return std::string();
  llvm::SmallString<256> path(source.checkpoint->dir);
  llvm::sys::path::append(path, name);
  if (!llvm::sys::fs::exists(path))
    return std::string();
  weft::StatusOr<std::string> text =
      weft::io::readRegularFile(std::string(path), maxBytes, name.str());
  if (!text.isOk())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), text.status().message());
  return std::move(text.value());
}

} // namespace

// The lowering's buckets as plan IR: per device, its buffers in index order,
// then the steps in execution order.
OwningOpRef<ModuleOp> toPlanIR(MLIRContext *ctx, const Lowering &lowering) {
  ctx->loadDialect<plan_ir::PlanDialect>();
  OpBuilder b(ctx);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> ir = ModuleOp::create(loc);
  b.setInsertionPointToEnd(ir->getBody());
  for (const BucketRec &bucket : lowering.buckets) {
    auto op = b.create<plan_ir::BucketOp>(loc, b.getStringAttr(bucket.name),
                                          b.getI64IntegerAttr(bucket.tokens),
                                          b.getBoolAttr(bucket.prefill));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&op.getBody().emplaceBlock());
    auto arg = [&](const ArgRef &a) {
      int64_t index = a.index;
      if (a.kind == fb::ArgKind::Buffer)
        index = bucket.buffers[size_t(a.index)].local;
      return plan_ir::ArgAttr::get(ctx, irArgKind(a.kind), index, int64_t(a.offset), a.value);
    };
    std::map<int, std::vector<const BufferRec *>> byDevice;
    for (const BufferRec &r : bucket.buffers)
      byDevice[r.device].push_back(&r);
    for (auto &[device, recs] : byDevice) {
      std::vector<const BufferRec *> sorted(recs.size());
      for (const BufferRec *r : recs)
        sorted[size_t(r->local)] = r;
      for (const BufferRec *r : sorted)
        b.create<plan_ir::BufferOp>(loc, b.getI64IntegerAttr(device),
                                    b.getI64IntegerAttr(r->local),
                                    b.getI64IntegerAttr(int64_t(r->offset)),
                                    b.getI64IntegerAttr(int64_t(r->bytes)));
    }
    auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
    for (const StepRec &s : bucket.steps) {
      switch (s.kind) {
      case StepRec::Launch: {
        SmallVector<Attribute> args;
        for (const ArgRef &a : s.args)
          args.push_back(arg(a));
        b.create<plan_ir::LaunchOp>(
            loc, i64(s.device), b.getStringAttr(s.region), i64(s.kernel),
            b.getDenseI64ArrayAttr({s.grid[0], s.grid[1], s.grid[2]}),
            b.getDenseI64ArrayAttr({s.block[0], s.block[1], s.block[2]}), i64(s.shared),
            b.getArrayAttr(args));
        break;
      }
      case StepRec::Gemm:
        b.create<plan_ir::GemmOp>(loc, i64(s.device), b.getStringAttr(s.region), i64(s.m),
                                  i64(s.n), i64(s.k), arg(s.a), arg(s.b), arg(s.c),
                                  s.bias ? arg(*s.bias) : plan_ir::ArgAttr(),
                                  s.residual ? arg(*s.residual) : plan_ir::ArgAttr(),
                                  b.getStringAttr(dtypeName(s.dtype)),
                                  b.getStringAttr(dtypeName(s.cDtype)));
        break;
      case StepRec::Copy:
        b.create<plan_ir::CopyOp>(loc, i64(s.source), i64(s.target), i64(int64_t(s.bytes)),
                                  arg(s.from), arg(s.to));
        break;
      case StepRec::AllReduce: {
        SmallVector<int64_t> devs(s.devices.begin(), s.devices.end());
        SmallVector<Attribute> buffers;
        for (const ArgRef &a : s.buffers)
          buffers.push_back(arg(a));
        b.create<plan_ir::AllReduceOp>(loc, i64(s.device), b.getDenseI64ArrayAttr(devs),
                                       i64(int64_t(s.count)), b.getStringAttr(dtypeName(s.dtype)),
                                       b.getArrayAttr(buffers), arg(s.scratch),
                                       i64(s.accumulateKernel));
        break;
      }
      }
    }
  }
  return ir;
}

llvm::Expected<std::vector<uint8_t>>
buildPlan(ModuleOp module, const ModelSource &source, const hardware::Topology &topology,
          const partition::PartitionResult &partition,
          const partition::PartitionOptions &popts, const PlanBuildOptions &options,
          PlanStats *stats, OwningOpRef<ModuleOp> *planIR) {
  const ModelConfig &config = source.config;
  // Only what the runtime executes: the checkpoint's weight dtype, every
  // layer in device memory.
  // Quantized projections, repacked (or quantized, --weight-dtype int4|int8|fp8:
  // marked by quantizeProjections) for the kernels into a file beside the
  // plan (the checkpoint's own layouts are not the kernels').
  std::vector<QuantizedWeightRef> quantized;
  std::set<std::string> seen;
  module.walk([&](WeightOp w) {
    if (QuantAttr q = w.getQuantAttr(); q && seen.insert(w.getName().str()).second)
      quantized.push_back({w.getName().str(), w.getType().getDimSize(0),
                           w.getType().getDimSize(1), int(q.getBits()), q.getGroup(),
                           q.getFormat()});
  });
  bool quantizedHere = !quantized.empty() && !config.quant.active();
  // compressed-tensors keeps its scales in the model's dtype; AWQ and GPTQ
  // in f16.
  if (config.quant.active() && config.dtype != io::DType::F16 &&
      !(config.quant.method == QuantMethod::CompressedTensors && config.dtype == io::DType::BF16))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "%s with %s activations: the kernels read a quantized checkpoint's f16 scales with "
        "f16 activations only; set \"torch_dtype\": \"float16\" in %s/config.json",
        config.quant.describe().c_str(), io::dtypeName(config.dtype),
        source.checkpoint ? source.checkpoint->dir.c_str() : config.name.c_str());
  if (popts.weights.dtype != partition::nativeWeightDType(config) && !quantizedHere)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "weights as %s: a plan holds the checkpoint's own %s weights (quantized "
        "and converted weights are not implemented in the runtime yet)",
        partition::weightDTypeName(popts.weights.dtype),
        partition::weightDTypeName(partition::nativeWeightDType(config)));
  for (const partition::Stage &s : partition.best.stages)
    if (s.offloadedLayers > 0)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "%lld layers in host RAM: host offload is not implemented in the runtime "
          "yet, so a plan cannot hold it",
          (long long)s.offloadedLayers);
  // The checkpoint's side files first: one that cannot be read ends the
  // compile before any kernel is built.
  llvm::Expected<std::string> tokenizerText =
      readOptional(source, "tokenizer.json", weft::tokenizer::kMaxTokenizerBytes);
  if (!tokenizerText)
    return tokenizerText.takeError();
  std::string tokenizer = std::move(*tokenizerText);
  llvm::Expected<std::string> generationText =
      readOptional(source, "generation_config.json", kMaxSideFileBytes);
  if (!generationText)
    return generationText.takeError();
  std::string generation = std::move(*generationText);
  llvm::Expected<ChatConfig> chatConfig = readChatConfig(source);
  if (!chatConfig)
    return chatConfig.takeError();
  ChatConfig chat = std::move(*chatConfig);
  Lowering lowering(source, topology, popts, options);
  SmallVector<func::FuncOp> fns(module.getOps<func::FuncOp>());
  // Block-table rows: enough sequences in flight for the largest decode
  // bucket (and the declared batch). The KV pages stay what the partition
  // budgeted (batch x context tokens), so a plan with --batch 1 and
  // --max-batch 64 runs 64 sequences whose lengths together fit the cache.
  for (func::FuncOp fn : fns)
    if (!fn.getSymName().starts_with("prefill"))
      if (auto t = fn->getAttrOfType<IntegerAttr>("weft.tokens"))
        lowering.maxSequences = std::max(lowering.maxSequences, t.getInt());
  for (size_t i = 0; i < fns.size(); ++i) {
    if (options.progress)
      options.progress("lowering buckets", i, fns.size());
    if (llvm::Error e = lowering.lowerFunction(fns[i]))
      return std::move(e);
  }
  if (options.progress)
    options.progress("lowering buckets", fns.size(), fns.size());

  // Compile every unique kernel for every architecture that runs it, one
  // architecture at a time, kernels in parallel.
  std::vector<std::vector<cuda::CompiledKernel>> binaries(lowering.kernels.size());
  std::map<std::string, std::vector<size_t>> byArch;
  for (size_t k = 0; k < lowering.kernels.size(); ++k)
    for (const std::string &arch : lowering.kernelArchs[k])
      byArch[arch].push_back(k);
  size_t total = 0, cached = 0, distinctSources = 0;
  for (const auto &[arch, ids] : byArch)
    total += ids.size();
  for (const auto &[arch, ids] : byArch) {
    std::vector<cuda::EmittedKernel> batch;
    for (size_t k : ids)
      batch.push_back(lowering.kernels[k]);
    std::string phase = "compiling kernels for " + arch;
    cuda::CompileProgress progress;
    if (options.progress)
      progress = [&](size_t done, size_t of) { options.progress(phase, done, of); };
    size_t distinct = 0;
    llvm::Expected<std::vector<cuda::CompiledKernel>> compiled =
        cuda::compileKernels(batch, arch, options.kernelCache, 0, progress, &distinct);
    if (!compiled)
      return compiled.takeError();
    distinctSources += distinct;
    for (size_t i = 0; i < ids.size(); ++i) {
      cached += (*compiled)[i].fromCache;
      binaries[ids[i]].push_back(std::move((*compiled)[i]));
    }
  }

  llvm::Expected<SourceFiles> sources = describeSources(source);
  if (!sources)
    return sources.takeError();
  if (!quantized.empty() && source.checkpoint && !options.kernelWeightsPath.empty()) {
    std::function<void(uint64_t, uint64_t)> progress;
    if (options.progress)
      progress = [&](uint64_t done, uint64_t total) {
        options.progress("repacking quantized weights", size_t(done), size_t(total));
      };
    llvm::Expected<KernelWeightsFile> written = writeKernelWeights(
        *source.checkpoint, quantized, options.kernelWeightsPath, progress);
    if (!written)
      return written.takeError();
    int index = int(sources->files.size());
    sources->files.push_back({llvm::sys::path::filename(options.kernelWeightsPath).str(),
                              written->headerSize, written->fileSize, written->headerFnv,
                              true});
    for (const QuantizedWeightRef &w : quantized) {
      sources->fileOfTensor[w.name + ".codes"] = index;
      sources->fileOfTensor[w.name + ".scales"] = index;
    }
  }

  flatbuffers::FlatBufferBuilder b(1 << 20);
  auto str = [&](llvm::StringRef s) { return b.CreateString(s.data(), s.size()); };

  // Model.
  std::vector<int32_t> eos(config.eosTokenIds.begin(), config.eosTokenIds.end());
  auto model = fb::CreateModelInfo(
      b, str(config.name), str(config.architecture), dtypeOf(config.dtype),
      int32_t(config.hiddenSize), int32_t(config.intermediateSize),
      int32_t(config.numLayers), int32_t(config.numHeads), int32_t(config.numKvHeads),
      int32_t(config.headDim), int32_t(config.vocabSize),
      int32_t(config.maxPositionEmbeddings), config.rmsNormEps,
      config.bosTokenId ? int32_t(*config.bosTokenId) : -1, b.CreateVector(eos));

  // Topology.
  std::vector<flatbuffers::Offset<fb::Device>> devices;
  for (size_t i = 0; i < topology.devices.size(); ++i) {
    const hardware::DeviceProfile &d = topology.devices[i];
    devices.push_back(fb::CreateDevice(
        b, str(d.name), d.computeCapability, d.memoryBytes,
        d.memoryCapBytes.value_or(0), d.memoryBandwidth, d.smCount,
        str(lowering.archOf(int(i))), str(d.calibration ? d.calibration->gpu : ""),
        str(d.calibration ? d.calibration->driver : "")));
  }
  std::vector<flatbuffers::Offset<fb::Link>> links;
  for (const hardware::LinkProfile &l : topology.links)
    links.push_back(fb::CreateLink(b, l.a, l.b, str(hardware::linkKindName(l.kind)),
                                   l.bandwidth, l.latency));
  auto topo = fb::CreateTopology(b, str(topology.name), b.CreateVector(devices),
                                 b.CreateVector(links), topology.host.ramBytes);

  // Partition and predictions.
  auto prediction = [&](const partition::Candidate &c) {
    return fb::CreatePrediction(b, str(c.description), c.fits, c.latencySeconds * 1e3,
                                c.tokensPerSecondBatch1, c.tokensPerSecond,
                                int32_t(c.microBatches));
  };
  std::vector<flatbuffers::Offset<fb::Stage>> stages;
  for (const partition::Stage &s : partition.best.stages) {
    std::vector<int32_t> devs(s.devices.begin(), s.devices.end());
    stages.push_back(fb::CreateStage(b, b.CreateVector(devs), int32_t(s.firstLayer),
                                     int32_t(s.endLayer), int32_t(s.offloadedLayers)));
  }
  std::vector<flatbuffers::Offset<fb::Prediction>> runners;
  for (const partition::Candidate &c : partition.runnersUp)
    runners.push_back(prediction(c));
  auto chosen = prediction(partition.best);
  flatbuffers::Offset<fb::Prediction> memorySplit;
  if (partition.memoryProportional)
    memorySplit = prediction(*partition.memoryProportional);
  auto part = fb::CreatePartition(
      b, str(popts.objective == partition::Objective::Latency ? "latency" : "throughput"),
      int32_t(popts.batch), int32_t(popts.context),
      str(partition::weightDTypeName(popts.weights.dtype)), b.CreateVector(stages), chosen,
      b.CreateVector(runners), memorySplit);

  // Manifest.
  std::vector<flatbuffers::Offset<fb::SourceFile>> files;
  for (const SourceFiles::File &f : sources->files)
    files.push_back(fb::CreateSourceFile(b, str(f.name), f.headerSize, f.fileSize, f.headerFnv,
                                         f.besidePlan));
  std::vector<flatbuffers::Offset<fb::Weight>> weights;
  for (const WeightRec &w : lowering.weights) {
    std::vector<flatbuffers::Offset<fb::SourceTensor>> parts;
    for (const auto &[name, shape] : w.sources) {
      auto f = sources->fileOfTensor.find(name);
      parts.push_back(fb::CreateSourceTensor(
          b, str(name), f == sources->fileOfTensor.end() ? -1 : f->second, w.dtype,
          b.CreateVector(shape)));
    }
    std::vector<int32_t> devs(w.devices.begin(), w.devices.end());
    weights.push_back(fb::CreateWeight(
        b, str(w.name), w.dtype, b.CreateVector(w.shape),
        w.concat ? fb::Transform::Concat : fb::Transform::None, w.concatAxis,
        b.CreateVector(parts), w.shardAxis, w.shardParts, b.CreateVector(devs)));
  }
  auto manifest = fb::CreateManifest(b, b.CreateVector(files), b.CreateVector(weights));

  // Kernels.
  std::vector<flatbuffers::Offset<fb::Kernel>> kernels;
  for (size_t k = 0; k < lowering.kernels.size(); ++k) {
    std::vector<flatbuffers::Offset<fb::KernelBinary>> bins;
    for (const cuda::CompiledKernel &c : binaries[k])
      bins.push_back(fb::CreateKernelBinary(b, str(c.arch), b.CreateVector(c.cubin),
                                            str(c.ptx)));
    const cuda::EmittedKernel &e = lowering.kernels[k];
    std::vector<flatbuffers::Offset<fb::KernelParam>> params;
    if (k >= lowering.kernelParams.size() || !lowering.kernelParams[k])
      return makeError("internal error: kernel " + e.name + " is never launched");
    for (const KernelParamRec &p : *lowering.kernelParams[k])
      params.push_back(fb::CreateKernelParam(b, p.kind, p.dtype, p.bytes));
    std::vector<int32_t> grid(e.grid.begin(), e.grid.end()), block(e.block.begin(), e.block.end());
    kernels.push_back(fb::CreateKernel(b, str(e.name), str(e.regionKind),
                                       binaries[k].empty() ? 0 : binaries[k][0].sourceHash,
                                       b.CreateVector(bins), b.CreateVector(grid),
                                       b.CreateVector(block), int32_t(e.sharedBytes),
                                       b.CreateVector(params)));
  }

  // Buckets: the lowering's records become plan IR, and the IR is what is
  // serialized (and what --emit=plan prints).
  OwningOpRef<ModuleOp> ir = toPlanIR(module.getContext(), lowering);
  if (failed(mlir::verify(*ir)))
    return makeError("internal error: the plan IR does not verify");
  size_t stepCount = 0;
  std::vector<uint64_t> peak(topology.devices.size(), 0);
  std::vector<flatbuffers::Offset<fb::Bucket>> buckets;
  for (auto bucket : ir->getOps<plan_ir::BucketOp>()) {
    auto arg = [&](plan_ir::ArgAttr a) {
      return fb::CreateArg(b, fbArgKind(a.getKind()), int32_t(a.getIndex()),
                           uint64_t(a.getOffset()), a.getValue());
    };
    std::vector<flatbuffers::Offset<fb::Step>> steps;
    std::map<int, std::vector<flatbuffers::Offset<fb::Buffer>>> buffers;
    std::map<int, uint64_t> arena;
    for (Operation &op : bucket.getBody().front()) {
      if (auto buf = dyn_cast<plan_ir::BufferOp>(op)) {
        int d = int(buf.getDevice());
        buffers[d].push_back(fb::CreateBuffer(b, uint64_t(buf.getOffset()),
                                              uint64_t(buf.getBytes())));
        arena[d] = std::max(arena[d], alignUp(uint64_t(buf.getOffset() + buf.getBytes())));
        continue;
      }
      flatbuffers::Offset<void> body;
      fb::Op type = fb::Op::NONE;
      int32_t device = 0;
      std::string region;
      if (auto l = dyn_cast<plan_ir::LaunchOp>(op)) {
        std::vector<flatbuffers::Offset<fb::Arg>> args;
        for (Attribute a : l.getArgs())
          args.push_back(arg(llvm::cast<plan_ir::ArgAttr>(a)));
        std::vector<int32_t> grid(l.getGrid().begin(), l.getGrid().end()),
            block(l.getBlock().begin(), l.getBlock().end());
        body = fb::CreateLaunch(b, int32_t(l.getKernel()), b.CreateVector(grid),
                                b.CreateVector(block), int32_t(l.getShared()),
                                b.CreateVector(args))
                   .Union();
        type = fb::Op::Launch;
        device = int32_t(l.getDevice());
        region = l.getRegion().str();
      } else if (auto g = dyn_cast<plan_ir::GemmOp>(op)) {
        auto A = arg(g.getA()), B = arg(g.getB()), C = arg(g.getC());
        flatbuffers::Offset<fb::Arg> bias, residual;
        if (auto x = g.getBiasAttr())
          bias = arg(x);
        if (auto x = g.getResidualAttr())
          residual = arg(x);
        body = fb::CreateGemm(b, g.getM(), g.getN(), g.getK(), A, B, C, bias, residual,
                              dtypeOfName(g.getDtype()), dtypeOfName(g.getCDtype()))
                   .Union();
        type = fb::Op::Gemm;
        device = int32_t(g.getDevice());
        region = g.getRegion().str();
      } else if (auto c = dyn_cast<plan_ir::CopyOp>(op)) {
        auto from = arg(c.getSource()), to = arg(c.getTarget());
        body = fb::CreateCopy(b, int32_t(c.getSourceDevice()), int32_t(c.getTargetDevice()),
                              from, to, uint64_t(c.getBytes()))
                   .Union();
        type = fb::Op::Copy;
        device = int32_t(c.getSourceDevice());
        region = "transfer";
      } else if (auto r = dyn_cast<plan_ir::AllReduceOp>(op)) {
        std::vector<flatbuffers::Offset<fb::Arg>> buffers;
        for (Attribute a : r.getBuffers())
          buffers.push_back(arg(llvm::cast<plan_ir::ArgAttr>(a)));
        auto scratch = arg(r.getScratch());
        std::vector<int32_t> devs(r.getDevices().begin(), r.getDevices().end());
        body = fb::CreateAllReduce(b, b.CreateVector(devs), b.CreateVector(buffers),
                                   uint64_t(r.getCount()), dtypeOfName(r.getDtype()), scratch,
                                   int32_t(r.getAccumulateKernel()))
                   .Union();
        type = fb::Op::AllReduce;
        device = int32_t(r.getDevice());
        region = "all_reduce";
      }
      steps.push_back(fb::CreateStep(b, device, str(region), type, body));
    }
    stepCount += steps.size();
    std::vector<flatbuffers::Offset<fb::DeviceBuffers>> deviceBuffers;
    for (auto &[device, list] : buffers) {
      deviceBuffers.push_back(
          fb::CreateDeviceBuffers(b, device, arena[device], b.CreateVector(list)));
      peak[size_t(device)] = std::max(peak[size_t(device)], arena[device]);
    }
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::StepPrediction>>> predicted;
    if (options.predict) {
      std::vector<flatbuffers::Offset<fb::StepPrediction>> list;
      for (const PlanBuildOptions::Prediction &p :
           options.predict(bucket.getPrefill(), int64_t(bucket.getTokens())))
        list.push_back(fb::CreateStepPrediction(b, int32_t(p.context), p.seconds, p.rawOther,
                                                p.rawAttention));
      predicted = b.CreateVector(list);
    }
    buckets.push_back(fb::CreateBucket(b, str(bucket.getSymName()), bucket.getPrefill(),
                                       int32_t(bucket.getTokens()),
                                       b.CreateVector(deviceBuffers), b.CreateVector(steps),
                                       predicted));
  }
  if (planIR)
    *planIR = std::move(ir);

  // KV cache: the pages the partition reserved on each device that holds
  // layers (batch x context tokens), shared by up to max_sequences
  // sequences through their block tables. A tensor-parallel group splits
  // the KV heads.
  std::vector<int64_t> blocks(topology.devices.size(), 0);
  std::vector<int32_t> kvHeads(topology.devices.size(), 0);
  for (const partition::Stage &s : partition.best.stages)
    for (int d : s.devices) {
      blocks[size_t(d)] = popts.batch * lowering.maxBlocksPerSequence;
      kvHeads[size_t(d)] = int32_t(config.numKvHeads / int64_t(s.devices.size()));
    }
  auto kv = fb::CreateKvCacheSpec(b, int32_t(options.blockTokens), dtypeOf(config.dtype),
                                  int32_t(config.numKvHeads), int32_t(config.headDim),
                                  int32_t(lowering.maxSequences),
                                  int32_t(lowering.maxBlocksPerSequence),
                                  b.CreateVector(blocks), b.CreateVector(kvHeads));

  if (stats && !tokenizer.empty()) {
    weft::StatusOr<weft::tokenizer::Tokenizer> t =
        weft::tokenizer::Tokenizer::fromJson(tokenizer, "tokenizer.json");
    stats->tokenizerUsable = t.isOk();
    stats->tokenizer = t.isOk() ? "BPE, " + std::to_string(t->vocabSize()) + " tokens"
                                : t.status().message();
  }
  if (stats && !chat.source.empty()) {
    weft::StatusOr<weft::chat::ChatTemplate> t =
        weft::chat::ChatTemplate::parse(chat.source, chat.file);
    stats->chatTemplate = t.isOk() ? "usable" : t.status().message();
  }
  auto plan = fb::CreatePlan(b, kPlanFormatVersion, str("weft-compile 0.1"), model, topo,
                             part, manifest, b.CreateVector(kernels),
                             b.CreateVector(buckets), kv, str(tokenizer), str(generation),
                             str(chat.source), str(chat.bos), str(chat.eos),
                             createSealPlaceholder(b));
  fb::FinishPlanBuffer(b, plan);

  if (stats) {
    stats->kernels = lowering.kernels.size();
    stats->binaries = total;
    stats->cachedBinaries = cached;
    stats->compiledSources = distinctSources;
    stats->steps = stepCount;
    stats->peakArenaBytes = peak;
  }
  std::vector<uint8_t> bytes(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
  // The seal last: its hash covers every other byte of the file.
  if (weft::Status sealed = sealPlan(bytes, options.signingKey); !sealed.isOk())
    return makeError(sealed.message());
  return bytes;
}

} // namespace weft::plan
