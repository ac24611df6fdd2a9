// weft-compile: imports a model (checkpoint directory or built-in config)
// and compiles it; for now it stops at the graph.
#include "compiler/Analysis/RegionCost.h"
#include "compiler/Import/Checkpoint.h"
#include "compiler/Import/Importer.h"
#include "compiler/Transforms/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

#include <chrono>

namespace cl = llvm::cl;

namespace {

enum class Emit { Summary, Graph, Fused };

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
                          "kernel regions (as MLIR comments)")),
    cl::cat(category));
cl::opt<std::string> outputFile("o", cl::desc("Output file (default: stdout)"),
                                cl::value_desc("FILE"), cl::init("-"),
                                cl::cat(category));
cl::opt<bool> sampling("sampling",
                       cl::desc("End the graph with weft.sample instead of weft.argmax"),
                       cl::init(false), cl::cat(category));
cl::opt<int64_t> maxBatch("max-batch",
                          cl::desc("Largest decode batch (decode buckets are the "
                                   "powers of two up to it)"),
                          cl::init(64), cl::cat(category));
cl::list<int64_t> decodeBuckets("decode-buckets",
                                cl::desc("Explicit decode bucket sizes"),
                                cl::CommaSeparated, cl::cat(category));
cl::list<int64_t> prefillChunks("prefill-chunks",
                                cl::desc("Prefill chunk sizes (default 512)"),
                                cl::CommaSeparated, cl::cat(category));
cl::opt<int64_t> contextLength("context",
                               cl::desc("Attention context assumed by the report"),
                               cl::init(4096), cl::cat(category));
cl::opt<bool> listModels("list-models", cl::desc("List the built-in models and exit"),
                         cl::init(false), cl::cat(category));

int fail(const llvm::Twine &msg) {
  llvm::WithColor::error(llvm::errs(), "weft-compile") << msg << "\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "Weft: compile an LLM for a GPU topology\n");
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
  if (emit == Emit::Fused) {
    if (maxBatch < 1)
      return fail("--max-batch must be at least 1");
    for (int64_t n : decodeBuckets)
      if (n < 1)
        return fail("--decode-buckets: sizes must be positive");
    for (int64_t n : prefillChunks)
      if (n < 1)
        return fail("--prefill-chunks: sizes must be positive");
    if (contextLength < 1)
      return fail("--context must be at least 1");
    weft::CompileOptions compile;
    compile.maxBatch = maxBatch;
    compile.decodeBuckets.assign(decodeBuckets.begin(), decodeBuckets.end());
    compile.prefillChunks.assign(prefillChunks.begin(), prefillChunks.end());
    mlir::PassManager pm(&context);
    weft::buildDefaultPipeline(pm, compile);
    if (mlir::failed(pm.run(*module)))
      return fail("the fusion pipeline failed (see the diagnostics above)");
  }
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start).count();

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
    costs.contextLength = contextLength;
    weft::printFusionReport(*module, costs, reportOs);
    for (llvm::StringRef line : llvm::split(llvm::StringRef(report).rtrim(), '\n'))
      out->os() << "// " << line << "\n";
    break;
  }
  case Emit::Summary:
    weft::printGraphSummary(*module, source->config, out->os());
    if (source->checkpoint) {
      const weft::Checkpoint &ck = *source->checkpoint;
      out->os() << llvm::formatv(
          "checkpoint   {0}: {1} file(s){2}, {3} tensors checked, {4} unused\n",
          ck.dir, ck.files.size(), ck.sharded ? " (sharded)" : "",
          weft::expectedTensors(source->config).size(), ck.unusedTensors);
    }
    out->os() << llvm::formatv("imported in  {0:f3} s\n", seconds);
    break;
  }
  out->keep();
  return 0;
}
