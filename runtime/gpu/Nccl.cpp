// NCCL through dlopen.
#include "runtime/gpu/Nccl.h"

#include <dlfcn.h>

#include <mutex>
#include <type_traits>

namespace weft::gpu {

StatusOr<const Nccl *> Nccl::load() {
  static Nccl nccl;
  static Status status = Status::ok();
  static std::once_flag once;
  std::call_once(once, [] {
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      lib = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char *why = dlerror();
      status = Status(StatusCode::kFailedPrecondition,
                      std::string("NCCL is not available: ") + (why ? why : "libnccl.so.2 not found"));
      return;
    }
    auto sym = [&](const char *name, auto &fn) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn && status.isOk())
        status = Status(StatusCode::kFailedPrecondition,
                        std::string("NCCL is not usable: libnccl lacks ") + name);
    };
    sym("ncclGetVersion", nccl.getVersion_);
    sym("ncclCommInitAll", nccl.commInitAll_);
    sym("ncclCommDestroy", nccl.commDestroy_);
    sym("ncclAllReduce", nccl.allReduce_);
    sym("ncclGroupStart", nccl.groupStart_);
    sym("ncclGroupEnd", nccl.groupEnd_);
    sym("ncclGetErrorString", nccl.getErrorString_);
  });
  if (!status.isOk())
    return status;
  return &nccl;
}

Status Nccl::check(Result r, const std::string &what) const {
  if (r == 0)
    return Status::ok();
  return Status(StatusCode::kInternal,
                what + ": NCCL error " + std::to_string(r) + " (" + getErrorString_(r) + ")");
}

std::string Nccl::version() const {
  int v = 0;
  if (getVersion_(&v) != 0)
    return "unknown";
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

StatusOr<std::vector<NcclComm>> Nccl::initAll(const std::vector<int> &gpus) const {
  std::vector<NcclComm> comms(gpus.size(), nullptr);
  WEFT_RETURN_IF_ERROR(check(commInitAll_(comms.data(), int(gpus.size()), gpus.data()),
                             "creating NCCL communicators"));
  return comms;
}

void Nccl::destroy(NcclComm comm) const {
  if (comm)
    commDestroy_(comm);
}

Status Nccl::allReduce(const std::vector<void *> &buffers, size_t count, NcclType type,
                       const std::vector<NcclComm> &comms,
                       const std::vector<cudaStream_t> &streams) const {
  WEFT_RETURN_IF_ERROR(check(groupStart_(), "ncclGroupStart"));
  Status first = Status::ok();
  for (size_t i = 0; i < buffers.size(); ++i) {
    Status s = check(allReduce_(buffers[i], buffers[i], count, int(type), /*ncclSum=*/0,
                                comms[i], streams[i]),
                     "ncclAllReduce on rank " + std::to_string(i));
    if (first.isOk() && !s.isOk())
      first = s;
  }
  Status end = check(groupEnd_(), "ncclGroupEnd");
  return first.isOk() ? end : first;
}

} // namespace weft::gpu
