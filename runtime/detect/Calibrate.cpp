// Microbenchmarks for weft-detect --calibrate (see Calibrate.h).
#include "runtime/detect/Calibrate.h"

#include "runtime/gpu/Cuda.h"
#include "runtime/gpu/Gemm.h"
#include "runtime/gpu/Nccl.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

namespace weft::detect {
namespace {

// "00000000:01:00.0" (NVML) and "0000:01:00.0" (CUDA) name the same device.
bool sameBus(const std::string &nvml, const std::string &cuda) {
  unsigned d1 = 0, b1 = 0, s1 = 0, f1 = 0, d2 = 0, b2 = 0, s2 = 0, f2 = 0;
  return std::sscanf(nvml.c_str(), "%x:%x:%x.%x", &d1, &b1, &s1, &f1) == 4 &&
         std::sscanf(cuda.c_str(), "%x:%x:%x.%x", &d2, &b2, &s2, &f2) == 4 && d1 == d2 &&
         b1 == b2 && s1 == s2 && f1 == f2;
}

// Device memory freed on every path out.
struct DeviceBuffer {
  void *p = nullptr;
  ~DeviceBuffer() {
    if (p)
      cudaFree(p);
  }
};
struct HostBuffer {
  void *p = nullptr;
  ~HostBuffer() {
    if (p)
      cudaFreeHost(p);
  }
};
struct Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  ~Events() {
    if (start)
      cudaEventDestroy(start);
    if (stop)
      cudaEventDestroy(stop);
  }
  Status create() {
    WEFT_CUDA(cudaEventCreate(&start), "cudaEventCreate");
    WEFT_CUDA(cudaEventCreate(&stop), "cudaEventCreate");
    return Status::ok();
  }
};

// A non-blocking stream on the current device, destroyed on every path out.
struct Stream {
  cudaStream_t s = nullptr;
  ~Stream() {
    if (s)
      cudaStreamDestroy(s);
  }
  Status create() {
    WEFT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    return Status::ok();
  }
};

// Seconds per call of `body` on `stream`: `reps` calls after one warm-up.
template <typename F>
StatusOr<double> timeOn(cudaStream_t stream, int reps, F body) {
  Events e;
  WEFT_RETURN_IF_ERROR(e.create());
  WEFT_RETURN_IF_ERROR(body());
  WEFT_CUDA(cudaEventRecord(e.start, stream), "cudaEventRecord");
  for (int i = 0; i < reps; ++i)
    WEFT_RETURN_IF_ERROR(body());
  WEFT_CUDA(cudaEventRecord(e.stop, stream), "cudaEventRecord");
  WEFT_CUDA(cudaEventSynchronize(e.stop), "cudaEventSynchronize");
  float ms = 0;
  WEFT_CUDA(cudaEventElapsedTime(&ms, e.start, e.stop), "cudaEventElapsedTime");
  return double(ms) * 1e-3 / reps;
}

Status measureGpu(int cudaDevice, GpuMeasurement &out) {
  auto begin = std::chrono::steady_clock::now();
  WEFT_CUDA(cudaSetDevice(cudaDevice), "cudaSetDevice");
  Stream owned;
  WEFT_RETURN_IF_ERROR(owned.create());
  cudaStream_t stream = owned.s;
  size_t freeBytes = 0, totalBytes = 0;
  WEFT_CUDA(cudaMemGetInfo(&freeBytes, &totalBytes), "cudaMemGetInfo");

  // Copy bandwidth: two buffers of up to 1 GiB, a quarter of what is free.
  size_t bytes = std::min<size_t>(size_t(1) << 30, freeBytes / 4) & ~size_t(0xfffff);
  if (bytes < (size_t(64) << 20))
    return failedPrecondition("GPU " + std::to_string(cudaDevice) + " has " +
                              std::to_string(freeBytes >> 20) +
                              " MiB free: too little to measure (stop what runs on it)");
  DeviceBuffer a, b;
  WEFT_CUDA(cudaMalloc(&a.p, bytes), "cudaMalloc");
  WEFT_CUDA(cudaMalloc(&b.p, bytes), "cudaMalloc");
  WEFT_CUDA(cudaMemsetAsync(a.p, 1, bytes, stream), "cudaMemsetAsync");
  StatusOr<double> copy = timeOn(stream, 10, [&] {
    WEFT_CUDA(cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice, stream),
              "cudaMemcpyAsync");
    return Status::ok();
  });
  if (!copy.isOk())
    return copy.status();
  out.copyBandwidth = 2.0 * double(bytes) / *copy;

  // FP16 GEMM at prefill shapes (512 tokens through Llama-8B-sized
  // projections), the best of them: what prefill and large batches reach.
  StatusOr<std::unique_ptr<gpu::GemmRunner>> gemm = gpu::GemmRunner::create(cudaDevice, 32u << 20);
  if (!gemm.isOk())
    return gemm.status();
  struct Shape {
    int64_t m, n, k;
  };
  for (Shape s : {Shape{512, 4096, 4096}, Shape{512, 14336, 4096}, Shape{512, 4096, 14336},
                  Shape{2048, 14336, 4096}}) {
    size_t need = size_t(s.m * s.k + s.n * s.k + s.m * s.n) * 2;
    if (need > bytes)
      continue;
    gpu::GemmArgs g;
    g.m = s.m;
    g.n = s.n;
    g.k = s.k;
    g.a = a.p;
    g.b = static_cast<char *>(a.p) + s.m * s.k * 2;
    g.c = b.p;
    StatusOr<double> t = timeOn(stream, 20, [&] { return (*gemm)->run(g, stream); });
    if (!t.isOk())
      return t.status();
    out.gemmFlops = std::max(out.gemmFlops, 2.0 * double(s.m * s.n * s.k) / *t);
  }

  // Per-node cost of a replayed graph of small operations.
  constexpr int kNodes = 200;
  cudaGraph_t graph = nullptr;
  WEFT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
            "cudaStreamBeginCapture");
  for (int i = 0; i < kNodes; ++i)
    cudaMemsetAsync(static_cast<char *>(b.p) + 256 * i, i & 0xff, 256, stream);
  WEFT_CUDA(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  Status instantiated = gpu::cudaStatus(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  cudaGraphDestroy(graph);
  WEFT_RETURN_IF_ERROR(instantiated);
  StatusOr<double> replay = timeOn(stream, 20, [&] {
    WEFT_CUDA(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    return Status::ok();
  });
  cudaGraphExecDestroy(exec);
  if (!replay.isOk())
    return replay.status();
  out.launchSeconds = *replay / kNodes;

  // Host to device from pinned memory.
  size_t hostBytes = std::min<size_t>(bytes, size_t(256) << 20);
  HostBuffer host;
  WEFT_CUDA(cudaHostAlloc(&host.p, hostBytes, cudaHostAllocDefault), "cudaHostAlloc");
  StatusOr<double> h2d = timeOn(stream, 10, [&] {
    WEFT_CUDA(cudaMemcpyAsync(a.p, host.p, hostBytes, cudaMemcpyHostToDevice, stream),
              "cudaMemcpyAsync");
    return Status::ok();
  });
  if (!h2d.isOk())
    return h2d.status();
  out.hostToDevice = double(hostBytes) / *h2d;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return Status::ok();
}

Status measurePair(int a, int b, PairMeasurement &out) {
  int can = 0;
  WEFT_CUDA(cudaDeviceCanAccessPeer(&can, a, b), "cudaDeviceCanAccessPeer");
  out.peerToPeer = can != 0;
  WEFT_CUDA(cudaSetDevice(a), "cudaSetDevice");
  if (can) {
    cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
    if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
      return gpu::cudaStatus(e, "cudaDeviceEnablePeerAccess");
    cudaGetLastError();
  }
  size_t bytes = size_t(256) << 20;
  DeviceBuffer src, dst;
  WEFT_CUDA(cudaMalloc(&src.p, bytes), "cudaMalloc");
  WEFT_CUDA(cudaSetDevice(b), "cudaSetDevice");
  WEFT_CUDA(cudaMalloc(&dst.p, bytes), "cudaMalloc");
  WEFT_CUDA(cudaSetDevice(a), "cudaSetDevice");
  Stream owned;
  WEFT_RETURN_IF_ERROR(owned.create());
  cudaStream_t stream = owned.s;
  StatusOr<double> big = timeOn(stream, 10, [&] {
    WEFT_CUDA(cudaMemcpyPeerAsync(dst.p, b, src.p, a, bytes, stream), "cudaMemcpyPeerAsync");
    return Status::ok();
  });
  if (!big.isOk())
    return big.status();
  StatusOr<double> small = timeOn(stream, 100, [&] {
    WEFT_CUDA(cudaMemcpyPeerAsync(dst.p, b, src.p, a, 4, stream), "cudaMemcpyPeerAsync");
    return Status::ok();
  });
  if (!small.isOk())
    return small.status();
  out.bandwidth = double(bytes) / *big;
  out.latency = *small;
  return Status::ok();
}

// NCCL communicators over a group, destroyed on every path out.
struct Comms {
  const gpu::Nccl *nccl = nullptr;
  std::vector<gpu::NcclComm> list;
  ~Comms() {
    for (gpu::NcclComm c : list)
      nccl->destroy(c);
  }
};

// FP16 all-reduces over `cudaDevices` at the sizes tensor-parallel buckets
// reduce (hidden x tokens x 2 bytes: 8 KiB for one token of an 8B model to
// 32 MiB for long prefill chunks), captured in a CUDA graph as the plans run
// them, many back to back; eager launches where capture is refused.
Status measureAllReduce(const gpu::Nccl &nccl, const std::vector<int> &cudaDevices,
                        AllReduceMeasurement &out) {
  size_t n = cudaDevices.size();
  constexpr size_t kMaxBytes = size_t(32) << 20;
  Comms comms;
  comms.nccl = &nccl;
  StatusOr<std::vector<gpu::NcclComm>> made = nccl.initAll(cudaDevices);
  if (!made.isOk())
    return made.status();
  comms.list = *made;
  std::vector<DeviceBuffer> buffers(n);
  std::vector<Stream> streams(n);
  std::vector<Events> events(n); // start/stop on the first GPU; joins on the others
  std::vector<cudaStream_t> raw(n);
  for (size_t i = 0; i < n; ++i) {
    WEFT_CUDA(cudaSetDevice(cudaDevices[i]), "cudaSetDevice");
    WEFT_CUDA(cudaMalloc(&buffers[i].p, kMaxBytes), "cudaMalloc");
    WEFT_CUDA(cudaMemset(buffers[i].p, 0, kMaxBytes), "cudaMemset");
    WEFT_RETURN_IF_ERROR(streams[i].create());
    WEFT_RETURN_IF_ERROR(events[i].create());
    raw[i] = streams[i].s;
  }
  auto reduce = [&](size_t bytes) {
    std::vector<void *> list;
    for (DeviceBuffer &b : buffers)
      list.push_back(b.p);
    return nccl.allReduce(list, bytes / 2, gpu::NcclType::F16, comms.list, raw);
  };
  auto syncAll = [&]() -> Status {
    for (size_t i = 0; i < n; ++i) {
      WEFT_CUDA(cudaSetDevice(cudaDevices[i]), "cudaSetDevice");
      WEFT_CUDA(cudaStreamSynchronize(raw[i]), "cudaStreamSynchronize");
    }
    return Status::ok();
  };
  // Connections are set up by the first collective, outside any capture.
  WEFT_RETURN_IF_ERROR(reduce(kMaxBytes));
  WEFT_RETURN_IF_ERROR(syncAll());

  // `reps` all-reduces of `bytes` on every stream, forked from and joined
  // back to the first, as one graph (nullptr when capture is refused).
  auto record = [&](size_t bytes, int reps) -> StatusOr<cudaGraphExec_t> {
    WEFT_CUDA(cudaSetDevice(cudaDevices[0]), "cudaSetDevice");
    WEFT_CUDA(cudaStreamBeginCapture(raw[0], cudaStreamCaptureModeThreadLocal),
              "cudaStreamBeginCapture");
    Status st = gpu::cudaStatus(cudaEventRecord(events[0].start, raw[0]), "cudaEventRecord");
    for (size_t i = 1; i < n && st.isOk(); ++i)
      st = gpu::cudaStatus(cudaStreamWaitEvent(raw[i], events[0].start, 0), "cudaStreamWaitEvent");
    for (int r = 0; r < reps && st.isOk(); ++r)
      st = reduce(bytes);
    for (size_t i = 1; i < n && st.isOk(); ++i) {
      cudaSetDevice(cudaDevices[i]);
      st = gpu::cudaStatus(cudaEventRecord(events[i].stop, raw[i]), "cudaEventRecord");
      cudaSetDevice(cudaDevices[0]);
      if (st.isOk())
        st = gpu::cudaStatus(cudaStreamWaitEvent(raw[0], events[i].stop, 0),
                             "cudaStreamWaitEvent");
    }
    cudaSetDevice(cudaDevices[0]);
    cudaGraph_t graph = nullptr;
    cudaError_t ended = cudaStreamEndCapture(raw[0], &graph);
    if (!st.isOk() || ended != cudaSuccess) {
      if (graph)
        cudaGraphDestroy(graph);
      cudaGetLastError();
      return static_cast<cudaGraphExec_t>(nullptr);
    }
    cudaGraphExec_t exec = nullptr;
    cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return static_cast<cudaGraphExec_t>(nullptr);
    }
    return exec;
  };

  bool graphs = true;
  for (size_t bytes = size_t(8) << 10; bytes <= kMaxBytes; bytes *= 4) {
    int reps = bytes <= (size_t(512) << 10) ? 50 : bytes <= (size_t(8) << 20) ? 20 : 10;
    StatusOr<cudaGraphExec_t> exec =
        graphs ? record(bytes, reps) : StatusOr<cudaGraphExec_t>(nullptr);
    if (!exec.isOk())
      return exec.status();
    graphs = *exec != nullptr;
    WEFT_CUDA(cudaSetDevice(cudaDevices[0]), "cudaSetDevice");
    // Eager launches are timed on the first GPU's stream after the others
    // have been joined to it.
    auto once = [&]() -> Status {
      if (graphs) {
        WEFT_CUDA(cudaGraphLaunch(*exec, raw[0]), "cudaGraphLaunch");
        return Status::ok();
      }
      for (int r = 0; r < reps; ++r)
        WEFT_RETURN_IF_ERROR(reduce(bytes));
      for (size_t i = 1; i < n; ++i) {
        WEFT_CUDA(cudaSetDevice(cudaDevices[i]), "cudaSetDevice");
        WEFT_CUDA(cudaEventRecord(events[i].stop, raw[i]), "cudaEventRecord");
        WEFT_CUDA(cudaSetDevice(cudaDevices[0]), "cudaSetDevice");
        WEFT_CUDA(cudaStreamWaitEvent(raw[0], events[i].stop, 0), "cudaStreamWaitEvent");
      }
      return Status::ok();
    };
    StatusOr<double> t = timeOn(raw[0], 5, once);
    if (graphs)
      cudaGraphExecDestroy(*exec);
    if (!t.isOk())
      return t.status();
    WEFT_RETURN_IF_ERROR(syncAll());
    out.times.emplace_back(uint64_t(bytes), *t / reps);
  }
  out.method = "NCCL " + nccl.version() + (graphs ? ", CUDA graph" : ", eager launches");
  return Status::ok();
}

} // namespace

StatusOr<Calibration> calibrate(const Detection &detection,
                                const std::function<void(const std::string &)> &progress) {
  auto begin = std::chrono::steady_clock::now();
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0)
    return failedPrecondition(std::string("no NVIDIA GPU found for CUDA (") +
                              (e == cudaSuccess ? "no device" : cudaGetErrorName(e)) +
                              "): calibration runs on the box's GPUs");
  // CUDA's number for each detected GPU, by PCI bus id.
  std::vector<int> cudaOf(detection.gpus.size(), -1);
  for (int d = 0; d < count; ++d) {
    char bus[32] = {};
    WEFT_CUDA(cudaDeviceGetPCIBusId(bus, sizeof bus, d), "cudaDeviceGetPCIBusId");
    for (size_t i = 0; i < detection.gpus.size(); ++i)
      if (sameBus(detection.gpus[i].busId, bus))
        cudaOf[i] = d;
  }
  Calibration c;
  c.gpus.resize(detection.gpus.size());
  for (size_t i = 0; i < detection.gpus.size(); ++i) {
    if (cudaOf[i] < 0)
      return failedPrecondition("GPU " + std::to_string(i) + " (" + detection.gpus[i].name +
                                ", " + detection.gpus[i].busId +
                                ") is not visible to CUDA: unset CUDA_VISIBLE_DEVICES to "
                                "calibrate every GPU");
    if (progress)
      progress("GPU " + std::to_string(i) + " (" + detection.gpus[i].name +
               "): copy, GEMM, graph replay, host copies");
    WEFT_RETURN_IF_ERROR(measureGpu(cudaOf[i], c.gpus[i]));
  }
  for (size_t i = 0; i < detection.gpus.size(); ++i)
    for (size_t j = i + 1; j < detection.gpus.size(); ++j) {
      if (progress)
        progress("GPUs " + std::to_string(i) + " and " + std::to_string(j) + ": peer copies");
      PairMeasurement p;
      p.a = int(i);
      p.b = int(j);
      WEFT_RETURN_IF_ERROR(measurePair(cudaOf[i], cudaOf[j], p));
      c.pairs.push_back(p);
    }
  // All-reduce over every pair and, beyond two GPUs, the whole box: the
  // groups tensor-parallel stages use.
  if (detection.gpus.size() >= 2) {
    StatusOr<const gpu::Nccl *> nccl = gpu::Nccl::load();
    if (!nccl.isOk()) {
      c.allReduceSkipped = nccl.status().message();
    } else {
      std::vector<std::vector<int>> groups;
      for (size_t i = 0; i < detection.gpus.size(); ++i)
        for (size_t j = i + 1; j < detection.gpus.size(); ++j)
          groups.push_back({int(i), int(j)});
      if (detection.gpus.size() > 2) {
        groups.emplace_back();
        for (size_t i = 0; i < detection.gpus.size(); ++i)
          groups.back().push_back(int(i));
      }
      for (const std::vector<int> &g : groups) {
        std::string names;
        std::vector<int> cuda;
        for (int i : g) {
          names += (names.empty() ? "" : ",") + std::to_string(i);
          cuda.push_back(cudaOf[size_t(i)]);
        }
        if (progress)
          progress("GPUs " + names + ": all-reduce");
        AllReduceMeasurement m;
        m.gpus = g;
        // A group NCCL cannot run (no peer path, an NCCL error) keeps the
        // ring model; the rest of the calibration stands.
        Status st = measureAllReduce(**nccl, cuda, m);
        if (!st.isOk()) {
          c.allReduceSkipped += (c.allReduceSkipped.empty() ? "" : "; ") + std::string("GPUs ") +
                                names + ": " + st.message();
          cudaGetLastError();
          continue;
        }
        c.allReduces.push_back(std::move(m));
      }
    }
  }
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return c;
}

} // namespace weft::detect
