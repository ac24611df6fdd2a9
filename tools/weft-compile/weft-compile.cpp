// weft-compile: imports a model (checkpoint directory or built-in config)
// and compiles it; for now it stops at the graph.
#include "compiler/Analysis/RegionCost.h"
#include "compiler/Import/Checkpoint.h"
#include "compiler/Import/Importer.h"
#include "compiler/Partition/Annotate.h"
#include "compiler/Partition/Report.h"
#include "compiler/Support/Error.h"
#include "compiler/Transforms/Passes.h"
#include "targets/CUDA/Nvrtc.h"
#include "targets/Plan/PlanBuilder.h"
#include "runtime/base/Progress.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

#include <chrono>

namespace cl = llvm::cl;

namespace {

enum class Emit { Summary, Graph, Fused, Plan };

cl::OptionCategory category("weft-compile options");

cl::opt<std::string> modelSpec(
    "model", cl::desc("Model: a Hugging Face checkpoint directory or builtin:NAME"),
    cl::value_desc("DIR|builtin:NAME"), cl::cat(category));
cl::opt<std::string> positionalModel(cl::Positional, cl::desc("[MODEL]"),
                                     cl::cat(category));
cl::opt<Emit> emit(
    "emit", cl::desc("What to print"), cl::init(Emit::Summary),
    cl::values(clEnumValN(Emit::Summary, "summary", "graph summary (default)"),
               clEnumValN(Emit::Graph, "graph", "the imported weft graph (MLIR)"),
               clEnumValN(Emit::Fused, "fused",
                          "the fused, specialized graph and a report of its "
                          "kernel regions (as MLIR comments)"),
               clEnumValN(Emit::Plan, "plan",
                          "the plan dialect: buffers and steps of every bucket "
                          "(needs --topology)")),
    cl::cat(category));
cl::opt<std::string> outputFile("o", cl::desc("Output file (default: stdout)"),
                                cl::value_desc("FILE"), cl::init("-"),
                                cl::cat(category));
cl::opt<bool> sampling("sampling",
                       cl::desc("End the graph with weft.sample (temperature, top-k, "
                                "top-p per token; temperature 0 is greedy), so every "
                                "request may sample (default); --sampling=false ends "
                                "it with weft.argmax (greedy only)"),
                       cl::init(true), cl::cat(category));
cl::opt<int64_t> maxBatch("max-batch",
                          cl::desc("Largest decode batch: decode buckets are the "
                                   "powers of two below it and itself (default: "
                                   "--batch, at least 64)"),
                          cl::init(64), cl::cat(category));
cl::list<int64_t> decodeBuckets("decode-buckets",
                                cl::desc("Explicit decode bucket sizes"),
                                cl::CommaSeparated, cl::cat(category));
cl::list<int64_t> prefillChunks("prefill-chunks",
                                cl::desc("Prefill chunk sizes (default: the largest decode batch + 64 rounded up to 64 when under 512, and 512)"),
                                cl::CommaSeparated, cl::cat(category));
cl::opt<int64_t> contextLength("context",
                               cl::desc("Maximum tokens per sequence (KV cache "
                                        "sizing; attention context of the reports); "
                                        "default 4096 or the model's limit"),
                               cl::init(4096), cl::cat(category));
cl::opt<std::string> topologySpec(
    "topology",
    cl::desc("GPUs to compile for: rtx3090+rtx3060, 2xrtx3090:nvlink, h200, "
             "or a JSON file (docs/topology.md)"),
    cl::value_desc("SPEC"), cl::cat(category));
cl::opt<std::string> objective("objective",
                               cl::desc("Partition objective: latency or throughput"),
                               cl::init("throughput"), cl::cat(category));
cl::opt<int64_t> batch("batch",
                       cl::desc("Concurrent sequences the plan must serve"),
                       cl::init(1), cl::cat(category));
cl::opt<std::string> weightDType(
    "weight-dtype",
    cl::desc("Weight storage: fp16, bf16, fp32, fp8, int8, int4 (default: the "
             "checkpoint's; other dtypes are predictions for --report only, a plan "
             "holds the checkpoint's)"),
    cl::cat(category));
cl::opt<std::string> memoryCap("memory-cap",
                               cl::desc("Cap usable device memory: 10GB, or 0=20GB,1=8GiB"),
                               cl::cat(category));
cl::opt<std::string> stageSpec(
    "stages",
    cl::desc("Use this layout instead of the partitioner's search: '0+1' runs tensor "
             "parallel over devices 0 and 1, '1:9,0' puts 9 layers on device 1 and the "
             "rest on device 0"),
    cl::value_desc("SPEC"), cl::cat(category));
cl::opt<int64_t> maxGemvTokens(
    "max-gemv-tokens", cl::Hidden, cl::init(1),
    cl::desc("Projections of more tokens run through cuBLASLt instead of the generated "
             "GEMV (1 to 16; for tuning)"));
cl::opt<bool> hostOffload("host-offload",
                          cl::desc("Allow whole layers in host RAM when nothing else "
                                   "fits (default true; reports only: plans cannot "
                                   "offload yet)"),
                          cl::init(true), cl::cat(category));
cl::opt<std::string> archOverride(
    "arch",
    cl::desc("Emit code for this architecture (e.g. sm_90) instead of each "
             "device's own; keeps the partition"),
    cl::value_desc("sm_XX"), cl::cat(category));
cl::opt<std::string> kernelCacheDir(
    "kernel-cache",
    cl::desc("Kernel cache directory (default: $XDG_CACHE_HOME/weft/kernels); "
             "'none' disables it"),
    cl::value_desc("DIR"), cl::cat(category));
cl::opt<bool> report("report",
                     cl::desc("Print the partition report and write its SVG picture"),
                     cl::init(false), cl::cat(category));
cl::opt<std::string> svgFile("svg",
                             cl::desc("Where --report writes its picture "
                                      "(default: weft-report.svg)"),
                             cl::init("weft-report.svg"), cl::cat(category));
cl::opt<bool> listModels("list-models", cl::desc("List the built-in models and exit"),
                         cl::init(false), cl::cat(category));
cl::opt<std::string> signKey("sign",
                             cl::desc("Sign the plan with this ed25519 secret key file "
                                      "(--generate-signing-key writes one)"),
                             cl::value_desc("KEYFILE"), cl::cat(category));
cl::opt<std::string> generateKey(
    "generate-signing-key",
    cl::desc("Write a new ed25519 key pair (FILE: secret, FILE.pub: public) and exit"),
    cl::value_desc("FILE"), cl::cat(category));

int fail(const llvm::Twine &msg) {
  llvm::WithColor::error(llvm::errs(), "weft-compile") << msg << "\n";
  return 1;
}

} // namespace

#ifndef WEFT_VERSION
#define WEFT_VERSION "unknown"
#endif

int main(int argc, char **argv) {
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "weft-compile " << WEFT_VERSION << " (LLVM " << LLVM_VERSION_STRING << ")\n";
  });
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "Weft: compile an LLM for a GPU topology\n");
  if (!generateKey.empty()) {
    if (llvm::sys::fs::exists(generateKey))
      return fail(generateKey + ": exists already; not overwriting a key");
    weft::StatusOr<weft::plan::SigningKey> key = weft::plan::generateSigningKey();
    if (!key.isOk())
      return fail(key.status().message());
    if (weft::Status st = weft::plan::writeSigningKey(generateKey, *key); !st.isOk())
      return fail(st.message());
    llvm::sys::fs::setPermissions(generateKey, llvm::sys::fs::owner_read | llvm::sys::fs::owner_write);
    llvm::outs() << "wrote " << generateKey << " (secret: keep it) and " << generateKey
                 << ".pub (public: give it to weft-run/weft-serve --trusted-keys)\n";
    return 0;
  }
  if (listModels) {
    for (const std::string &name : weft::builtinModelNames())
      llvm::outs() << "builtin:" << name << "\n";
    return 0;
  }
  std::string spec = !modelSpec.empty() ? modelSpec : positionalModel;
  if (spec.empty())
    return fail("no model given (use --model DIR or --model builtin:NAME)");
  if (!modelSpec.empty() && !positionalModel.empty())
    return fail("give the model once, either positionally or with --model");

  auto start = std::chrono::steady_clock::now();
  llvm::Expected<weft::ModelSource> source = weft::loadModelSource(spec);
  if (!source)
    return fail(llvm::toString(source.takeError()));

  mlir::MLIRContext context;
  weft::ImportOptions options;
  options.sampling = sampling;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      weft::importModel(context, source->config, options);
  if (mlir::failed(mlir::verify(*module)))
    return fail("internal error: the imported graph does not verify");
  // The import summary describes the model as imported, before fusion.
  std::string importSummary;
  {
    llvm::raw_string_ostream os(importSummary);
    weft::printGraphSummary(*module, source->config, os);
  }
  // Unless given, the context is 4096 tokens or the model's limit if smaller.
  int64_t maxContext = contextLength.getNumOccurrences()
                        ? int64_t(contextLength)
                        : std::min<int64_t>(contextLength, source->config.maxPositionEmbeddings);
  bool writePlan = llvm::StringRef(outputFile).ends_with(".weft");
  // A file named otherwise with --topology and no --emit was almost surely
  // meant to be a plan; writing the text summary there would look like one.
  if (!writePlan && !topologySpec.empty() && !emit.getNumOccurrences() &&
      !report && outputFile != "-")
    return fail("-o " + outputFile + ": plan files end in .weft (-o NAME.weft); for the " +
                "text summary give --emit=summary");
  if (writePlan && topologySpec.empty())
    return fail("writing a plan (" + outputFile + ") needs --topology");
  if (emit == Emit::Plan && topologySpec.empty())
    return fail("--emit=plan needs --topology");
  if (!signKey.empty() && !writePlan && emit != Emit::Plan)
    return fail("--sign signs a plan: give -o FILE.weft");
  if (!archOverride.empty()) {
    int cc = 0;
    if (!llvm::StringRef(archOverride).starts_with("sm_") ||
        llvm::StringRef(archOverride).drop_front(3).getAsInteger(10, cc) || cc < 80)
      return fail("--arch: expected sm_80 or newer (e.g. sm_86, sm_90), got '" +
                  archOverride + "'");
  }
  bool partitioned = !topologySpec.empty();
  if (report && !partitioned)
    return fail("--report needs --topology");
  if (!stageSpec.empty() && !partitioned)
    return fail("--stages needs --topology");
  std::optional<weft::hardware::Topology> topology;
  std::optional<weft::partition::PartitionOptions> partitionOptions;
  std::optional<weft::partition::PartitionResult> partition;
  std::optional<weft::partition::ModelProfile> modelProfile;
  // Projections stored as codes (a quantized checkpoint, or quantized
  // here), which the plan reads from a file beside it.
  bool quantizedWeights = source->config.quant.active();
  if (emit == Emit::Fused || partitioned) {
    if (maxBatch < 1)
      return fail("--max-batch must be at least 1");
    // Decode buckets reach the declared batch unless told otherwise.
    int64_t largestBatch = maxBatch.getNumOccurrences()
                               ? int64_t(maxBatch)
                               : std::max<int64_t>(maxBatch, batch);
    if (maxBatch.getNumOccurrences() && decodeBuckets.empty() && maxBatch < batch)
      return fail(llvm::formatv("--max-batch {0} is below --batch {1}: the plan could not "
                                "run the batch it is sized for in one step",
                                int64_t(maxBatch), int64_t(batch)));
    for (int64_t n : decodeBuckets)
      if (n < 1)
        return fail("--decode-buckets: sizes must be positive");
    for (int64_t n : prefillChunks)
      if (n < 1)
        return fail("--prefill-chunks: sizes must be positive");
    if (maxContext < 1)
      return fail("--context must be at least 1");
    weft::CompileOptions compile;
    compile.maxBatch = largestBatch;
    compile.decodeBuckets.assign(decodeBuckets.begin(), decodeBuckets.end());
    compile.prefillChunks.assign(prefillChunks.begin(), prefillChunks.end());
    mlir::PassManager fusion(&context);
    weft::buildFusionPipeline(fusion);
    if (mlir::failed(fusion.run(*module)))
      return fail("the fusion pipeline failed (see the diagnostics above)");

    if (partitioned) {
      llvm::Expected<weft::hardware::Topology> topo =
          weft::hardware::parseTopologySpec(topologySpec);
      if (!topo)
        return fail(llvm::toString(topo.takeError()));
      if (!memoryCap.empty())
        if (llvm::Error e = weft::hardware::applyMemoryCaps(*topo, memoryCap))
          return fail(llvm::toString(std::move(e)));
      topology = std::move(*topo);
      llvm::Expected<weft::partition::PartitionOptions> options =
          weft::partition::makePartitionOptions(source->config, objective, batch,
                                                maxContext, weightDType);
      if (!options)
        return fail(llvm::toString(options.takeError()));
      partitionOptions = *options;
      // A plan holds what the runtime executes: the checkpoint's own weight
      // dtype, every layer on a GPU. Other choices are predictions only.
      bool buildsPlan = writePlan || emit == Emit::Plan;
      // int4, int8 and fp8 from a 16-bit checkpoint: quantized here, by
      // round to nearest, into the file beside the plan.
      using weft::partition::WeightDType;
      const WeightDType wanted = options->weights.dtype;
      bool quantizeHere = buildsPlan && !source->config.quant.active() &&
                          (wanted == WeightDType::Int4 || wanted == WeightDType::Int8 ||
                           wanted == WeightDType::FP8);
      if (quantizeHere) {
        if (source->config.dtype != weft::io::DType::F16 &&
            source->config.dtype != weft::io::DType::BF16)
          return fail(llvm::formatv(
              "--weight-dtype {0}: quantizing at compile time needs an F16 or BF16 checkpoint "
              "(the quantized kernels compute in its 16-bit type); {1} is {2}",
              weightDType, spec, weft::io::dtypeName(source->config.dtype)));
        if (wanted == WeightDType::FP8)
          for (const weft::hardware::DeviceProfile &d : topology->devices)
            if (!d.hasFp8())
              return fail(llvm::formatv(
                  "--weight-dtype fp8: device '{0}' of topology '{1}' is sm_{2}, and FP8 "
                  "needs sm_89 or newer (Ada, Hopper); use --weight-dtype int8 instead",
                  d.name, topology->name, d.computeCapability));
        quantizedWeights = true;
        const int bits = wanted == WeightDType::Int4 ? 4 : 8;
        weft::quantizeProjections(*module, bits,
                                  wanted == WeightDType::FP8 ? weft::QuantFormat::E4M3
                                                             : weft::QuantFormat::Int);
        llvm::WithColor::note(llvm::errs(), "weft-compile")
            << llvm::formatv("--weight-dtype {0}: projections quantized by round to nearest ({1}); "
                             "an AWQ or GPTQ checkpoint of the model, calibrated on data, is "
                             "more accurate\n",
                             weightDType,
                             wanted == WeightDType::Int4   ? "4-bit, groups of 128 inputs, asymmetric"
                             : wanted == WeightDType::Int8 ? "8-bit, one group per row, symmetric"
                                                           : "FP8 E4M3, one scale per row");
      }
      if (buildsPlan && !quantizeHere &&
          options->weights.dtype != weft::partition::nativeWeightDType(source->config))
        return fail(llvm::formatv(
            "--weight-dtype {0}: a plan holds the checkpoint's own {1} weights; "
            "quantized and converted weights are not implemented in the runtime yet "
            "(drop -o {2} and add --report to see the prediction)",
            weightDType, weft::partition::weightDTypeName(
                             weft::partition::nativeWeightDType(source->config)),
            outputFile));
      if (buildsPlan && hostOffload.getNumOccurrences() && hostOffload)
        return fail("--host-offload: plans cannot keep layers in host RAM yet (the "
                    "runtime does not implement it); the option applies to --report only");
      partitionOptions->allowHostOffload = hostOffload && !buildsPlan;
      partitionOptions->runnableOnly = buildsPlan;
      if (!stageSpec.empty()) {
        llvm::Expected<std::vector<weft::partition::Stage>> forced =
            weft::partition::parseStageSpec(stageSpec, source->config, *topology);
        if (!forced)
          return fail(llvm::toString(forced.takeError()));
        partitionOptions->forcedStages = std::move(*forced);
      }
      llvm::Expected<weft::partition::ModelProfile> profile =
          weft::partition::profileModel(*module, source->config);
      if (!profile)
        return fail(llvm::toString(profile.takeError()));
      llvm::Expected<weft::partition::PartitionResult> result =
          weft::partition::partitionModel(*profile, *topology, *partitionOptions);
      if (!result)
        return fail(llvm::toString(result.takeError()));
      partition = std::move(*result);
      modelProfile = std::move(*profile);
      if (mlir::failed(weft::partition::annotatePartition(*module, *partition,
                                                          *topology, *partitionOptions)))
        return fail("internal error: annotating the partition failed");
    }

    mlir::PassManager specialize(&context);
    weft::addSpecializePass(specialize, compile);
    if (mlir::failed(specialize.run(*module)))
      return fail("specialization failed (see the diagnostics above)");
  }
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start).count();

  // The partition report as text on `os`, and its picture in --svg.
  auto printReport = [&](llvm::raw_ostream &os) {
    weft::partition::printPartitionReport(*partition, *topology, *partitionOptions,
                                          source->config, os);
    std::string svgError;
    auto svg = mlir::openOutputFile(svgFile, &svgError);
    if (!svg) {
      fail(svgFile + ": " + svgError);
      return false;
    }
    weft::partition::writePartitionSvg(*partition, *topology, *partitionOptions,
                                       source->config, svg->os());
    svg->keep();
    os << "picture      " << svgFile << "\n";
    return true;
  };

  if (writePlan || emit == Emit::Plan) {
    auto start = std::chrono::steady_clock::now();
    std::optional<weft::cuda::KernelCache> cache;
    if (kernelCacheDir != "none")
      cache.emplace(kernelCacheDir.empty() ? weft::cuda::KernelCache::defaultDirectory()
                                           : std::string(kernelCacheDir));
    weft::plan::PlanBuildOptions planOptions;
    if (!archOverride.empty())
      planOptions.archOverride = archOverride;
    std::optional<weft::plan::SigningKey> signingKey;
    if (!signKey.empty()) {
      weft::StatusOr<weft::plan::SigningKey> key = weft::plan::readSigningKey(signKey);
      if (!key.isOk())
        return fail("--sign: " + key.status().message());
      signingKey = *key;
      planOptions.signingKey = &*signingKey;
    }
    planOptions.kernelCache = cache ? &*cache : nullptr;
    if (maxGemvTokens < 1 || maxGemvTokens > 16)
      return fail("--max-gemv-tokens: expected 1 to 16");
    planOptions.maxGemvTokens = maxGemvTokens;
    if (writePlan && quantizedWeights)
      planOptions.kernelWeightsPath =
          llvm::StringRef(outputFile).drop_back(std::strlen(".weft")).str() +
          ".weights.safetensors";
    // Each bucket's predicted step time, for weft-run --bench to set beside
    // the measured one: decode at contexts 64, 128, ... up to the plan's.
    planOptions.predict = [&](bool prefill, int64_t tokens) {
      std::vector<weft::plan::PlanBuildOptions::Prediction> out;
      std::vector<int64_t> contexts;
      if (prefill) {
        contexts.push_back(0);
      } else {
        for (int64_t c = 64; c < partitionOptions->context; c *= 2)
          contexts.push_back(c);
        contexts.push_back(partitionOptions->context);
      }
      for (int64_t c : contexts) {
        weft::partition::StepSplit raw;
        weft::partition::StepSplit at = weft::partition::predictStepSeconds(
            *modelProfile, *topology, *partitionOptions, partition->best.stages, tokens, c,
            prefill, &raw);
        out.push_back({c, at.total(), raw.other, raw.attention});
      }
      return out;
    };
    weft::Progress progress = weft::Progress::forStderr("weft-compile: ");
    planOptions.progress = [&](llvm::StringRef phase, size_t done, size_t total) {
      progress.update(phase.str(), done, total);
    };
    weft::plan::PlanStats stats;
    mlir::OwningOpRef<mlir::ModuleOp> planIR;
    llvm::Expected<std::vector<uint8_t>> plan =
        weft::plan::buildPlan(*module, *source, *topology, *partition, *partitionOptions,
                              planOptions, &stats, &planIR);
    if (!plan)
      return fail(llvm::toString(plan.takeError()));
    if (!writePlan) {
      std::string error;
      auto out = mlir::openOutputFile(outputFile, &error);
      if (!out)
        return fail(outputFile + ": " + error);
      planIR->print(out->os());
      out->os() << "\n";
      out->keep();
      return 0;
    }
    std::string error;
    auto file = mlir::openOutputFile(outputFile, &error);
    if (!file)
      return fail(outputFile + ": " + error);
    file->os().write(reinterpret_cast<const char *>(plan->data()), plan->size());
    file->keep();
    double planSeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    llvm::outs() << importSummary;
    llvm::outs() << llvm::formatv(
        "plan         {0}: {1}, {2} kernels, {3} binaries from {4} distinct sources ({5} "
        "from the kernel cache), {6} steps\n",
        outputFile, weft::formatBytes(double(plan->size())), stats.kernels, stats.binaries,
        stats.compiledSources, stats.cachedBinaries, stats.steps);
    if (!planOptions.kernelWeightsPath.empty()) {
      uint64_t size = 0;
      llvm::sys::fs::file_size(planOptions.kernelWeightsPath, size);
      llvm::outs() << llvm::formatv("weights      {0}: {1}, the {2} projections as the kernels "
                                    "read them (keep it beside the plan)\n",
                                    planOptions.kernelWeightsPath,
                                    weft::formatBytes(double(size)),
                                    source->config.quant.active()
                                        ? source->config.quant.describe()
                                        : "--weight-dtype " + std::string(weightDType));
    }
    {
      // The buckets, so the batch sizes a plan serves are never a surprise.
      std::vector<std::string> decode, prefill;
      for (auto fn : module->getOps<mlir::func::FuncOp>()) {
        llvm::StringRef name = fn.getSymName();
        if (name.consume_front("decode_b"))
          decode.push_back(name.str());
        else if (name.consume_front("prefill_c"))
          prefill.push_back(name.str());
      }
      llvm::outs() << "buckets      decode " << llvm::join(decode, ", ") << " (--max-batch); "
                   << "prefill chunks " << llvm::join(prefill, ", ") << " (--prefill-chunks)\n";
    }
    for (size_t d = 0; d < stats.peakArenaBytes.size(); ++d)
      llvm::outs() << llvm::formatv("arena        device {0} ({1}): {2} peak\n", d,
                                    topology->devices[d].name,
                                    weft::formatBytes(double(stats.peakArenaBytes[d])));
    if (!source->checkpoint)
      llvm::outs() << "weights      none bound: " << spec
                   << " has no checkpoint, so the plan runs with weft-run --random-weights "
                      "(compile from a checkpoint directory to run real weights)\n";
    if (stats.tokenizer.empty())
      llvm::outs() << "tokenizer    none (the checkpoint has no tokenizer.json: run with "
                      "--prompt-ids)\n";
    else if (stats.tokenizerUsable)
      llvm::outs() << "tokenizer    " << stats.tokenizer << " (weft-run --prompt)\n";
    else
      llvm::errs() << "weft-compile: warning: " << stats.tokenizer
                   << " (the plan runs from token ids only)\n";
    if (stats.chatTemplate == "usable")
      llvm::outs() << "chat         template from the checkpoint (weft-serve /v1/chat/completions)\n";
    else if (!stats.chatTemplate.empty())
      llvm::errs() << "weft-compile: warning: chat template: " << stats.chatTemplate
                   << " (the plan serves completions only)\n";
    llvm::outs() << llvm::formatv("compiled in  {0:f2} s\n", seconds + planSeconds);
    if (report && !printReport(llvm::outs()))
      return 1;
    return 0;
  }

  std::string error;
  auto out = mlir::openOutputFile(outputFile, &error);
  if (!out)
    return fail(outputFile + ": " + error);
  switch (emit) {
  case Emit::Graph:
    module->print(out->os());
    out->os() << "\n";
    break;
  case Emit::Fused: {
    module->print(out->os());
    out->os() << "\n";
    // The report as comments keeps the output valid MLIR.
    std::string report;
    llvm::raw_string_ostream reportOs(report);
    weft::CostContext costs;
    costs.contextLength = maxContext;
    weft::printFusionReport(*module, costs, reportOs);
    for (llvm::StringRef line : llvm::split(llvm::StringRef(report).rtrim(), '\n'))
      out->os() << "// " << line << "\n";
    break;
  }
  case Emit::Summary:
    out->os() << importSummary;
    if (source->checkpoint) {
      const weft::Checkpoint &ck = *source->checkpoint;
      out->os() << llvm::formatv(
          "checkpoint   {0}: {1} file(s){2}, {3} tensors checked, {4} unused\n",
          ck.dir, ck.files.size(), ck.sharded ? " (sharded)" : "",
          weft::expectedTensors(source->config).size(), ck.unusedTensors);
    }
    out->os() << llvm::formatv("imported in  {0:f3} s\n", seconds);
    break;
  case Emit::Plan: // written above
    break;
  }
  if (report && !printReport(out->os()))
    return 1;
  out->keep();
  return 0;
}
