// Microbenchmarks for weft-detect --calibrate (see Calibrate.h).
#include "runtime/detect/Calibrate.h"

#include "runtime/gpu/Cuda.h"
#include "runtime/gpu/Gemm.h"

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
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return c;
}

} // namespace weft::detect
