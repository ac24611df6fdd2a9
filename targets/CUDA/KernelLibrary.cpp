// The embedded kernel library (see KernelLibrary.h).
#include "targets/CUDA/KernelLibrary.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/xxhash.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <string>
#include <vector>

namespace weft::cuda {
namespace {

const KernelHeader kHeaders[] = {
#include "KernelLibrary.inc"
};

// The library in use: the embedded headers, or with an overlay's (whose
// strings live in overlayStrings, never moved: a deque).
struct Library {
  std::vector<KernelHeader> headers{std::begin(kHeaders), std::end(kHeaders)};
  std::deque<std::string> overlayStrings;
  std::atomic<bool> read{false}; // handed out (kernels compile in threads): no overlay after
};

Library &library() {
  static Library lib;
  return lib;
}

} // namespace

llvm::ArrayRef<KernelHeader> kernelLibrary() {
  library().read = true;
  return library().headers;
}

uint64_t kernelLibraryHash() {
  static const uint64_t hash = [] {
    std::string all;
    for (const KernelHeader &h : kernelLibrary()) {
      all += h.name;
      all += '\0';
      all += h.contents;
      all += '\0';
    }
    return llvm::xxh3_64bits(llvm::StringRef(all));
  }();
  return hash;
}

llvm::Expected<int> overlayKernelLibrary(llvm::StringRef dir) {
  auto error = [&](const llvm::Twine &what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "--kernel-library " + dir + ": " + what);
  };
  Library &lib = library();
  if (lib.read)
    return error("the kernel library is already in use");
  llvm::SmallString<256> weftDir(dir);
  llvm::sys::path::append(weftDir, "weft");
  if (!llvm::sys::fs::is_directory(weftDir))
    return error("no directory " + weftDir + " (give the folder that holds weft/*.cuh)");
  std::vector<std::string> files;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(weftDir, ec), end; it != end && !ec;
       it.increment(ec))
    if (llvm::sys::path::extension(it->path()) == ".cuh")
      files.push_back(it->path());
  if (ec)
    return error(weftDir + ": " + ec.message());
  if (files.empty())
    return error("no weft/*.cuh header in " + weftDir);
  std::sort(files.begin(), files.end());
  for (const std::string &file : files) {
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
        llvm::MemoryBuffer::getFile(file, /*IsText=*/true);
    if (!buffer)
      return error(file + ": " + buffer.getError().message());
    const std::string &name =
        lib.overlayStrings.emplace_back("weft/" + llvm::sys::path::filename(file).str());
    const std::string &contents = lib.overlayStrings.emplace_back((*buffer)->getBuffer().str());
    auto same = std::find_if(lib.headers.begin(), lib.headers.end(),
                             [&](const KernelHeader &h) { return name == h.name; });
    if (same != lib.headers.end())
      same->contents = contents.c_str();
    else
      lib.headers.push_back({name.c_str(), contents.c_str()});
  }
  std::sort(lib.headers.begin(), lib.headers.end(), [](const KernelHeader &a, const KernelHeader &b) {
    return llvm::StringRef(a.name) < llvm::StringRef(b.name);
  });
  return int(files.size());
}

} // namespace weft::cuda
