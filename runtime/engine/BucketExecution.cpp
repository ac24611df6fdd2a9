// A bucket's steps on the devices' streams: one CUDA graph (recorded on its
// first run), per-device graphs joined by events for pipelined buckets, or
// step by step: kernel launches, cuBLASLt GEMMs, copies, all-reduces.
#include "runtime/engine/EngineImpl.h"

#include <algorithm>

namespace weft::engine {

namespace {

cudaDataType_t cudaType(fb::DType t) {
  switch (t) {
  case fb::DType::F16: return CUDA_R_16F;
  case fb::DType::BF16: return CUDA_R_16BF;
  case fb::DType::F32: return CUDA_R_32F;
  default: return CUDA_R_16F;
  }
}

} // namespace

StatusOr<uint64_t> Engine::Impl::pointer(const fb::Bucket *b, int device, const fb::Arg *a) {
  Device &dev = devices[size_t(device)];
  switch (a->kind()) {
  case fb::ArgKind::Buffer: {
    for (const fb::DeviceBuffers *db : *b->devices())
      if (db->device() == device)
        return uint64_t(reinterpret_cast<uintptr_t>(dev.arena)) +
               db->buffers()->Get(uint32_t(a->index()))->offset() + a->offset();
    return internalError("buffer on a device without buffers");
  }
  case fb::ArgKind::Weight:
    return uint64_t(reinterpret_cast<uintptr_t>(dev.weights[size_t(a->index())])) + a->offset();
  case fb::ArgKind::KCache:
    return uint64_t(reinterpret_cast<uintptr_t>(dev.kCache[size_t(a->index())]));
  case fb::ArgKind::VCache:
    return uint64_t(reinterpret_cast<uintptr_t>(dev.vCache[size_t(a->index())]));
  case fb::ArgKind::Input:
    return uint64_t(reinterpret_cast<uintptr_t>(dev.inputs[a->index()])) + a->offset();
  case fb::ArgKind::Scalar:
    return uint64_t(a->value());
  }
  return internalError("unknown argument kind");
}

Status Engine::Impl::enqueueSteps(int bi, const fb::Bucket *b, const std::string &where,
                    const std::set<int> &used, int outputDevice) {
  bool graph = options.cudaGraphs && !uncapturable.count(bi);
  auto pipelined = segments.find(bi);
  if (pipelined != segments.end() && used.size() > 1)
    return enqueueSegments(bi, b, where, pipelined->second, graph);
  if (graph) {
    int rootIndex = *used.begin();
    Device &root = devices[size_t(rootIndex)];
    auto it = graphs.find(bi);
    if (it == graphs.end()) {
      StatusOr<cudaGraphExec_t> exec = capture(b, where, used, rootIndex);
      if (!exec.isOk() && used.size() == 1)
        return exec.status();
      if (exec.isOk())
        it = graphs.emplace(bi, *exec).first;
      else
        uncapturable.insert(bi);
    }
    if (it != graphs.end()) {
      // The inputs were copied on each device's stream: the graph, on the
      // root's stream, waits for them, and every stream waits for it.
      for (int d : used)
        if (d != rootIndex) {
          WEFT_CUDA(cudaSetDevice(devices[size_t(d)].gpu), "cudaSetDevice");
          WEFT_CUDA(cudaEventRecord(devices[size_t(d)].join, devices[size_t(d)].stream), where);
          WEFT_CUDA(cudaSetDevice(root.gpu), "cudaSetDevice");
          WEFT_CUDA(cudaStreamWaitEvent(root.stream, devices[size_t(d)].join, 0), where);
        }
      WEFT_CUDA(cudaSetDevice(root.gpu), "cudaSetDevice");
      WEFT_CUDA(cudaGraphLaunch(it->second, root.stream), where + ": graph launch");
      WEFT_CUDA(cudaEventRecord(root.join, root.stream), where);
      for (int d : used)
        if (d != rootIndex) {
          WEFT_CUDA(cudaSetDevice(devices[size_t(d)].gpu), "cudaSetDevice");
          WEFT_CUDA(cudaStreamWaitEvent(devices[size_t(d)].stream, root.join, 0), where);
        }
      return Status::ok();
    }
  }
  // Step by step: the output device overwrites the next tokens only
  // after every device has taken the previous ones (fed tokens).
  Device &od = devices[size_t(outputDevice)];
  for (int d : used)
    if (d != outputDevice) {
      WEFT_CUDA(cudaSetDevice(devices[size_t(d)].gpu), "cudaSetDevice");
      WEFT_CUDA(cudaEventRecord(devices[size_t(d)].join, devices[size_t(d)].stream), where);
      WEFT_CUDA(cudaSetDevice(od.gpu), "cudaSetDevice");
      WEFT_CUDA(cudaStreamWaitEvent(od.stream, devices[size_t(d)].join, 0), where);
    }
  return enqueue(b, where);
}

Status Engine::Impl::enqueueSegments(int bi, const fb::Bucket *b, const std::string &where,
                       const std::vector<Segment> &segs, bool graph) {
  for (size_t k = 0; k < segs.size(); ++k) {
    const Segment &seg = segs[k];
    if (seg.device < 0 || !graph) {
      WEFT_RETURN_IF_ERROR(enqueue(b, where, seg.begin, seg.end, /*trackReads=*/true));
      continue;
    }
    auto key = std::make_pair(bi, k);
    auto it = segmentGraphs.find(key);
    if (it == segmentGraphs.end()) {
      StatusOr<cudaGraphExec_t> exec =
          capture(b, where, {seg.device}, seg.device, seg.begin, seg.end);
      if (!exec.isOk())
        return exec.status();
      it = segmentGraphs.emplace(key, *exec).first;
    }
    Device &dev = devices[size_t(seg.device)];
    WEFT_CUDA(cudaSetDevice(dev.gpu), "cudaSetDevice");
    WEFT_CUDA(cudaGraphLaunch(it->second, dev.stream), where + ": graph launch");
  }
  return Status::ok();
}

StatusOr<cudaGraphExec_t> Engine::Impl::capture(const fb::Bucket *b, const std::string &where,
                                  const std::set<int> &used, int rootIndex,
                                  uint32_t begin, uint32_t end) {
  Device &root = devices[size_t(rootIndex)];
  WEFT_CUDA(cudaSetDevice(root.gpu), "cudaSetDevice");
  WEFT_CUDA(cudaStreamBeginCapture(root.stream, cudaStreamCaptureModeThreadLocal),
            where + ": recording a CUDA graph");
  Status st = Status::ok();
  auto step = [&](cudaError_t e, const char *what) {
    if (st.isOk() && e != cudaSuccess)
      st = gpu::cudaStatus(e, where + ": " + what);
  };
  step(cudaEventRecord(root.join, root.stream), "forking the capture");
  for (int d : used)
    if (d != rootIndex) {
      step(cudaSetDevice(devices[size_t(d)].gpu), "cudaSetDevice");
      step(cudaStreamWaitEvent(devices[size_t(d)].stream, root.join, 0), "forking the capture");
    }
  if (st.isOk())
    st = enqueue(b, where, begin, end);
  for (int d : used)
    if (d != rootIndex && st.isOk()) {
      step(cudaSetDevice(devices[size_t(d)].gpu), "cudaSetDevice");
      step(cudaEventRecord(devices[size_t(d)].join, devices[size_t(d)].stream),
           "joining the capture");
      step(cudaSetDevice(root.gpu), "cudaSetDevice");
      step(cudaStreamWaitEvent(root.stream, devices[size_t(d)].join, 0), "joining the capture");
    }
  cudaSetDevice(root.gpu);
  cudaGraph_t g = nullptr;
  cudaError_t ended = cudaStreamEndCapture(root.stream, &g);
  if (!st.isOk()) {
    if (g) cudaGraphDestroy(g);
    cudaGetLastError();
    return st;
  }
  WEFT_CUDA(ended, where + ": recording a CUDA graph");
  cudaGraphExec_t exec = nullptr;
  cudaError_t made = cudaGraphInstantiate(&exec, g, 0);
  cudaGraphDestroy(g);
  WEFT_CUDA(made, where + ": instantiating its CUDA graph");
  return exec;
}

Status Engine::Impl::enqueue(const fb::Bucket *b, const std::string &where, uint32_t begin,
               uint32_t end, bool trackReads) {
  std::vector<uint64_t> values;
  std::vector<void *> params;
  for (uint32_t si = begin; si < std::min(end, b->steps()->size()); ++si) {
    const fb::Step *s = b->steps()->Get(si);
    Device &dev = devices[size_t(s->device())];
    std::string at = where + " step " + std::to_string(si) + " (" + s->region()->str() + ")";
    WEFT_CUDA(cudaSetDevice(dev.gpu), "cudaSetDevice");
    if (const fb::Launch *l = s->op_as_Launch()) {
      values.assign(l->args()->size(), 0);
      params.assign(l->args()->size(), nullptr);
      for (uint32_t i = 0; i < l->args()->size(); ++i) {
        StatusOr<uint64_t> v = pointer(b, s->device(), l->args()->Get(i));
        if (!v.isOk()) return v.status();
        values[i] = *v;
        params[i] = &values[i];
      }
      CUfunction fn = dev.functions[l->kernel()]; // shared memory set up at load
      CUlaunchConfig config{};
      config.gridDimX = uint32_t(l->grid()->Get(0));
      config.gridDimY = uint32_t(l->grid()->Get(1));
      config.gridDimZ = uint32_t(l->grid()->Get(2));
      config.blockDimX = uint32_t(l->block()->Get(0));
      config.blockDimY = uint32_t(l->block()->Get(1));
      config.blockDimZ = uint32_t(l->block()->Get(2));
      config.sharedMemBytes = uint32_t(l->shared_bytes());
      config.hStream = reinterpret_cast<CUstream>(dev.stream);
      CUlaunchAttribute pdl{};
      pdl.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      pdl.value.programmaticStreamSerializationAllowed = 1;
      // A cooperative kernel (every block resident at once) starts after
      // the kernel before it has ended, not beside it.
      CUlaunchAttribute cooperative{};
      cooperative.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
      cooperative.value.cooperative = 1;
      if (p->kernels()->Get(l->kernel())->cooperative()) {
        config.attrs = &cooperative;
        config.numAttrs = 1;
      } else if (dev.programmaticLaunch) {
        config.attrs = &pdl;
        config.numAttrs = 1;
      }
      WEFT_CU(devices.driver()->launchKernelEx(&config, fn, params.data(), nullptr), at);
    } else if (const fb::Gemm *g = s->op_as_Gemm()) {
      gpu::GemmArgs args;
      args.m = g->m();
      args.n = g->n();
      args.k = g->k();
      auto ptr = [&](const fb::Arg *a) -> StatusOr<void *> {
        if (!a) return static_cast<void *>(nullptr);
        StatusOr<uint64_t> v = pointer(b, s->device(), a);
        if (!v.isOk()) return v.status();
        return reinterpret_cast<void *>(uintptr_t(*v));
      };
      StatusOr<void *> A = ptr(g->a()), B = ptr(g->b()), C = ptr(g->c()),
                       bias = ptr(g->bias()), res = ptr(g->residual());
      for (auto *x : {&A, &B, &C, &bias, &res})
        if (!x->isOk()) return x->status();
      args.a = *A;
      args.b = *B;
      args.c = *C;
      args.bias = *bias;
      args.residual = *res;
      args.abType = cudaType(g->dtype());
      args.cType = cudaType(g->c_dtype());
      Status st = dev.gemm->run(args, dev.stream);
      if (!st.isOk())
        return Status(st.code(), at + ": " + st.message());
    } else if (const fb::Copy *c = s->op_as_Copy()) {
      Device &dst = devices[size_t(c->target_device())];
      StatusOr<uint64_t> from = pointer(b, c->source_device(), c->source());
      StatusOr<uint64_t> to = pointer(b, c->target_device(), c->target());
      if (!from.isOk()) return from.status();
      if (!to.isOk()) return to.status();
      WEFT_CUDA(cudaEventRecord(dev.done, dev.stream), at);
      WEFT_CUDA(cudaSetDevice(dst.gpu), "cudaSetDevice");
      WEFT_CUDA(cudaStreamWaitEvent(dst.stream, dev.done, 0), at);
      WEFT_CUDA(cudaMemcpyPeerAsync(reinterpret_cast<void *>(uintptr_t(*to)), dst.gpu,
                                    reinterpret_cast<void *>(uintptr_t(*from)), dev.gpu,
                                    c->bytes(), dst.stream), at);
      if (trackReads) {
        size_t k = copyOrdinal++;
        if (k >= copyEvents.size()) {
          copyEvents.push_back(nullptr);
          copyEventDevice.push_back(-1);
        }
        if (copyEventDevice[k] != c->target_device()) {
          if (copyEvents[k])
            cudaEventDestroy(copyEvents[k]);
          WEFT_CUDA(cudaEventCreateWithFlags(&copyEvents[k], cudaEventDisableTiming), at);
          copyEventDevice[k] = c->target_device();
        }
        WEFT_CUDA(cudaEventRecord(copyEvents[k], dst.stream), at);
        readsOf[size_t(c->source_device())].push_back(copyEvents[k]);
      }
    } else if (const fb::AllReduce *r = s->op_as_AllReduce()) {
      WEFT_RETURN_IF_ERROR(allReduce(b, r, at));
    } else {
      return unimplemented(at + ": unknown step kind");
    }
  }
  return Status::ok();
}

Status Engine::Impl::allReduce(const fb::Bucket *b, const fb::AllReduce *r, const std::string &at) {
  std::vector<int> group(r->devices()->begin(), r->devices()->end());
  std::vector<void *> buffers;
  for (uint32_t i = 0; i < group.size(); ++i) {
    StatusOr<uint64_t> v = pointer(b, group[i], r->buffers()->Get(i));
    if (!v.isOk()) return v.status();
    buffers.push_back(reinterpret_cast<void *>(uintptr_t(*v)));
  }
  uint64_t bytes = 0;
  plan::dtypeBytes(r->dtype(), r->count(), bytes);
  auto it = comms.find(group);
  if (it != comms.end()) {
    std::vector<cudaStream_t> streams;
    for (int d : group)
      streams.push_back(devices[size_t(d)].stream);
    gpu::NcclType type = r->dtype() == fb::DType::F16    ? gpu::NcclType::F16
                         : r->dtype() == fb::DType::BF16 ? gpu::NcclType::BF16
                                                         : gpu::NcclType::F32;
    Status st = nccl->allReduce(buffers, r->count(), type, it->second, streams);
    if (!st.isOk())
      return Status(st.code(), at + ": " + st.message());
    return Status::ok();
  }
  Device &root = devices[size_t(group[0])];
  StatusOr<uint64_t> scratchPtr = pointer(b, group[0], r->scratch());
  if (!scratchPtr.isOk()) return scratchPtr.status();
  void *scratch = reinterpret_cast<void *>(uintptr_t(*scratchPtr));
  CUfunction accumulate = root.functions[size_t(r->accumulate_kernel())];
  const fb::Kernel *acc = p->kernels()->Get(uint32_t(r->accumulate_kernel()));
  const auto *grid = acc->grid(), *block = acc->block();
  for (size_t i = 1; i < group.size(); ++i) {
    Device &peer = devices[size_t(group[i])];
    WEFT_CUDA(cudaSetDevice(peer.gpu), "cudaSetDevice");
    WEFT_CUDA(cudaEventRecord(peer.done, peer.stream), at);
    WEFT_CUDA(cudaSetDevice(root.gpu), "cudaSetDevice");
    WEFT_CUDA(cudaStreamWaitEvent(root.stream, peer.done, 0), at);
    WEFT_CUDA(cudaMemcpyPeerAsync(scratch, root.gpu, buffers[i], peer.gpu, bytes, root.stream),
              at);
    void *params[] = {&buffers[0], &scratch};
    WEFT_CU(devices.driver()->launchKernel(
                accumulate, uint32_t(grid->Get(0)), uint32_t(grid->Get(1)),
                uint32_t(grid->Get(2)), uint32_t(block->Get(0)), uint32_t(block->Get(1)),
                uint32_t(block->Get(2)), uint32_t(acc->shared_bytes()),
                reinterpret_cast<CUstream>(root.stream), params, nullptr),
            at);
  }
  WEFT_CUDA(cudaSetDevice(root.gpu), "cudaSetDevice");
  WEFT_CUDA(cudaEventRecord(root.done, root.stream), at);
  for (size_t i = 1; i < group.size(); ++i) {
    Device &peer = devices[size_t(group[i])];
    WEFT_CUDA(cudaSetDevice(peer.gpu), "cudaSetDevice");
    WEFT_CUDA(cudaStreamWaitEvent(peer.stream, root.done, 0), at);
    WEFT_CUDA(cudaMemcpyPeerAsync(buffers[i], peer.gpu, buffers[0], root.gpu, bytes,
                                  peer.stream),
              at);
  }
  return Status::ok();
}

} // namespace weft::engine
