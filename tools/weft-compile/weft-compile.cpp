// weft-compile: compiles a model (checkpoint directory or built-in config)
// for a GPU topology into a plan, or stops earlier and prints the graph,
// the fused graph, the partition report or the plan IR. The stages are
// compiler/Pipeline's; the plan back end is targets/Plan's.
#include "compiler/Analysis/RegionCost.h"
#include "compiler/Import/Importer.h"
#include "compiler/Partition/Report.h"
#include "compiler/Pipeline/Pipeline.h"
#include "compiler/Support/Error.h"
#include "runtime/base/Progress.h"
#include "targets/CUDA/KernelLibrary.h"
#include "targets/CUDA/Nvrtc.h"
#include "targets/Plan/PlanBackend.h"
#include "targets/Plan/Passes.h"

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
             "checkpoint's). int4, int8 and fp8 (sm_89+) on an F16 or BF16 checkpoint "
             "quantize the projections by round to nearest into a file beside the plan; "
             "a float conversion is a prediction for --report only"),
    cl::cat(category));
cl::opt<std::string> lmHeadDType(
    "lm-head-dtype",
    cl::desc("Quantize the LM head too: int8 (a scale per row), int4 (groups of 128) or fp8 "
             "(sm_89+), by round to nearest, whatever --weight-dtype is (default: the head "
             "keeps the checkpoint's 16-bit weights)"),
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
cl::opt<bool> decodeStream(
    "decode-stream", cl::init(true),
    cl::desc("Run each batch-1 decode step as one persistent kernel where the layers allow "
             "it (sm_90; Llama-style layers of 16-bit weights, 4-bit codes in groups of 128 or "
             "8-bit codes with a scale per row, docs/codegen.md; default true). Given "
             "explicitly, a warning says why a plan cannot"),
    cl::cat(category));
cl::opt<int> decodeStreamWarps(
    "decode-stream-warps", cl::Hidden, cl::init(0),
    cl::desc("Consumer warps of the decode stream kernel's blocks: 8 (default) or 16, "
             "for A/B runs"));
cl::opt<std::string> logitsRows(
    "logits-rows", cl::Hidden, cl::init("last"),
    cl::desc("Rows whose logits a step of more rows than sequences (a prefill chunk) "
             "computes: last (default: each sequence's last row, the one sampled and read) "
             "or all (every row, for A/B runs)"));
cl::opt<bool> fuseProjectionRope(
    "fuse-projection-rope", cl::Hidden, cl::init(true),
    cl::desc("RoPE and the KV-cache write as the QKV projection's epilogue (default true; "
             "false keeps their own kernel, for A/B measurements)"));
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
cl::opt<std::string> kernelLibraryDir(
    "kernel-library",
    cl::desc("Compile the plan's kernels from DIR/weft/*.cuh over the embedded kernel "
             "library (a header of the same name replaces the embedded one): for working "
             "on kernels without rebuilding the compiler"),
    cl::value_desc("DIR"), cl::cat(category));
cl::opt<int64_t> sharedPrefix(
    "shared-prefix",
    cl::desc("With --report: predict a prompt's prefill with this many leading tokens already "
             "in the prefix cache (a shared system prompt, a conversation's history), beside the "
             "whole prompt's (--prompt-tokens)"),
    cl::value_desc("N"), cl::init(0), cl::cat(category));
cl::opt<int64_t> promptTokens("prompt-tokens",
                              cl::desc("With --shared-prefix: the prompt's length in tokens"),
                              cl::value_desc("N"), cl::init(0), cl::cat(category));
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

int writeSigningKey() {
  if (llvm::sys::fs::exists(generateKey))
    return fail(generateKey + ": exists already; not overwriting a key");
  weft::StatusOr<weft::plan::SigningKey> key = weft::plan::generateSigningKey();
  if (!key.isOk())
    return fail(key.status().message());
  if (weft::Status st = weft::plan::writeSigningKey(generateKey, *key); !st.isOk())
    return fail(st.message());
  llvm::sys::fs::setPermissions(generateKey,
                                llvm::sys::fs::owner_read | llvm::sys::fs::owner_write);
  llvm::outs() << "wrote " << generateKey << " (secret: keep it) and " << generateKey
               << ".pub (public: give it to weft-run/weft-serve --trusted-keys)\n";
  return 0;
}

// What a written plan holds, for the person who compiled it.
void printPlanSummary(weft::pipeline::Compilation &c, const weft::plan::PlanStats &stats,
                      size_t planBytes, double seconds) {
  llvm::raw_ostream &os = llvm::outs();
  os << c.importSummary;
  os << llvm::formatv("plan         {0}: {1}, {2} kernels, {3} binaries from {4} distinct "
                      "sources ({5} from the kernel cache), {6} steps\n",
                      outputFile, weft::formatBytes(double(planBytes)), stats.kernels,
                      stats.binaries, stats.compiledSources, stats.cachedBinaries, stats.steps);
  if (!stats.kernelWeightsPath.empty()) {
    uint64_t size = 0;
    llvm::sys::fs::file_size(stats.kernelWeightsPath, size);
    std::vector<std::string> what;
    if (c.source.config.quant.active())
      what.push_back("the " + c.source.config.quant.describe() + " projections");
    else if (!weightDType.empty() && weightDType != "fp16" && weightDType != "bf16" &&
             weightDType != "fp32")
      what.push_back("the --weight-dtype " + weightDType + " projections");
    if (!lmHeadDType.empty())
      what.push_back("the --lm-head-dtype " + lmHeadDType + " LM head");
    os << llvm::formatv("weights      {0}: {1}, {2} as the kernels read them "
                        "(keep it beside the plan)\n",
                        stats.kernelWeightsPath, weft::formatBytes(double(size)),
                        llvm::join(what, " and "));
  }
  // The buckets, so the batch sizes a plan serves are never a surprise.
  std::vector<std::string> decode, prefill;
  for (auto bucket : c.module->getOps<weft::plan_ir::BucketOp>()) {
    llvm::StringRef name = bucket.getSymName();
    if (name.consume_front("decode_b"))
      decode.push_back(name.str());
    else if (name.consume_front("prefill_c"))
      prefill.push_back(name.str());
  }
  os << "buckets      decode " << llvm::join(decode, ", ") << " (--max-batch); "
     << "prefill chunks " << llvm::join(prefill, ", ") << " (--prefill-chunks)\n";
  for (size_t d = 0; d < stats.peakArenaBytes.size(); ++d)
    os << llvm::formatv("arena        device {0} ({1}): {2} peak\n", d,
                        c.topology->devices[d].name,
                        weft::formatBytes(double(stats.peakArenaBytes[d])));
  if (!c.source.checkpoint)
    os << "weights      none bound: " << c.options.model
       << " has no checkpoint, so the plan runs with weft-run --random-weights (compile from "
          "a checkpoint directory to run real weights)\n";
  if (stats.tokenizer.empty())
    os << "tokenizer    none (the checkpoint has no tokenizer.json: run with --prompt-ids)\n";
  else if (stats.tokenizerUsable)
    os << "tokenizer    " << stats.tokenizer << " (weft-run --prompt)\n";
  else
    llvm::errs() << "weft-compile: warning: " << stats.tokenizer
                 << " (the plan runs from token ids only)\n";
  if (stats.chatTemplate == "usable")
    os << "chat         template from the checkpoint (weft-serve /v1/chat/completions)\n";
  else if (!stats.chatTemplate.empty())
    llvm::errs() << "weft-compile: warning: chat template: " << stats.chatTemplate
                 << " (the plan serves completions only)\n";
  os << llvm::formatv("compiled in  {0:f2} s\n", seconds);
}

// The predicted time to prefill `tokens` prompt tokens after `cached` ones
// the KV cache already holds: chunks of up to the largest prefill bucket,
// each priced at its own length after the positions before it.
double prefillSeconds(const weft::pipeline::Compilation &c, int64_t cached, int64_t tokens,
                      int64_t *chunks) {
  int64_t chunk = std::max<int64_t>(1, c.partitionOptions->prefillChunk);
  double seconds = 0;
  *chunks = 0;
  for (int64_t done = 0; done < tokens; done += chunk, ++*chunks)
    seconds += c.predictStep(/*prefill=*/true, std::min(chunk, tokens - done), cached + done,
                             nullptr)
                   .total();
  return seconds;
}

// The partition report as text on `os`, and its picture in --svg.
bool printReport(const weft::pipeline::Compilation &c, llvm::raw_ostream &os) {
  if (sharedPrefix > 0 && promptTokens > c.partitionOptions->context) {
    fail("--prompt-tokens " + std::to_string(promptTokens) + ": beyond the plan's context of " +
         std::to_string(c.partitionOptions->context) + " tokens (--context)");
    return false;
  }
  weft::partition::printPartitionReport(*c.partition, *c.topology, *c.partitionOptions,
                                        c.source.config, os);
  if (sharedPrefix > 0) {
    // Only whole KV blocks are shared, never the block of the last prompt
    // token (the runtime computes it to sample after it).
    const int64_t block = weft::plan::LowerToPlanOptions().blockTokens;
    const int64_t cached = std::min(sharedPrefix / block, (promptTokens - 1) / block) * block;
    int64_t wholeChunks = 0, restChunks = 0;
    double whole = prefillSeconds(c, 0, promptTokens, &wholeChunks);
    double rest = prefillSeconds(c, cached, promptTokens - cached, &restChunks);
    os << llvm::formatv("prefix cache a {0}-token prompt: prefill {1:f1} ms ({2} chunk{3}); with "
                        "its first {4} tokens cached ({5} of the {6} shared, whole {7}-token "
                        "blocks): {8:f1} ms ({9} token{10}), {11:f1}x less\n",
                        promptTokens.getValue(), whole * 1e3, wholeChunks,
                        wholeChunks == 1 ? "" : "s", cached, cached, sharedPrefix.getValue(),
                        block, rest * 1e3, promptTokens - cached,
                        promptTokens - cached == 1 ? "" : "s", rest > 0 ? whole / rest : 0.0);
  }
  std::string svgError;
  auto svg = mlir::openOutputFile(svgFile, &svgError);
  if (!svg) {
    fail(svgFile + ": " + svgError);
    return false;
  }
  weft::partition::writePartitionSvg(*c.partition, *c.topology, *c.partitionOptions,
                                     c.source.config, svg->os());
  svg->keep();
  os << "picture      " << svgFile << "\n";
  return true;
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
  cl::ParseCommandLineOptions(argc, argv, "Weft: compile an LLM for a GPU topology\n");
  if (!generateKey.empty() || listModels) {
    // Both act alone and exit: any other option would be ignored.
    const char *alone = !generateKey.empty() ? "--generate-signing-key" : "--list-models";
    for (const auto &entry : cl::getRegisteredOptions())
      if (entry.second->getNumOccurrences() > 0 && entry.second != &generateKey &&
          entry.second != &listModels)
        return fail(llvm::Twine(alone) + " acts alone and exits: drop --" + entry.getKey());
    if (!positionalModel.empty() || (!generateKey.empty() && listModels))
      return fail(llvm::Twine(alone) + " acts alone and exits: drop the other arguments");
  }
  if (!generateKey.empty())
    return writeSigningKey();
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

  // What to build, from -o and --emit.
  bool writePlan = llvm::StringRef(outputFile).ends_with(".weft");
  bool partitioned = !topologySpec.empty();
  // A file named otherwise with --topology and no --emit was almost surely
  // meant to be a plan; writing the text summary there would look like one.
  if (!writePlan && partitioned && !emit.getNumOccurrences() && !report && outputFile != "-")
    return fail("-o " + outputFile + ": plan files end in .weft (-o NAME.weft); for the " +
                "text summary give --emit=summary");
  if (writePlan && !partitioned)
    return fail("writing a plan (" + outputFile + ") needs --topology");
  if (emit == Emit::Plan && !partitioned)
    return fail("--emit=plan needs --topology");
  if (!signKey.empty() && !writePlan)
    return fail("--sign signs a plan: give -o FILE.weft");
  if (report && !partitioned)
    return fail("--report needs --topology");
  if (!stageSpec.empty() && !partitioned)
    return fail("--stages needs --topology");
  bool buildsPlan = writePlan || emit == Emit::Plan;
  if (!archOverride.empty() && !buildsPlan)
    return fail("--arch chooses the code a plan holds: give -o FILE.weft or --emit=plan");
  // --emit=plan prints no compiled code, so the kernels' sources would not
  // show: the overlay takes a plan file.
  if (logitsRows.getNumOccurrences() && !buildsPlan)
    return fail("--logits-rows shapes a plan's kernels: give -o FILE.weft or --emit=plan");
  if (!kernelLibraryDir.empty() && !writePlan)
    return fail("--kernel-library compiles a plan's kernels: give -o FILE.weft");
  // Every option given takes effect in the mode asked for; one the mode
  // would ignore is an error that says what uses it.
  auto given = [](const cl::Option &o) { return o.getNumOccurrences() > 0; };
  // The first of `options` given on the command line, if any.
  using Options = std::initializer_list<std::reference_wrapper<const cl::Option>>;
  auto firstGiven = [&](Options options) -> const cl::Option * {
    for (const cl::Option &o : options)
      if (given(o))
        return &o;
    return nullptr;
  };
  if (!partitioned && (emit == Emit::Summary || emit == Emit::Graph))
    if (const cl::Option *o = firstGiven({maxBatch, decodeBuckets, prefillChunks, contextLength,
                                          fuseProjectionRope, batch}))
      return fail("--" + o->ArgStr + " shapes the buckets and the partition, which " +
                  (emit == Emit::Graph ? "--emit=graph" : "the summary") +
                  " does not show: give --emit=fused, or --topology");
  if (!partitioned)
    if (const cl::Option *o = firstGiven({objective, memoryCap, hostOffload}))
      return fail("--" + o->ArgStr + " shapes the partition: give --topology");
  if (given(kernelCacheDir) && !writePlan)
    return fail("--kernel-cache keeps a plan's compiled kernels: give -o FILE.weft");
  if (!buildsPlan)
    if (const cl::Option *o = firstGiven({decodeStream, maxGemvTokens, decodeStreamWarps}))
      return fail("--" + o->ArgStr + " shapes a plan's kernels: give -o FILE.weft or --emit=plan");
  if (given(svgFile) && !report)
    return fail("--svg names the picture of --report: add --report");
  if ((given(sharedPrefix) || given(promptTokens)) && !report)
    return fail(std::string("--") + (given(sharedPrefix) ? "shared-prefix" : "prompt-tokens") +
                " is a workload of --report: add --report");
  if (given(sharedPrefix) != given(promptTokens))
    return fail("--shared-prefix and --prompt-tokens go together: the prompt's length and how "
                "many of its leading tokens are cached");
  if (given(sharedPrefix) && (sharedPrefix < 1 || promptTokens <= sharedPrefix))
    return fail("--shared-prefix " + std::to_string(sharedPrefix) + " --prompt-tokens " +
                std::to_string(promptTokens) +
                ": expected a shared prefix of at least 1 token, shorter than the prompt");

  weft::pipeline::Options options;
  options.model = spec;
  options.sampling = sampling;
  using weft::pipeline::Stage;
  options.stopAfter = writePlan            ? Stage::Serialize
                      : emit == Emit::Plan ? Stage::Lower
                      : partitioned        ? Stage::Partition
                      : emit == Emit::Fused ? Stage::Fuse
                                           : Stage::Import;
  if (maxBatch.getNumOccurrences())
    options.maxBatch = maxBatch;
  options.decodeBuckets.assign(decodeBuckets.begin(), decodeBuckets.end());
  options.prefillChunks.assign(prefillChunks.begin(), prefillChunks.end());
  if (contextLength.getNumOccurrences())
    options.context = contextLength;
  options.topology = topologySpec;
  options.memoryCap = memoryCap;
  options.objective = objective;
  options.batch = batch;
  options.weightDType = weightDType;
  options.lmHeadDType = lmHeadDType;
  options.stages = stageSpec;
  options.hostOffload = hostOffload;
  options.fuseProjectionRope = fuseProjectionRope;
  options.decodeStream = decodeStream;
  options.hostOffloadGiven = hostOffload.getNumOccurrences() > 0;
  options.graphAsPlan = emit == Emit::Fused || emit == Emit::Graph;

  // The plan back end and what it needs from the command line.
  if (!kernelLibraryDir.empty()) {
    llvm::Expected<int> headers = weft::cuda::overlayKernelLibrary(kernelLibraryDir);
    if (!headers)
      return fail(llvm::toString(headers.takeError()));
    llvm::errs() << "weft-compile: kernels compiled with " << *headers << " header"
                 << (*headers == 1 ? "" : "s") << " from " << kernelLibraryDir
                 << "/weft over the embedded kernel library\n";
  }
  std::optional<weft::cuda::KernelCache> cache;
  if (kernelCacheDir != "none")
    cache.emplace(kernelCacheDir.empty() ? weft::cuda::KernelCache::defaultDirectory()
                                         : std::string(kernelCacheDir));
  weft::plan::PlanBuildOptions planOptions;
  if (!archOverride.empty())
    planOptions.lowering.archOverride = archOverride;
  planOptions.lowering.maxGemvTokens = maxGemvTokens;
  planOptions.lowering.decodeStream = decodeStream;
  if (decodeStreamWarps != 0 && decodeStreamWarps != 8 && decodeStreamWarps != 16)
    return fail("--decode-stream-warps: expected 8 or 16, got " +
                std::to_string(decodeStreamWarps));
  if (given(decodeStreamWarps) && !decodeStream)
    return fail("--decode-stream-warps shapes the decode stream kernel, which "
                "--decode-stream=false turns off");
  planOptions.lowering.decodeStreamWarps = decodeStreamWarps;
  if (logitsRows != "all" && logitsRows != "last")
    return fail("--logits-rows: expected all or last, got '" + logitsRows + "'");
  planOptions.lowering.sampledRowsLogits = logitsRows == "last";
  // Either option given explicitly: say why a plan cannot take the kernel.
  if (given(decodeStream) || given(decodeStreamWarps))
    planOptions.lowering.warn = [](const std::string &message) {
      llvm::errs() << "weft-compile: warning: " << message << "\n";
    };
  planOptions.kernelCache = cache ? &*cache : nullptr;
  if (writePlan)
    planOptions.kernelWeightsPath =
        llvm::StringRef(outputFile).drop_back(std::strlen(".weft")).str() +
        ".weights.safetensors";
  std::optional<weft::plan::SigningKey> signingKey;
  if (!signKey.empty()) {
    weft::StatusOr<weft::plan::SigningKey> key = weft::plan::readSigningKey(signKey);
    if (!key.isOk())
      return fail("--sign: " + key.status().message());
    signingKey = *key;
    planOptions.signingKey = &*signingKey;
  }
  weft::Progress progress = weft::Progress::forStderr("weft-compile: ");
  planOptions.progress = [&](llvm::StringRef phase, size_t done, size_t total) {
    progress.update(phase.str(), done, total);
  };
  weft::plan::PlanBackend backend(std::move(planOptions));

  auto start = std::chrono::steady_clock::now();
  llvm::Expected<std::unique_ptr<weft::pipeline::Compilation>> compiled =
      weft::pipeline::compile(options, &backend);
  if (!compiled)
    return fail(llvm::toString(compiled.takeError()));
  weft::pipeline::Compilation &c = **compiled;
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const std::string &note : c.notes)
    llvm::WithColor::note(llvm::errs(), "weft-compile") << note << "\n";

  if (writePlan) {
    std::string error;
    auto file = mlir::openOutputFile(outputFile, &error);
    if (!file)
      return fail(outputFile + ": " + error);
    file->os().write(reinterpret_cast<const char *>(backend.plan().data()),
                     backend.plan().size());
    file->keep();
    printPlanSummary(c, backend.stats(), backend.plan().size(), seconds);
    if (report && !printReport(c, llvm::outs()))
      return 1;
    return 0;
  }

  std::string error;
  auto out = mlir::openOutputFile(outputFile, &error);
  if (!out)
    return fail(outputFile + ": " + error);
  switch (emit) {
  case Emit::Plan:
    // For reading: kernel sources are left out (weft-emit-cuda prints them).
    c.module->walk([](weft::plan_ir::KernelOp k) { k.removeSourceAttr(); });
    [[fallthrough]];
  case Emit::Graph:
    c.module->print(out->os());
    out->os() << "\n";
    break;
  case Emit::Fused: {
    c.module->print(out->os());
    out->os() << "\n";
    // The report as comments keeps the output valid MLIR.
    std::string text;
    llvm::raw_string_ostream reportOs(text);
    weft::CostContext costs;
    costs.contextLength = c.contextLength;
    weft::printFusionReport(*c.module, costs, reportOs);
    for (llvm::StringRef line : llvm::split(llvm::StringRef(text).rtrim(), '\n'))
      out->os() << "// " << line << "\n";
    break;
  }
  case Emit::Summary:
    out->os() << c.importSummary;
    if (c.source.checkpoint) {
      const weft::Checkpoint &ck = *c.source.checkpoint;
      out->os() << llvm::formatv(
          "checkpoint   {0}: {1} file(s){2}, {3} tensors checked, {4} unused\n", ck.dir,
          ck.files.size(), ck.sharded ? " (sharded)" : "",
          weft::expectedTensors(c.source.config).size(), ck.unusedTensors);
    }
    out->os() << llvm::formatv(partitioned ? "partitioned in {0:f3} s\n" : "imported in  {0:f3} s\n",
                               seconds);
    // Over a topology, the partition's decision (the whole of it with
    // --report, below).
    if (partitioned && !report) {
      weft::partition::printPartitionSummary(*c.partition, *c.topology, *c.partitionOptions,
                                             c.source.config, out->os());
      out->os() << "             (--report: memory per device, stages, runners-up and a "
                   "picture; -o NAME.weft: the plan)\n";
    }
    break;
  }
  if (report && !printReport(c, out->os()))
    return 1;
  out->keep();
  return 0;
}
