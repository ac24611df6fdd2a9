// weft-emit-cuda: prints the CUDA kernels (sources, launch configurations,
// parameter bindings) and GEMM steps of every region of a specialized module.
#include "dialects/Dist/IR/DistDialect.h"
#include "dialects/Weft/IR/WeftDialect.h"
#include "dialects/Weft/IR/WeftOps.h"
#include "targets/CUDA/KernelEmitter.h"
#include "targets/CUDA/Nvrtc.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <optional>
#include <set>

namespace cl = llvm::cl;

namespace {

cl::OptionCategory category("weft-emit-cuda options");
cl::opt<std::string> inputFile(cl::Positional, cl::desc("<specialized module, - for stdin>"),
                               cl::init("-"), cl::cat(category));
cl::opt<std::string> onlyFunction("function", cl::desc("Only this function"),
                                  cl::value_desc("NAME"), cl::cat(category));
cl::opt<int64_t> blockTokens("block-tokens", cl::desc("KV cache page size in tokens"),
                             cl::init(16), cl::cat(category));
cl::opt<int64_t> maxSequences("max-sequences", cl::desc("Rows of the block table"),
                              cl::init(1), cl::cat(category));
cl::opt<int64_t> maxBlocksPerSequence("max-blocks-per-sequence",
                                      cl::desc("Columns of the block table"), cl::init(256),
                                      cl::cat(category));
cl::opt<int64_t> smCount("sm-count", cl::desc("Multiprocessors to size grids for"),
                         cl::init(132), cl::cat(category));
cl::opt<int> computeCapability("compute-capability",
                               cl::desc("Architecture the code is for (e.g. 86, 90)"),
                               cl::init(90), cl::cat(category));
cl::opt<bool> noSource("no-source", cl::desc("Print launches and bindings only"),
                       cl::init(false), cl::cat(category));
cl::opt<bool> uniqueOnly("unique",
                         cl::desc("Print (and compile) each distinct kernel once; later "
                                  "uses print only its name and launch"),
                         cl::init(false), cl::cat(category));
cl::opt<std::string> compileArch(
    "compile", cl::desc("Also compile each kernel with NVRTC for this architecture"),
    cl::value_desc("sm_XX"), cl::cat(category));
cl::opt<std::string> cubinDir("cubin-dir",
                              cl::desc("With --compile, write each kernel's CUBIN to "
                                       "DIR/<name>.cubin (for running them elsewhere)"),
                              cl::value_desc("DIR"), cl::cat(category));

const char *kindName(weft::cuda::ParamBinding::Kind kind) {
  using Kind = weft::cuda::ParamBinding::Kind;
  switch (kind) {
  case Kind::RegionInput:
    return "RegionInput";
  case Kind::RegionResult:
    return "RegionResult";
  case Kind::KCache:
    return "KCache";
  case Kind::VCache:
    return "VCache";
  case Kind::BlockTables:
    return "BlockTables";
  case Kind::Slots:
    return "Slots";
  case Kind::Scratch:
    return "Scratch";
  case Kind::Scalar:
    return "Scalar";
  }
  return "?";
}

void printBinding(llvm::raw_ostream &os, const weft::cuda::ParamBinding &b) {
  using Kind = weft::cuda::ParamBinding::Kind;
  os << b.name << ": " << kindName(b.kind);
  switch (b.kind) {
  case Kind::Scratch:
    os << " " << b.index << " (" << b.bytes << " bytes)";
    break;
  case Kind::Scalar:
    os << " = " << b.value;
    break;
  case Kind::KCache:
  case Kind::VCache:
    os << " layer " << b.index;
    break;
  case Kind::BlockTables:
    break;
  case Kind::Slots:
    os << " (" << b.bytes << " bytes)";
    break;
  default:
    os << " " << b.index;
    if (b.part == 1)
      os << " (its scales)";
  }
}

template <typename T> void printTriple(llvm::raw_ostream &os, const T &v) {
  os << "(" << v[0] << ", " << v[1] << ", " << v[2] << ")";
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "Weft: print the CUDA kernels of a specialized module\n");
  if (!cubinDir.empty() && compileArch.empty()) {
    llvm::WithColor::error(llvm::errs(), "weft-emit-cuda")
        << "--cubin-dir writes the binaries --compile builds: add --compile=sm_XX\n";
    return 1;
  }

  mlir::MLIRContext context;
  context.loadDialect<weft::WeftDialect, weft::dist::DistDialect, mlir::func::FuncDialect>();
  llvm::SourceMgr sources;
  auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(inputFile);
  if (!buffer) {
    llvm::WithColor::error(llvm::errs(), "weft-emit-cuda")
        << inputFile << ": " << buffer.getError().message() << "\n";
    return 1;
  }
  sources.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sources, &context);
  if (!module)
    return 1;

  weft::cuda::EmitOptions options;
  options.blockTokens = blockTokens;
  options.maxSequences = maxSequences;
  options.maxBlocksPerSequence = maxBlocksPerSequence;
  options.smCount = smCount;
  options.computeCapability = computeCapability;
  options.fourBitProjections = weft::cuda::hasFourBitProjections(*module);

  llvm::raw_ostream &os = llvm::outs();
  bool failed = false;
  std::set<std::string> seen;
  std::map<std::string, std::optional<weft::cuda::CompiledKernel>> compiledByName;
  if (!onlyFunction.empty()) {
    std::vector<std::string> names;
    for (auto fn : module->getOps<mlir::func::FuncOp>())
      names.push_back(fn.getName().str());
    if (!llvm::is_contained(names, onlyFunction)) {
      llvm::WithColor::error(llvm::errs(), "weft-emit-cuda")
          << "--function " << onlyFunction << ": " << inputFile << " has no such function (it has "
          << llvm::join(names, ", ") << ")\n";
      return 1;
    }
  }
  module->walk([&](mlir::func::FuncOp fn) {
    if (!onlyFunction.empty() && fn.getName() != onlyFunction)
      return;
    unsigned index = 0;
    fn.walk([&](weft::FusionOp region) {
      unsigned regionIndex = index++;
      auto steps = weft::cuda::emitRegion(region, options);
      if (!steps) {
        llvm::WithColor::error(llvm::errs(), "weft-emit-cuda")
            << "@" << fn.getName() << " region " << regionIndex << ": "
            << llvm::toString(steps.takeError()) << "\n";
        failed = true;
        return;
      }
      os << "// @" << fn.getName() << " region " << regionIndex << " \"" << region.getKind()
         << "\": " << steps->size() << (steps->size() == 1 ? " step\n" : " steps\n");
      for (auto [i, step] : llvm::enumerate(*steps)) {
        if (step.kernel) {
          const weft::cuda::EmittedKernel &k = *step.kernel;
          os << "// step " << i << ": kernel " << k.name << "\n//   grid ";
          printTriple(os, k.grid);
          os << " block ";
          printTriple(os, k.block);
          os << " shared " << k.sharedBytes << "\n";
          for (auto [p, b] : llvm::enumerate(k.params)) {
            os << "//   param " << p << " ";
            printBinding(os, b);
            os << "\n";
          }
          bool repeat = uniqueOnly && !seen.insert(k.name).second;
          if (repeat) {
            os << "//   (source above)\n";
            continue;
          }
          if (!compileArch.empty()) {
            // Each distinct kernel (the name carries its source's hash) is
            // compiled once: a model uses the same few dozen in every layer.
            auto known = compiledByName.find(k.name);
            if (known == compiledByName.end()) {
              auto result = weft::cuda::compileKernel(k, compileArch, nullptr);
              std::optional<weft::cuda::CompiledKernel> value;
              if (!result) {
                llvm::WithColor::error(llvm::errs(), "weft-emit-cuda")
                    << llvm::toString(result.takeError()) << "\n";
                failed = true;
              } else {
                value = std::move(*result);
              }
              known = compiledByName.emplace(k.name, std::move(value)).first;
            }
            const std::optional<weft::cuda::CompiledKernel> &compiled = known->second;
            if (compiled) {
              if (!cubinDir.empty()) {
                std::error_code ec = llvm::sys::fs::create_directories(cubinDir);
                llvm::SmallString<256> path(cubinDir);
                llvm::sys::path::append(path, k.name + ".cubin");
                llvm::raw_fd_ostream out(path, ec);
                if (!ec)
                  out.write(reinterpret_cast<const char *>(compiled->cubin.data()),
                            compiled->cubin.size());
                if (ec || out.has_error()) {
                  llvm::WithColor::error(llvm::errs(), "weft-emit-cuda")
                      << path << ": cannot write\n";
                  out.clear_error();
                  failed = true;
                }
              }
              os << "//   compiled for " << compiled->arch << ": cubin "
                 << (compiled->cubin.empty() ? "empty" : "ok") << ", ptx "
                 << (compiled->ptx.empty() ? "empty" : "ok");
              if (compiled->symbol != k.name)
                os << ", symbol " << compiled->symbol;
              os << "\n";
            }
          }
          if (!noSource) {
            os << k.source;
            // A library kernel's entry: the template instance NVRTC compiles.
            if (!k.instance.empty())
              os << "// entry: " << k.instance << "\n";
          }
        } else if (step.gemm) {
          const weft::cuda::GemmStep &g = *step.gemm;
          os << "// step " << i << ": gemm m " << g.m << " n " << g.n << " k " << g.k << " ("
             << weft::cuda::elementTypeName(g.aType) << " x "
             << weft::cuda::elementTypeName(g.bType) << " -> "
             << weft::cuda::elementTypeName(g.cType) << ")\n//   a ";
          printBinding(os, g.a);
          os << "\n//   b ";
          printBinding(os, g.b);
          os << "\n//   c ";
          printBinding(os, g.c);
          os << "\n";
          if (g.bias) {
            os << "//   bias (" << weft::cuda::elementTypeName(g.biasType) << ") ";
            printBinding(os, *g.bias);
            os << "\n";
          }
          if (g.residual) {
            os << "//   residual ";
            printBinding(os, *g.residual);
            os << "\n";
          }
        }
      }
    });
  });
  return failed ? 1 : 0;
}
