// The compiler's stages in order (Pipeline.h).
#include "compiler/Pipeline/Pipeline.h"

#include "compiler/Import/Importer.h"
#include "compiler/Partition/Annotate.h"
#include "dialects/Weft/IR/WeftOps.h"

#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

namespace weft::pipeline {

Backend::~Backend() = default;

namespace {

llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

// A step's tokens are rows of kernel grids (grid.y, at most 65535 on
// every NVIDIA GPU): a bucket of more could not be launched.
constexpr int64_t kMaxStepTokens = 65535;

// Bucket sizes and the options that shape them, checked before anything
// runs.
llvm::Expected<CompileOptions> bucketOptions(const Options &o) {
  if (o.maxBatch && *o.maxBatch < 1)
    return makeError("--max-batch must be at least 1");
  if (o.maxBatch && *o.maxBatch > kMaxStepTokens)
    return makeError(llvm::formatv("--max-batch {0}: at most {1} tokens a step (a step's tokens "
                                   "are rows of a kernel grid)",
                                   *o.maxBatch, kMaxStepTokens));
  if (o.batch > kMaxStepTokens && !o.maxBatch && o.decodeBuckets.empty())
    return makeError(llvm::formatv("--batch {0}: at most {1} tokens a step (a step's tokens are "
                                   "rows of a kernel grid)",
                                   o.batch, kMaxStepTokens));
  // Decode buckets reach the declared batch unless told otherwise.
  if (o.maxBatch && o.decodeBuckets.empty() && *o.maxBatch < o.batch)
    return makeError(llvm::formatv("--max-batch {0} is below --batch {1}: the plan could not "
                                   "run the batch it is sized for in one step",
                                   *o.maxBatch, o.batch));
  for (int64_t n : o.decodeBuckets)
    if (n < 1 || n > kMaxStepTokens)
      return makeError(llvm::formatv("--decode-buckets: {0}: expected 1 to {1} tokens", n,
                                     kMaxStepTokens));
  for (int64_t n : o.prefillChunks)
    if (n < 1 || n > kMaxStepTokens)
      return makeError(llvm::formatv("--prefill-chunks: {0}: expected 1 to {1} tokens", n,
                                     kMaxStepTokens));
  CompileOptions c;
  c.maxBatch = o.maxBatch ? *o.maxBatch : std::max<int64_t>(64, o.batch);
  c.decodeBuckets = o.decodeBuckets;
  c.prefillChunks = o.prefillChunks;
  return c;
}

// What quantizing `what` at compile time (`option` `dtype`) needs: the
// checkpoint's own 16-bit weights, and for FP8 every device at sm_89 or
// newer.
llvm::Error checkQuantizable(const Compilation &c, llvm::StringRef option, llvm::StringRef dtype,
                             llvm::StringRef what, bool fp8) {
  const ModelConfig &config = c.source.config;
  if (config.dtype != io::DType::F16 && config.dtype != io::DType::BF16)
    return makeError(llvm::formatv(
        "{0} {1}: quantizing {2} at compile time needs an F16 or BF16 checkpoint (the "
        "quantized kernels compute in its 16-bit type); {3} is {4}",
        option, dtype, what, c.options.model, io::dtypeName(config.dtype)));
  if (fp8)
    for (const hardware::DeviceProfile &d : c.topology->devices)
      if (!d.hasFp8())
        return makeError(llvm::formatv(
            "{0} fp8: device '{1}' of topology '{2}' is sm_{3}, and FP8 needs sm_89 or newer "
            "(Ada, Hopper); use {0} int8 instead",
            option, d.name, c.topology->name, d.computeCapability));
  return llvm::Error::success();
}

// --weight-dtype int4|int8|fp8 from a 16-bit checkpoint, for a plan:
// the projections are quantized here, by round to nearest.
llvm::Error quantizeHere(Compilation &c) {
  using partition::WeightDType;
  const WeightDType wanted = c.partitionOptions->weights.dtype;
  if (llvm::Error e = checkQuantizable(c, "--weight-dtype", c.options.weightDType,
                                       "the projections", wanted == WeightDType::FP8))
    return e;
  quantizeProjections(*c.module, wanted == WeightDType::Int4 ? 4 : 8,
                      wanted == WeightDType::FP8 ? QuantFormat::E4M3 : QuantFormat::Int);
  c.notes.push_back(llvm::formatv(
      "--weight-dtype {0}: projections quantized by round to nearest ({1}); an AWQ or GPTQ "
      "checkpoint of the model, calibrated on data, is more accurate",
      c.options.weightDType,
      wanted == WeightDType::Int4   ? "4-bit, groups of 128 inputs, asymmetric"
      : wanted == WeightDType::Int8 ? "8-bit, one group per row, symmetric"
                                    : "FP8 E4M3, one scale per row"));
  return llvm::Error::success();
}

// --lm-head-dtype int8|int4|fp8: the LM head quantized by round to
// nearest, whatever the layers hold (a plan checks that it can be, with
// checkQuantizable; a report prices it as asked).
llvm::Expected<std::optional<partition::WeightDType>> lmHeadDType(const Compilation &c) {
  using partition::WeightDType;
  const std::string &name = c.options.lmHeadDType;
  if (name.empty())
    return std::nullopt;
  llvm::Expected<WeightDType> d = partition::parseWeightDType(name);
  if (!d || (*d != WeightDType::Int8 && *d != WeightDType::Int4 && *d != WeightDType::FP8)) {
    if (!d)
      llvm::consumeError(d.takeError());
    return makeError(llvm::formatv("--lm-head-dtype: expected int8, int4 or fp8, got '{0}' "
                                   "(without the option the LM head keeps the checkpoint's "
                                   "16-bit weights)",
                                   name));
  }
  return *d;
}

llvm::Error partitionStage(Compilation &c, bool buildsPlan) {
  const Options &o = c.options;
  llvm::Expected<hardware::Topology> topo = hardware::parseTopologySpec(o.topology);
  if (!topo)
    return topo.takeError();
  if (!o.memoryCap.empty())
    if (llvm::Error e = hardware::applyMemoryCaps(*topo, o.memoryCap))
      return e;
  c.topology = std::move(*topo);
  llvm::Expected<partition::PartitionOptions> popts = partition::makePartitionOptions(
      c.source.config, o.objective, o.batch, c.contextLength, o.weightDType);
  if (!popts)
    return popts.takeError();
  c.partitionOptions = std::move(*popts);
  llvm::Expected<std::optional<partition::WeightDType>> head = lmHeadDType(c);
  if (!head)
    return head.takeError();
  c.partitionOptions->weights.lmHead = *head;
  using partition::WeightDType;
  const WeightDType wanted = c.partitionOptions->weights.dtype;
  // A plan holds what the runtime executes: the checkpoint's own weights or
  // projections quantized here; every layer on a GPU. Other choices are
  // predictions for the report. A printed fused graph holds a plan's weights.
  const bool planWeights = buildsPlan || o.graphAsPlan;
  if (planWeights && !c.source.config.quant.active() &&
      (wanted == WeightDType::Int4 || wanted == WeightDType::Int8 ||
       wanted == WeightDType::FP8)) {
    if (llvm::Error e = quantizeHere(c))
      return e;
  } else if (planWeights && wanted != partition::nativeWeightDType(c.source.config)) {
    return makeError(llvm::formatv(
        "--weight-dtype {0}: a plan holds the checkpoint's own {1} weights; converting them "
        "to another float type is not implemented in the runtime (for the prediction, give "
        "--report without -o or --emit)",
        o.weightDType,
        partition::weightDTypeName(partition::nativeWeightDType(c.source.config))));
  }
  if (planWeights && *head) {
    const bool fp8 = **head == WeightDType::FP8;
    if (llvm::Error e = checkQuantizable(c, "--lm-head-dtype", o.lmHeadDType, "the LM head", fp8))
      return e;
    if (llvm::Error e = quantizeLmHead(*c.module, **head == WeightDType::Int4 ? 4 : 8,
                                       fp8 ? QuantFormat::E4M3 : QuantFormat::Int))
      return e;
    c.notes.push_back(llvm::formatv(
        "--lm-head-dtype {0}: the LM head quantized by round to nearest ({1}); its logits "
        "differ from the 16-bit head's, and more so in 4 bits",
        o.lmHeadDType,
        **head == WeightDType::Int4 ? "4-bit, groups of 128 inputs, asymmetric"
        : fp8                       ? "FP8 E4M3, one scale per row"
                                    : "8-bit, one scale per row, symmetric"));
  }
  if (buildsPlan && o.hostOffloadGiven && o.hostOffload)
    return makeError("--host-offload: plans cannot keep layers in host RAM yet (the runtime "
                     "does not implement it); the option applies to --report only");
  c.partitionOptions->decodeStream =
      o.decodeStream &&
      partition::decodeStreamTakes(c.source.config, c.partitionOptions->weights);
  c.partitionOptions->allowHostOffload = o.hostOffload && !buildsPlan;
  c.partitionOptions->runnableOnly = buildsPlan;
  if (!o.stages.empty()) {
    llvm::Expected<std::vector<partition::Stage>> forced =
        partition::parseStageSpec(o.stages, c.source.config, *c.topology);
    if (!forced)
      return forced.takeError();
    c.partitionOptions->forcedStages = std::move(*forced);
  }
  llvm::Expected<partition::PartitionedModule> done = partition::partitionModule(
      *c.module, c.source.config, *c.topology, *c.partitionOptions);
  if (!done)
    return done.takeError();
  c.profile = std::move(done->profile);
  c.partition = std::move(done->result);
  return llvm::Error::success();
}

// Runs `pm` on the module; MLIR's diagnostics become the error's text.
llvm::Error runPasses(Compilation &c, mlir::PassManager &pm, llvm::StringRef what) {
  std::string diagnostics;
  // Errors join the message; warnings and remarks go on to the default
  // handler (stderr).
  mlir::ScopedDiagnosticHandler handler(c.context.get(), [&](mlir::Diagnostic &d) {
    if (d.getSeverity() != mlir::DiagnosticSeverity::Error)
      return mlir::failure();
    diagnostics += (diagnostics.empty() ? "" : "; ") + d.str();
    return mlir::success();
  });
  if (mlir::failed(pm.run(*c.module)))
    return makeError(what + (diagnostics.empty() ? " failed" : ": " + diagnostics));
  return llvm::Error::success();
}

} // namespace

partition::StepSplit Compilation::predictStep(bool prefill, int64_t tokens,
                                              int64_t contextTokens,
                                              partition::StepSplit *raw) const {
  return partition::predictStepSeconds(*profile, *topology, *partitionOptions,
                                       partition->best.stages, tokens, contextTokens, prefill,
                                       raw);
}

llvm::Expected<std::unique_ptr<Compilation>> compile(const Options &options,
                                                     Backend *backend) {
  const Stage stop = options.stopAfter;
  const bool partitioned = stop >= Stage::Partition;
  const bool buildsPlan = stop >= Stage::Lower;
  if (partitioned && options.topology.empty())
    return makeError("partitioning needs a topology (--topology)");
  if (buildsPlan && !backend)
    return makeError("internal error: lowering needs a back end");
  if (!options.stages.empty() && !partitioned)
    return makeError("--stages needs --topology");
  if (!options.lmHeadDType.empty() && !partitioned)
    return makeError("--lm-head-dtype needs --topology");
  if (!options.weightDType.empty() && !partitioned)
    return makeError("--weight-dtype needs --topology (it chooses the weights of a plan or a "
                     "report, and which devices can run them)");
  llvm::Expected<CompileOptions> buckets = bucketOptions(options);
  if (!buckets)
    return buckets.takeError();

  auto c = std::make_unique<Compilation>();
  c->options = options;
  llvm::Expected<ModelSource> source = loadModelSource(options.model);
  if (!source)
    return source.takeError();
  c->source = std::move(*source);
  c->contextLength = options.context ? *options.context
                                     : std::min<int64_t>(4096, c->source.config.maxPositionEmbeddings);
  if (c->contextLength < 1)
    return makeError("--context must be at least 1");

  // Import.
  c->context = std::make_unique<mlir::MLIRContext>();
  ImportOptions importOptions;
  importOptions.sampling = options.sampling;
  c->module = importModel(*c->context, c->source.config, importOptions);
  if (mlir::failed(mlir::verify(*c->module)))
    return makeError("internal error: the imported graph does not verify");
  {
    llvm::raw_string_ostream os(c->importSummary);
    printGraphSummary(*c->module, c->source.config, os);
  }
  if (stop == Stage::Import)
    return c;

  // Fusion, then (over a topology) quantization and partitioning, then
  // specialization into buckets.
  mlir::PassManager fusion(c->context.get());
  buildFusionPipeline(fusion, c->options.fuseProjectionRope);
  if (llvm::Error e = runPasses(*c, fusion, "the fusion pipeline"))
    return std::move(e);
  if (partitioned)
    if (llvm::Error e = partitionStage(*c, buildsPlan))
      return std::move(e);
  mlir::PassManager specialize(c->context.get());
  addSpecializePass(specialize, *buckets);
  if (llvm::Error e = runPasses(*c, specialize, "specialization"))
    return std::move(e);
  // Every bucket holds its own weight ops: each quantized weight once.
  llvm::StringSet<> seen;
  c->module->walk([&](WeightOp w) {
    if (QuantAttr q = w.getQuantAttr(); q && seen.insert(w.getName()).second)
      c->quantized.push_back({w.getName().str(), w.getType().getDimSize(0),
                              w.getType().getDimSize(1), int(q.getBits()), q.getGroup(),
                              q.getFormat(), q.getTiled()});
  });
  if (!buildsPlan)
    return c;

  // The back end.
  if (llvm::Error e = backend->check(*c))
    return std::move(e);
  mlir::PassManager lower(c->context.get());
  backend->buildLoweringPipeline(lower, *c);
  if (llvm::Error e = runPasses(*c, lower, "lowering"))
    return std::move(e);
  if (stop == Stage::Lower)
    return c;
  if (llvm::Error e = backend->serialize(*c))
    return std::move(e);
  return c;
}

} // namespace weft::pipeline
