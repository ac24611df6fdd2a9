// The plan back end (PlanBackend.h).
#include "targets/Plan/PlanBackend.h"

#include "runtime/chat/ChatTemplate.h"
#include "runtime/plan/PlanReader.h"
#include "runtime/tokenizer/Tokenizer.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

namespace weft::plan {

namespace {
llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}
} // namespace

llvm::Error PlanBackend::check(const pipeline::Compilation &c) {
  const ModelConfig &config = c.source.config;
  // compressed-tensors keeps its scales in the model's dtype; AWQ and GPTQ
  // in f16.
  if (config.quant.active() && config.dtype != io::DType::F16 &&
      !(config.quant.method == QuantMethod::CompressedTensors && config.dtype == io::DType::BF16))
    return makeError(llvm::formatv(
        "{0} with {1} activations: the kernels read a quantized checkpoint's f16 scales with "
        "f16 activations only; set \"torch_dtype\": \"float16\" in {2}/config.json",
        config.quant.describe(), io::dtypeName(config.dtype),
        c.source.checkpoint ? c.source.checkpoint->dir : config.name));
  if (auto cc = options.lowering.archOverride) {
    int n = 0;
    if (!llvm::StringRef(*cc).starts_with("sm_") ||
        llvm::StringRef(*cc).drop_front(3).getAsInteger(10, n) || n < 80)
      return makeError("--arch: expected sm_80 or newer (e.g. sm_86, sm_90), got '" + *cc +
                       "'");
  }
  if (options.lowering.maxGemvTokens < 1 || options.lowering.maxGemvTokens > 16)
    return makeError("--max-gemv-tokens: expected 1 to 16");
  return llvm::Error::success();
}

void PlanBackend::buildLoweringPipeline(mlir::OpPassManager &pm,
                                        const pipeline::Compilation &c) {
  LowerToPlanOptions lowering = options.lowering;
  if (!lowering.progress)
    lowering.progress = options.progress;
  buildPlanLoweringPipeline(pm, *c.topology, lowering);
}

llvm::Error PlanBackend::serialize(pipeline::Compilation &c) {
  // The checkpoint's side files first: one that cannot be read ends the
  // compile before any kernel is built.
  llvm::Expected<SideFiles> sideFiles = readSideFiles(c.source);
  if (!sideFiles)
    return sideFiles.takeError();
  mlir::ModuleOp plan = *c.module;
  llvm::Expected<CompiledKernels> kernels =
      compilePlanKernels(plan, options.kernelCache, options.progress);
  if (!kernels)
    return kernels.takeError();

  SerializeInputs in;
  in.source = &c.source;
  in.topology = &*c.topology;
  in.partition = &*c.partition;
  in.partitionOptions = &*c.partitionOptions;
  in.archOverride = options.lowering.archOverride;
  in.kernels = &*kernels;
  in.sideFiles = &*sideFiles;
  in.signingKey = options.signingKey;
  // Quantized projections, repacked (or quantized here) for the kernels
  // into a file beside the plan: the checkpoint's own layouts are not the
  // kernels'.
  if (!c.quantized.empty() && c.source.checkpoint && !options.kernelWeightsPath.empty()) {
    std::function<void(uint64_t, uint64_t)> progress;
    if (options.progress)
      progress = [&](uint64_t done, uint64_t total) {
        options.progress("repacking quantized weights", size_t(done), size_t(total));
      };
    llvm::Expected<KernelWeightsFile> written = writeKernelWeights(
        *c.source.checkpoint, c.quantized, options.kernelWeightsPath, progress);
    if (!written)
      return written.takeError();
    SerializeInputs::KernelWeights kw;
    kw.fileName = llvm::sys::path::filename(options.kernelWeightsPath).str();
    kw.file = *written;
    for (const QuantizedWeightRef &w : c.quantized) {
      kw.tensors.push_back(w.name + ".codes");
      kw.tensors.push_back(w.name + ".scales");
    }
    in.kernelWeights = std::move(kw);
    planStats.kernelWeightsPath = options.kernelWeightsPath;
  }
  // Each bucket's predicted step time, for weft-run --bench to set beside
  // the measured one: decode at contexts 64, 128, ... up to the plan's.
  if (options.predictions)
    in.predict = [&](bool prefill, int64_t tokens) {
      std::vector<int64_t> contexts;
      if (prefill) {
        contexts.push_back(0);
      } else {
        for (int64_t n = 64; n < c.partitionOptions->context; n *= 2)
          contexts.push_back(n);
        contexts.push_back(c.partitionOptions->context);
      }
      std::vector<StepPredictionRec> out;
      for (int64_t n : contexts) {
        partition::StepSplit raw;
        partition::StepSplit at = c.predictStep(prefill, tokens, n, &raw);
        out.push_back({n, at.total(), raw.other, raw.attention});
      }
      return out;
    };
  SerializedStats serialized;
  llvm::Expected<std::vector<uint8_t>> written = serializePlan(plan, in, &serialized);
  if (!written)
    return written.takeError();
  bytes = std::move(*written);
  // What the runtime would refuse is not written: the plan passes the same
  // verifier weft-run, weft-serve and weft-inspect load it with (a grid past
  // the hardware's limits, a buffer outside its arena, ...), or the compile
  // fails naming what it broke. Options known to need such a plan are
  // refused before this (Pipeline's bucketOptions); reaching it is a bug.
  if (weft::StatusOr<PlanFile> check = PlanFile::fromBytes(bytes, "the plan being written");
      !check.isOk())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "internal error: the runtime would refuse the plan built, "
                                   "so it is not written: " +
                                       check.status().message());

  planStats.kernels = kernels->binaries.size();
  planStats.binaries = kernels->total;
  planStats.cachedBinaries = kernels->cached;
  planStats.compiledSources = kernels->distinctSources;
  planStats.steps = serialized.steps;
  planStats.peakArenaBytes = serialized.peakArenaBytes;
  if (!sideFiles->tokenizer.empty()) {
    weft::StatusOr<weft::tokenizer::Tokenizer> t =
        weft::tokenizer::Tokenizer::fromJson(sideFiles->tokenizer, "tokenizer.json");
    planStats.tokenizerUsable = t.isOk();
    planStats.tokenizer =
        t.isOk() ? "BPE, " + std::to_string(t->vocabSize()) + " tokens" : t.status().message();
  }
  if (!sideFiles->chatTemplate.empty()) {
    weft::StatusOr<weft::chat::ChatTemplate> t =
        weft::chat::ChatTemplate::parse(sideFiles->chatTemplate, sideFiles->chatTemplateFile);
    planStats.chatTemplate = t.isOk() ? "usable" : t.status().message();
  }
  return llvm::Error::success();
}

} // namespace weft::plan
