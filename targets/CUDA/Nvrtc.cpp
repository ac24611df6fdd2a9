// NVRTC compilation of emitted kernels and the on-disk kernel cache.
#include "targets/CUDA/Nvrtc.h"

#include "targets/CUDA/KernelLibrary.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <nvrtc.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#ifndef WEFT_CUDA_INCLUDE_DIR
#error "WEFT_CUDA_INCLUDE_DIR must name the CUDA toolkit's include directory"
#endif

namespace weft::cuda {
namespace {

// Version 2 adds the entry's symbol (a template instance's lowered name).
constexpr char kMagic[8] = {'W', 'E', 'F', 'T', 'K', 'R', 'N', '2'};
constexpr llvm::StringLiteral kEntrySuffix = ".weftk";
// How the kept PTX is written (part of the cache key): parameters renamed
// from NVVM's "<entry symbol>_param_<n>" to "wfp_<n>" (shortenPtxParams).
constexpr llvm::StringLiteral kPtxForm = "ptx params wfp_<n>";

// NVVM names every parameter of an entry after its symbol; a template
// instance's symbol grows with its pointer pack (the decode stream kernel's
// is 871 bytes at 32 layers), so its PTX repeated it in every parameter's
// declaration and load (1.1 MiB instead of 386 KiB). The names are local
// to the entry, so "wfp_<n>" serves as well; the CUBIN is NVRTC's own.
void shortenPtxParams(std::string &ptx, llvm::StringRef symbol) {
  const std::string from = symbol.str() + "_param_";
  std::string out;
  out.reserve(ptx.size());
  size_t at = 0;
  for (size_t hit = ptx.find(from); hit != std::string::npos; hit = ptx.find(from, at)) {
    out.append(ptx, at, hit - at);
    out += "wfp_";
    at = hit + from.size();
  }
  out.append(ptx, at, std::string::npos);
  ptx = std::move(out);
}

llvm::Error kernelError(llvm::StringRef name, llvm::StringRef arch, const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 ("kernel " + name + " (" + arch + "): " + what).str());
}

// The first lines of an NVRTC log as one line: "a | b | c ...".
std::string logExcerpt(llvm::StringRef log) {
  constexpr size_t kMaxLines = 8, kMaxChars = 600;
  llvm::SmallVector<llvm::StringRef> lines;
  log.split(lines, '\n');
  std::string out;
  size_t taken = 0;
  bool more = false;
  for (llvm::StringRef line : lines) {
    line = line.trim();
    if (line.empty())
      continue;
    if (taken == kMaxLines) {
      more = true;
      break;
    }
    if (!out.empty())
      out += " | ";
    out += line.str();
    ++taken;
  }
  if (out.size() > kMaxChars) {
    out.resize(kMaxChars);
    more = true;
  }
  if (more)
    out += " ...";
  return out.empty() ? std::string("(empty log)") : out;
}

// Little-endian writers/readers for the cache entry.
void put64(std::string &s, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    s += char((v >> (8 * i)) & 0xff);
}
void putBytes(std::string &s, llvm::StringRef bytes) {
  put64(s, bytes.size());
  s += bytes.str();
}

struct Reader {
  llvm::StringRef data;
  bool ok = true;
  uint64_t get64() {
    if (data.size() < 8) {
      ok = false;
      return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v |= uint64_t(uint8_t(data[i])) << (8 * i);
    data = data.drop_front(8);
    return v;
  }
  llvm::StringRef getBytes() {
    uint64_t n = get64();
    if (!ok || n > data.size()) {
      ok = false;
      return {};
    }
    llvm::StringRef r = data.take_front(n);
    data = data.drop_front(n);
    return r;
  }
};

bool validArch(llvm::StringRef arch) {
  unsigned cc = 0;
  return arch.consume_front("sm_") && !arch.empty() && !arch.getAsInteger(10, cc) && cc >= 50;
}

} // namespace

//===----------------------------------------------------------------------===//
// KernelCache
//===----------------------------------------------------------------------===//

KernelCache::KernelCache(std::string directory) : directory_(std::move(directory)) {}

std::string KernelCache::defaultDirectory() {
  llvm::SmallString<256> path;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg &&
                                                         llvm::sys::path::is_absolute(xdg)) {
    path = xdg;
  } else if (const char *home = std::getenv("HOME"); home && *home) {
    path = home;
    llvm::sys::path::append(path, ".cache");
  } else {
    llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/false, path);
  }
  llvm::sys::path::append(path, "weft", "kernels");
  return std::string(path);
}

std::string KernelCache::entryPath(uint64_t key) const {
  llvm::SmallString<256> path(directory_);
  std::string file;
  llvm::raw_string_ostream os(file);
  os << llvm::format_hex_no_prefix(key, 16) << kEntrySuffix;
  os.flush();
  llvm::sys::path::append(path, file);
  return std::string(path);
}

std::optional<CompiledKernel> KernelCache::lookup(uint64_t key, llvm::StringRef name) const {
  auto buffer = llvm::MemoryBuffer::getFile(entryPath(key), /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return std::nullopt;
  llvm::StringRef data = (*buffer)->getBuffer();
  // Layout: magic, fields, then an xxh3 of everything before it.
  if (data.size() < sizeof(kMagic) + 8 ||
      std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0)
    return std::nullopt;
  llvm::StringRef body = data.drop_back(8);
  Reader tail{data.take_back(8)};
  if (tail.get64() != llvm::xxh3_64bits(body))
    return std::nullopt;
  Reader r{body.drop_front(sizeof(kMagic))};
  CompiledKernel k;
  uint64_t storedKey = r.get64();
  k.sourceHash = r.get64();
  k.name = r.getBytes().str();
  k.symbol = r.getBytes().str();
  k.arch = r.getBytes().str();
  llvm::StringRef cubin = r.getBytes();
  k.ptx = r.getBytes().str();
  if (!r.ok || !r.data.empty() || storedKey != key || k.name != name || cubin.empty() ||
      k.symbol.empty())
    return std::nullopt;
  k.cubin.assign(cubin.bytes_begin(), cubin.bytes_end());
  k.fromCache = true;
  return k;
}

llvm::Error KernelCache::store(uint64_t key, const CompiledKernel &kernel) const {
  if (std::error_code ec = llvm::sys::fs::create_directories(directory_))
    return llvm::createStringError(ec, "kernel cache %s: %s", directory_.c_str(),
                                   ec.message().c_str());
  std::string data(kMagic, sizeof(kMagic));
  put64(data, key);
  put64(data, kernel.sourceHash);
  putBytes(data, kernel.name);
  putBytes(data, kernel.symbol);
  putBytes(data, kernel.arch);
  putBytes(data, llvm::StringRef(reinterpret_cast<const char *>(kernel.cubin.data()),
                                 kernel.cubin.size()));
  putBytes(data, kernel.ptx);
  put64(data, llvm::xxh3_64bits(llvm::StringRef(data)));

  // A unique temporary beside the entry, renamed over it: readers see the
  // old entry, no entry or the whole new one.
  std::string path = entryPath(key);
  llvm::SmallString<256> temp;
  int fd = -1;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueFile(path + ".tmp-%%%%%%%%%%%%", fd, temp))
    return llvm::createStringError(ec, "kernel cache %s: %s", path.c_str(),
                                   ec.message().c_str());
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os.write(data.data(), data.size());
    os.close();
    if (os.has_error()) {
      std::error_code ec = os.error();
      os.clear_error();
      llvm::sys::fs::remove(temp);
      return llvm::createStringError(ec, "kernel cache %s: %s", temp.c_str(),
                                     ec.message().c_str());
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(temp, path)) {
    llvm::sys::fs::remove(temp);
    return llvm::createStringError(ec, "kernel cache %s: %s", path.c_str(),
                                   ec.message().c_str());
  }
  return llvm::Error::success();
}

llvm::Error KernelCache::clear() const {
  std::error_code ec;
  std::vector<std::string> doomed;
  for (llvm::sys::fs::directory_iterator it(directory_, ec), end; it != end && !ec;
       it.increment(ec)) {
    llvm::StringRef file = llvm::sys::path::filename(it->path());
    if (file.ends_with(kEntrySuffix) || file.contains(std::string(kEntrySuffix) + ".tmp-"))
      doomed.push_back(it->path());
  }
  if (ec && ec != std::errc::no_such_file_or_directory)
    return llvm::createStringError(ec, "kernel cache %s: %s", directory_.c_str(),
                                   ec.message().c_str());
  for (const std::string &f : doomed)
    if (std::error_code rec = llvm::sys::fs::remove(f))
      return llvm::createStringError(rec, "kernel cache %s: %s", f.c_str(),
                                     rec.message().c_str());
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Compilation
//===----------------------------------------------------------------------===//

std::string nvrtcVersionString() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
    return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> nvrtcOptions(llvm::StringRef arch) {
  return {"-arch=" + arch.str(), "--std=c++17", "-default-device",
          std::string("-I") + WEFT_CUDA_INCLUDE_DIR};
}

namespace {
// What a kernel compiles from: its source, its template instance (none for
// an extern "C" kernel, whose hashes stay as they were) and the library.
std::string sourceMaterial(const EmittedKernel &kernel) {
  std::string material = kernel.source;
  if (!kernel.instance.empty()) {
    material += '\0';
    material += kernel.instance;
  }
  material += '\0';
  material += std::to_string(kernelLibraryHash());
  return material;
}
} // namespace

uint64_t kernelSourceHash(const EmittedKernel &kernel) {
  return llvm::xxh3_64bits(llvm::StringRef(sourceMaterial(kernel)));
}

uint64_t kernelCacheKey(const EmittedKernel &kernel, llvm::StringRef arch) {
  std::string material = sourceMaterial(kernel);
  material += '\0';
  material += arch.str();
  material += '\0';
  material += nvrtcVersionString();
  material += '\0';
  material += kPtxForm.str();
  for (const std::string &o : nvrtcOptions(arch)) {
    material += '\0';
    material += o;
  }
  return llvm::xxh3_64bits(llvm::StringRef(material));
}

llvm::Expected<CompiledKernel> compileKernel(const EmittedKernel &kernel, llvm::StringRef arch,
                                             KernelCache *cache) {
  if (!validArch(arch))
    return kernelError(kernel.name, arch, "not an architecture of the form sm_86");
  uint64_t key = kernelCacheKey(kernel, arch);
  if (cache)
    if (std::optional<CompiledKernel> hit = cache->lookup(key, kernel.name))
      return std::move(*hit);

  nvrtcProgram program = nullptr;
  std::string file = kernel.name + ".cu";
  // The kernel library, as in-memory headers ("weft/common.cuh", ...).
  std::vector<const char *> headerNames, headerSources;
  for (const KernelHeader &h : kernelLibrary()) {
    headerNames.push_back(h.name);
    headerSources.push_back(h.contents);
  }
  if (nvrtcResult r = nvrtcCreateProgram(&program, kernel.source.c_str(), file.c_str(),
                                         int(headerNames.size()), headerSources.data(),
                                         headerNames.data());
      r != NVRTC_SUCCESS)
    return kernelError(kernel.name, arch,
                       llvm::Twine("NVRTC could not create the program: ") +
                           nvrtcGetErrorString(r));
  // Destroys the program on every path out.
  auto destroy = llvm::make_scope_exit([&] { nvrtcDestroyProgram(&program); });

  // A template instance of the library: NVRTC instantiates it from its
  // name expression and says what it lowered it to.
  if (!kernel.instance.empty())
    if (nvrtcResult r = nvrtcAddNameExpression(program, kernel.instance.c_str());
        r != NVRTC_SUCCESS)
      return kernelError(kernel.name, arch,
                         "NVRTC refused the template instance " + kernel.instance + ": " +
                             nvrtcGetErrorString(r));

  std::vector<std::string> options = nvrtcOptions(arch);
  std::vector<const char *> argv;
  for (const std::string &o : options)
    argv.push_back(o.c_str());
  nvrtcResult compiled = nvrtcCompileProgram(program, int(argv.size()), argv.data());
  size_t logSize = 0;
  std::string log;
  if (nvrtcGetProgramLogSize(program, &logSize) == NVRTC_SUCCESS && logSize > 1) {
    log.resize(logSize);
    if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS)
      log.clear();
    while (!log.empty() && log.back() == '\0')
      log.pop_back();
  }
  if (compiled != NVRTC_SUCCESS)
    return kernelError(kernel.name, arch, "NVRTC compilation failed: " + logExcerpt(log));

  CompiledKernel k;
  k.name = kernel.name;
  k.symbol = kernel.name;
  if (!kernel.instance.empty()) {
    const char *lowered = nullptr;
    if (nvrtcGetLoweredName(program, kernel.instance.c_str(), &lowered) != NVRTC_SUCCESS ||
        !lowered || !*lowered)
      return kernelError(kernel.name, arch,
                         "NVRTC gave no symbol for the template instance " + kernel.instance);
    k.symbol = lowered;
  }
  k.arch = arch.str();
  k.sourceHash = kernelSourceHash(kernel);
  size_t cubinSize = 0, ptxSize = 0;
  if (nvrtcGetCUBINSize(program, &cubinSize) != NVRTC_SUCCESS || cubinSize == 0)
    return kernelError(kernel.name, arch, "NVRTC produced no CUBIN");
  k.cubin.resize(cubinSize);
  if (nvrtcGetCUBIN(program, reinterpret_cast<char *>(k.cubin.data())) != NVRTC_SUCCESS)
    return kernelError(kernel.name, arch, "NVRTC could not return the CUBIN");
  if (nvrtcGetPTXSize(program, &ptxSize) == NVRTC_SUCCESS && ptxSize > 0) {
    k.ptx.resize(ptxSize);
    if (nvrtcGetPTX(program, k.ptx.data()) != NVRTC_SUCCESS)
      return kernelError(kernel.name, arch, "NVRTC could not return the PTX");
    while (!k.ptx.empty() && k.ptx.back() == '\0')
      k.ptx.pop_back();
    shortenPtxParams(k.ptx, k.symbol);
  }
  if (cache)
    llvm::consumeError(cache->store(key, k)); // a cold cache next time, nothing worse
  return k;
}

llvm::Expected<std::vector<CompiledKernel>>
compileKernels(const std::vector<EmittedKernel> &kernels, llvm::StringRef arch,
               KernelCache *cache, unsigned threads, const CompileProgress &progress,
               size_t *distinct) {
  // One compilation per distinct source.
  std::vector<size_t> uniqueOf(kernels.size());
  std::vector<size_t> unique; // indices into `kernels`
  std::map<std::tuple<uint64_t, llvm::StringRef, llvm::StringRef>, size_t> seen;
  for (size_t i = 0; i < kernels.size(); ++i) {
    llvm::StringRef source = kernels[i].source;
    auto key = std::make_tuple(llvm::xxh3_64bits(source), source,
                               llvm::StringRef(kernels[i].instance));
    auto [it, inserted] = seen.try_emplace(key, unique.size());
    if (inserted)
      unique.push_back(i);
    uniqueOf[i] = it->second;
  }

  if (distinct)
    *distinct = unique.size();
  // Longest first: source length is a fair proxy for compile time (the
  // attention kernels and the sampler are the long ones).
  std::vector<size_t> order(unique.size());
  for (size_t u = 0; u < order.size(); ++u)
    order[u] = u;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return kernels[unique[x]].source.size() > kernels[unique[y]].source.size();
  });

  std::vector<std::optional<CompiledKernel>> results(unique.size());
  std::vector<std::string> errors(unique.size());
  std::atomic<size_t> next{0};
  std::mutex progressMutex;
  size_t finished = 0;
  auto work = [&] {
    for (size_t n = next++; n < order.size(); n = next++) {
      size_t u = order[n];
      llvm::Expected<CompiledKernel> k = compileKernel(kernels[unique[u]], arch, cache);
      if (k)
        results[u] = std::move(*k);
      else
        errors[u] = llvm::toString(k.takeError());
      if (progress) {
        std::lock_guard<std::mutex> lock(progressMutex);
        progress(++finished, order.size());
      }
    }
  };
  if (threads == 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
  threads = unsigned(std::min<size_t>(threads, unique.size()));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t)
    pool.emplace_back(work);
  work();
  for (std::thread &t : pool)
    t.join();

  std::vector<CompiledKernel> out;
  out.reserve(kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i) {
    size_t u = uniqueOf[i];
    if (!results[u])
      return llvm::createStringError(llvm::inconvertibleErrorCode(), errors[u]);
    out.push_back(*results[u]);
  }
  return out;
}

} // namespace weft::cuda
