// The plan file from a lowered plan module (PlanSerializer.h).
#include "targets/Plan/PlanSerializer.h"

#include "dialects/Plan/IR/PlanDialect.h"
#include "runtime/chat/ChatTemplate.h"
#include "runtime/io/ReadFile.h"
#include "runtime/plan/PlanReader.h"
#include "runtime/plan/plan_generated.h"
#include "runtime/tokenizer/Tokenizer.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <map>

using namespace mlir;

namespace weft::plan {
namespace {

llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

// The plan dialect's enums are plan.fbs's, value for value.
static_assert(int(plan_ir::ArgKind::Buffer) == int(fb::ArgKind::Buffer) &&
              int(plan_ir::ArgKind::Weight) == int(fb::ArgKind::Weight) &&
              int(plan_ir::ArgKind::KCache) == int(fb::ArgKind::KCache) &&
              int(plan_ir::ArgKind::VCache) == int(fb::ArgKind::VCache) &&
              int(plan_ir::ArgKind::Input) == int(fb::ArgKind::Input) &&
              int(plan_ir::ArgKind::Scalar) == int(fb::ArgKind::Scalar));
static_assert(int(plan_ir::DType::F32) == int(fb::DType::F32) &&
              int(plan_ir::DType::F16) == int(fb::DType::F16) &&
              int(plan_ir::DType::BF16) == int(fb::DType::BF16) &&
              int(plan_ir::DType::FP8_E4M3) == int(fb::DType::FP8_E4M3) &&
              int(plan_ir::DType::I8) == int(fb::DType::I8) &&
              int(plan_ir::DType::I4) == int(fb::DType::I4) &&
              int(plan_ir::DType::I32) == int(fb::DType::I32) &&
              int(plan_ir::DType::I64) == int(fb::DType::I64));
fb::ArgKind fbOf(plan_ir::ArgKind k) { return fb::ArgKind(int(k)); }
fb::DType fbOf(plan_ir::DType t) { return fb::DType(int(t)); }

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

llvm::Expected<SideFiles> readSideFiles(const ModelSource &source) {
  SideFiles out;
  llvm::Expected<std::string> tokenizer =
      readOptional(source, "tokenizer.json", weft::tokenizer::kMaxTokenizerBytes);
  if (!tokenizer)
    return tokenizer.takeError();
  out.tokenizer = std::move(*tokenizer);
  llvm::Expected<std::string> generation =
      readOptional(source, "generation_config.json", kMaxSideFileBytes);
  if (!generation)
    return generation.takeError();
  out.generation = std::move(*generation);
  llvm::Expected<ChatConfig> chat = readChatConfig(source);
  if (!chat)
    return chat.takeError();
  out.chatTemplate = std::move(chat->source);
  out.chatTemplateFile = std::move(chat->file);
  out.bos = std::move(chat->bos);
  out.eos = std::move(chat->eos);
  return out;
}

llvm::Expected<CompiledKernels>
compilePlanKernels(ModuleOp plan, cuda::KernelCache *cache,
                   const std::function<void(llvm::StringRef, size_t, size_t)> &progress) {
  SmallVector<plan_ir::KernelOp> ops(plan.getOps<plan_ir::KernelOp>());
  CompiledKernels out;
  out.binaries.resize(ops.size());
  std::map<std::string, std::vector<size_t>> byArch;
  for (size_t k = 0; k < ops.size(); ++k) {
    if (!ops[k].getSource())
      return makeError("plan.kernel @" + ops[k].getSymName() + " (" + ops[k].getEntry() +
                       ") has no source to compile");
    for (Attribute a : ops[k].getArchs())
      byArch[llvm::cast<StringAttr>(a).str()].push_back(k);
  }
  for (const auto &[arch, ids] : byArch)
    out.total += ids.size();
  for (const auto &[arch, ids] : byArch) {
    std::vector<cuda::EmittedKernel> batch;
    for (size_t k : ids) {
      plan_ir::KernelOp op = ops[k];
      cuda::EmittedKernel e;
      e.name = op.getEntry().str();
      e.regionKind = op.getRegion().str();
      e.source = op.getSource()->str();
      if (std::optional<StringRef> instance = op.getInstance())
        e.instance = instance->str();
      for (int i = 0; i < 3; ++i) {
        e.grid[size_t(i)] = int(op.getGrid()[size_t(i)]);
        e.block[size_t(i)] = int(op.getBlock()[size_t(i)]);
      }
      e.sharedBytes = int(op.getShared());
      batch.push_back(std::move(e));
    }
    std::string phase = "compiling kernels for " + arch;
    cuda::CompileProgress report;
    if (progress)
      report = [&](size_t done, size_t of) { progress(phase, done, of); };
    size_t distinct = 0;
    llvm::Expected<std::vector<cuda::CompiledKernel>> compiled =
        cuda::compileKernels(batch, arch, cache, 0, report, &distinct);
    if (!compiled)
      return compiled.takeError();
    out.distinctSources += distinct;
    for (size_t i = 0; i < ids.size(); ++i) {
      out.cached += (*compiled)[i].fromCache;
      out.binaries[ids[i]].push_back(std::move((*compiled)[i]));
    }
  }
  return out;
}

llvm::Expected<std::vector<uint8_t>> serializePlan(ModuleOp plan, const SerializeInputs &in,
                                                   SerializedStats *stats) {
  const ModelSource &source = *in.source;
  const ModelConfig &config = source.config;
  const hardware::Topology &topology = *in.topology;
  const partition::PartitionResult &partition = *in.partition;
  const partition::PartitionOptions &popts = *in.partitionOptions;
  const SideFiles &side = *in.sideFiles;
  SmallVector<plan_ir::KernelOp> kernelOps(plan.getOps<plan_ir::KernelOp>());
  SmallVector<plan_ir::WeightOp> weightOps(plan.getOps<plan_ir::WeightOp>());
  SmallVector<plan_ir::KvCacheOp> kvOps(plan.getOps<plan_ir::KvCacheOp>());
  if (kvOps.size() != 1)
    return makeError("the plan module has " + llvm::Twine(kvOps.size()) +
                     " plan.kv_cache ops (expected 1; run weft-lower-to-plan)");
  // A kernel's symbol becomes its position in the file's kernel table.
  llvm::StringMap<int32_t> kernelIndex;
  for (auto [i, k] : llvm::enumerate(kernelOps))
    kernelIndex[k.getSymName()] = int32_t(i);
  auto indexOf = [&](Operation *step, FlatSymbolRefAttr sym,
                     llvm::StringRef bucket) -> llvm::Expected<int32_t> {
    auto it = kernelIndex.find(sym.getValue());
    if (it == kernelIndex.end())
      return makeError("@" + bucket + ": " + step->getName().getStringRef() + " names kernel " +
                       "@" + sym.getValue() + ", which is not a plan.kernel of the module");
    return it->second;
  };
  if (in.kernels->binaries.size() != kernelOps.size())
    return makeError("internal error: compiled kernels do not match the plan's kernel table");

  llvm::Expected<SourceFiles> sources = describeSources(source);
  if (!sources)
    return sources.takeError();
  if (in.kernelWeights) {
    int index = int(sources->files.size());
    const KernelWeightsFile &f = in.kernelWeights->file;
    sources->files.push_back(
        {in.kernelWeights->fileName, f.headerSize, f.fileSize, f.headerFnv, true});
    for (const std::string &t : in.kernelWeights->tensors)
      sources->fileOfTensor[t] = index;
  }

  flatbuffers::FlatBufferBuilder b(1 << 20);
  auto str = [&](llvm::StringRef s) { return b.CreateString(s.data(), s.size()); };

  // Model.
  std::vector<int32_t> eos(config.eosTokenIds.begin(), config.eosTokenIds.end());
  // The activations' dtype is the KV cache's (weft-lower-to-plan).
  auto model = fb::CreateModelInfo(
      b, str(config.name), str(config.architecture), fbOf(kvOps.front().getDtype()),
      int32_t(config.hiddenSize), int32_t(config.intermediateSize),
      int32_t(config.numLayers), int32_t(config.numHeads), int32_t(config.numKvHeads),
      int32_t(config.headDim), int32_t(config.vocabSize),
      int32_t(config.maxPositionEmbeddings), config.rmsNormEps,
      config.bosTokenId ? int32_t(*config.bosTokenId) : -1, b.CreateVector(eos));

  // Topology.
  std::vector<flatbuffers::Offset<fb::Device>> devices;
  for (const hardware::DeviceProfile &d : topology.devices)
    devices.push_back(fb::CreateDevice(
        b, str(d.name), d.computeCapability, d.memoryBytes, d.memoryCapBytes.value_or(0),
        d.memoryBandwidth, d.smCount, str(in.archOverride ? *in.archOverride : d.smArch()),
        str(d.calibration ? d.calibration->gpu : ""),
        str(d.calibration ? d.calibration->driver : "")));
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
      b.CreateVector(runners), memorySplit,
      popts.weights.lmHead ? str(partition::weightDTypeName(*popts.weights.lmHead))
                           : flatbuffers::Offset<flatbuffers::String>());

  // Manifest.
  std::vector<flatbuffers::Offset<fb::SourceFile>> files;
  for (const SourceFiles::File &f : sources->files)
    files.push_back(fb::CreateSourceFile(b, str(f.name), f.headerSize, f.fileSize, f.headerFnv,
                                         f.besidePlan));
  std::vector<flatbuffers::Offset<fb::Weight>> weights;
  for (plan_ir::WeightOp w : weightOps) {
    fb::DType dtype = fbOf(w.getDtype());
    std::vector<flatbuffers::Offset<fb::SourceTensor>> parts;
    for (Attribute a : w.getSources()) {
      auto t = llvm::cast<plan_ir::SourceTensorAttr>(a);
      auto f = sources->fileOfTensor.find(t.getName().str());
      std::vector<int64_t> shape(t.getShape().asArrayRef().begin(),
                                 t.getShape().asArrayRef().end());
      parts.push_back(fb::CreateSourceTensor(
          b, str(t.getName()), f == sources->fileOfTensor.end() ? -1 : f->second, dtype,
          b.CreateVector(shape)));
    }
    std::vector<int64_t> shape(w.getShape().begin(), w.getShape().end());
    std::vector<int32_t> devs(w.getDevices().begin(), w.getDevices().end());
    std::optional<uint64_t> axis = w.getConcatAxis();
    weights.push_back(fb::CreateWeight(
        b, str(w.getName()), dtype, b.CreateVector(shape),
        axis ? fb::Transform::Concat : fb::Transform::None, axis ? int32_t(*axis) : 0,
        b.CreateVector(parts), int32_t(w.getShardAxisAttr().getInt()), int32_t(w.getShardPartsAttr().getInt()),
        b.CreateVector(devs)));
  }
  auto manifest = fb::CreateManifest(b, b.CreateVector(files), b.CreateVector(weights));

  // Kernels.
  std::vector<flatbuffers::Offset<fb::Kernel>> kernels;
  for (size_t k = 0; k < kernelOps.size(); ++k) {
    plan_ir::KernelOp op = kernelOps[k];
    const std::vector<cuda::CompiledKernel> &bin = in.kernels->binaries[k];
    std::vector<flatbuffers::Offset<fb::KernelBinary>> bins;
    for (const cuda::CompiledKernel &c : bin)
      bins.push_back(fb::CreateKernelBinary(b, str(c.arch), b.CreateVector(c.cubin),
                                            str(c.ptx)));
    std::vector<flatbuffers::Offset<fb::KernelParam>> params;
    for (Attribute a : op.getParams()) {
      auto p = llvm::cast<plan_ir::ParamAttr>(a);
      params.push_back(
          fb::CreateKernelParam(b, fbOf(p.getKind()), fbOf(p.getDtype()), uint64_t(p.getBytes())));
    }
    std::vector<int32_t> grid(op.getGrid().begin(), op.getGrid().end()),
        block(op.getBlock().begin(), op.getBlock().end());
    // Every binary names its entry alike; the symbol is written only when
    // it is not the kernel's name (a library template instance).
    flatbuffers::Offset<flatbuffers::String> symbol;
    if (!bin.empty() && !bin[0].symbol.empty() && bin[0].symbol != op.getEntry().str()) {
      for (const cuda::CompiledKernel &c : bin)
        if (c.symbol != bin[0].symbol)
          return makeError("kernel " + op.getEntry() + ": its " + c.arch + " binary names its "
                           "entry " + c.symbol + ", its " + bin[0].arch + " binary " +
                           bin[0].symbol);
      symbol = b.CreateString(bin[0].symbol);
    }
    kernels.push_back(fb::CreateKernel(b, str(op.getEntry()), str(op.getRegion()),
                                       bin.empty() ? 0 : bin[0].sourceHash,
                                       b.CreateVector(bins), b.CreateVector(grid),
                                       b.CreateVector(block), int32_t(op.getShared()),
                                       b.CreateVector(params), op.getCooperative(), symbol));
  }

  // Buckets.
  size_t stepCount = 0;
  std::vector<uint64_t> peak(topology.devices.size(), 0);
  std::vector<flatbuffers::Offset<fb::Bucket>> buckets;
  for (auto bucket : plan.getOps<plan_ir::BucketOp>()) {
    auto arg = [&](plan_ir::ArgAttr a) {
      return fb::CreateArg(b, fbOf(a.getKind()), int32_t(a.getIndex()),
                           uint64_t(a.getOffset()), a.getValue());
    };
    std::vector<flatbuffers::Offset<fb::Step>> steps;
    std::map<int, std::vector<flatbuffers::Offset<fb::Buffer>>> buffers;
    std::map<int, uint64_t> arena;
    for (Operation &op : bucket.getBody().front()) {
      if (auto buf = dyn_cast<plan_ir::BufferOp>(op)) {
        std::optional<uint64_t> offset = buf.getOffset();
        if (!offset)
          return makeError("@" + bucket.getSymName() + ": buffer " +
                           llvm::Twine(buf.getIndex()) + " of device " +
                           llvm::Twine(buf.getDevice()) +
                           " has no offset (run plan-assign-buffers)");
        int d = int(buf.getDevice());
        if (d < 0 || d >= int(topology.devices.size()))
          return makeError("@" + bucket.getSymName() + ": a buffer on device " +
                           llvm::Twine(d) + " of a topology with " +
                           llvm::Twine(topology.devices.size()));
        buffers[d].push_back(fb::CreateBuffer(b, *offset, uint64_t(buf.getBytes())));
        arena[d] = std::max(arena[d], plan_ir::alignToBuffer(*offset + uint64_t(buf.getBytes())));
        continue;
      }
      flatbuffers::Offset<void> body;
      fb::Op type = fb::Op::NONE;
      std::string region;
      if (auto l = dyn_cast<plan_ir::LaunchOp>(op)) {
        llvm::Expected<int32_t> kernel = indexOf(l, l.getKernelAttr(), bucket.getSymName());
        if (!kernel)
          return kernel.takeError();
        std::vector<flatbuffers::Offset<fb::Arg>> args;
        for (Attribute a : l.getArgs())
          args.push_back(arg(llvm::cast<plan_ir::ArgAttr>(a)));
        std::vector<int32_t> grid(l.getGrid().begin(), l.getGrid().end()),
            block(l.getBlock().begin(), l.getBlock().end());
        body = fb::CreateLaunch(b, *kernel, b.CreateVector(grid),
                                b.CreateVector(block), int32_t(l.getShared()),
                                b.CreateVector(args))
                   .Union();
        type = fb::Op::Launch;
        region = l.getRegion().str();
      } else if (auto g = dyn_cast<plan_ir::GemmOp>(op)) {
        auto A = arg(g.getA()), B = arg(g.getB()), C = arg(g.getC());
        flatbuffers::Offset<fb::Arg> bias, residual;
        if (auto x = g.getBiasAttr())
          bias = arg(x);
        if (auto x = g.getResidualAttr())
          residual = arg(x);
        body = fb::CreateGemm(b, g.getM(), g.getN(), g.getK(), A, B, C, bias, residual,
                              fbOf(g.getDtype()), fbOf(g.getCDtype()))
                   .Union();
        type = fb::Op::Gemm;
        region = g.getRegion().str();
      } else if (auto c = dyn_cast<plan_ir::CopyOp>(op)) {
        auto from = arg(c.getSource()), to = arg(c.getTarget());
        body = fb::CreateCopy(b, int32_t(c.getSourceDevice()), int32_t(c.getTargetDevice()),
                              from, to, uint64_t(c.getBytes()))
                   .Union();
        type = fb::Op::Copy;
        region = "transfer";
      } else if (auto r = dyn_cast<plan_ir::AllReduceOp>(op)) {
        llvm::Expected<int32_t> accumulate =
            indexOf(r, r.getAccumulateKernelAttr(), bucket.getSymName());
        if (!accumulate)
          return accumulate.takeError();
        std::vector<flatbuffers::Offset<fb::Arg>> list;
        for (Attribute a : r.getBuffers())
          list.push_back(arg(llvm::cast<plan_ir::ArgAttr>(a)));
        auto scratch = arg(r.getScratch());
        std::vector<int32_t> devs(r.getDevices().begin(), r.getDevices().end());
        body = fb::CreateAllReduce(b, b.CreateVector(devs), b.CreateVector(list),
                                   uint64_t(r.getCount()), fbOf(r.getDtype()), scratch,
                                   *accumulate)
                   .Union();
        type = fb::Op::AllReduce;
        region = "all_reduce";
      } else {
        return makeError("@" + bucket.getSymName() + ": cannot serialize '" +
                         op.getName().getStringRef() + "'");
      }
      int32_t device = int32_t(cast<plan_ir::StepOpInterface>(op).getStepDevice());
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
    if (in.predict) {
      std::vector<flatbuffers::Offset<fb::StepPrediction>> list;
      for (const StepPredictionRec &p :
           in.predict(bucket.getPrefill(), int64_t(bucket.getTokens())))
        list.push_back(fb::CreateStepPrediction(b, int32_t(p.context), p.seconds, p.rawOther,
                                                p.rawAttention));
      predicted = b.CreateVector(list);
    }
    buckets.push_back(fb::CreateBucket(b, str(bucket.getSymName()), bucket.getPrefill(),
                                       int32_t(bucket.getTokens()),
                                       b.CreateVector(deviceBuffers), b.CreateVector(steps),
                                       predicted));
  }

  // KV cache.
  plan_ir::KvCacheOp kvOp = kvOps.front();
  if (kvOp.getBlocks().size() != topology.devices.size() ||
      kvOp.getKvHeads().size() != topology.devices.size())
    return makeError("plan.kv_cache: blocks and kv_heads need one entry per device");
  std::vector<int64_t> blocks(kvOp.getBlocks().begin(), kvOp.getBlocks().end());
  std::vector<int32_t> kvHeads(kvOp.getKvHeads().begin(), kvOp.getKvHeads().end());
  auto kv = fb::CreateKvCacheSpec(b, int32_t(kvOp.getBlockTokens()), fbOf(kvOp.getDtype()),
                                  int32_t(kvOp.getNumKvHeads()), int32_t(kvOp.getHeadDim()),
                                  int32_t(kvOp.getMaxSequences()),
                                  int32_t(kvOp.getMaxBlocksPerSequence()),
                                  b.CreateVector(blocks), b.CreateVector(kvHeads));

  auto root = fb::CreatePlan(b, kPlanFormatVersion, str("weft-compile 0.1"), model, topo, part,
                             manifest, b.CreateVector(kernels), b.CreateVector(buckets), kv,
                             str(side.tokenizer), str(side.generation), str(side.chatTemplate),
                             str(side.bos), str(side.eos), createSealPlaceholder(b));
  fb::FinishPlanBuffer(b, root);
  if (stats) {
    stats->steps = stepCount;
    stats->peakArenaBytes = peak;
  }
  std::vector<uint8_t> bytes(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
  // The seal last: its hash covers every other byte of the file.
  if (weft::Status sealed = sealPlan(bytes, in.signingKey); !sealed.isOk())
    return makeError(sealed.message());
  return bytes;
}

} // namespace weft::plan
