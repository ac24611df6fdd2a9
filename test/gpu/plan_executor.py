"""Executes a Weft plan with PyTorch and the CUDA driver API (through ctypes).

A test oracle, not the runtime: it runs exactly the plan's steps — the
generated kernels from the plan's cubins, its buffer offsets, its paged KV
cache and block tables — with weights taken from a Hugging Face model in
memory, and PyTorch for the cuBLASLt GEMM steps and copies. Several declared
devices may map onto one physical GPU. Used by check_plans.py on the GPU
machine to check generated kernels against transformers before the C++
runtime exists.
"""
import ctypes
import math

import torch

from weft.plan.fb.ArgKind import ArgKind
from weft.plan.fb.DType import DType
from weft.plan.fb.InputKind import InputKind
from weft.plan.fb.Op import Op
from weft.plan.fb.Plan import Plan
from weft.plan.fb.Transform import Transform
from weft.plan.fb.Launch import Launch
from weft.plan.fb.Gemm import Gemm
from weft.plan.fb.Copy import Copy

TORCH_DTYPE = {DType.F32: torch.float32, DType.F16: torch.float16,
               DType.BF16: torch.bfloat16, DType.I32: torch.int32,
               DType.I64: torch.int64}
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

_cuda = ctypes.CDLL("libcuda.so.1")


def _check(result, what):
    if result != 0:
        name = ctypes.c_char_p()
        _cuda.cuGetErrorName(result, ctypes.byref(name))
        raise RuntimeError(f"{what}: {name.value.decode() if name.value else result}")


def _s(b):
    return b.decode() if isinstance(b, bytes) else b


class PlanExecutor:
    def __init__(self, path, state_dict, kv_blocks=64, max_sequences=None):
        with open(path, "rb") as f:
            self.data = bytearray(f.read())
        self.plan = Plan.GetRootAs(self.data, 0)
        torch.cuda.init()
        torch.zeros(1, device="cuda")  # makes the primary context current
        self._load_kernels()
        self._load_weights(state_dict)
        kv = self.plan.KvCache()
        self.block_tokens = kv.BlockTokens()
        self.max_blocks = kv.MaxBlocksPerSequence()
        model = self.plan.Model()
        self.num_layers = model.NumLayers()
        dtype = TORCH_DTYPE[kv.Dtype()]
        # One physical GPU stands for every declared device: a cache per
        # (device, layer) keeps them apart as the plan does.
        shape = (kv_blocks, self.block_tokens, kv.NumKvHeads(), kv.HeadDim())
        self.k_cache = {l: torch.zeros(shape, dtype=dtype, device="cuda") for l in range(self.num_layers)}
        self.v_cache = {l: torch.zeros(shape, dtype=dtype, device="cuda") for l in range(self.num_layers)}
        rows = (max_sequences or kv.MaxSequences()) + 1
        # Every sequence s gets blocks s*max_blocks .. ; capped by kv_blocks.
        table = torch.zeros((rows, self.max_blocks), dtype=torch.int32)
        for s in range(rows):
            for b in range(self.max_blocks):
                table[s, b] = (s * self.max_blocks + b) % kv_blocks
        self.block_tables = table.cuda()
        self.vocab = model.VocabSize()
        self.arenas = {}

    def _load_kernels(self):
        self.functions = []
        for i in range(self.plan.KernelsLength()):
            k = self.plan.Kernels(i)
            binary = k.Binaries(0)
            cubin = bytes(binary.CubinAsNumpy()) if binary.CubinLength() else None
            image = cubin or (_s(binary.Ptx()).encode() + b"\0")
            module = ctypes.c_void_p()
            _check(_cuda.cuModuleLoadData(ctypes.byref(module), image), f"load {_s(k.Name())}")
            fn = ctypes.c_void_p()
            _check(_cuda.cuModuleGetFunction(ctypes.byref(fn), module, k.Name()),
                   f"function {_s(k.Name())}")
            self.functions.append((fn, _s(k.Name())))

    def _load_weights(self, state_dict):
        manifest = self.plan.Manifest()
        self.weights = []
        for i in range(manifest.WeightsLength()):
            w = manifest.Weights(i)
            parts = []
            for j in range(w.SourcesLength()):
                name = _s(w.Sources(j).Name())
                if name not in state_dict:
                    raise KeyError(f"weight {name} not in the model")
                parts.append(state_dict[name])
            t = parts[0] if w.Transform() == Transform.None_ else torch.cat(parts, dim=w.ConcatAxis())
            shape = [w.Shape(d) for d in range(w.ShapeLength())]
            t = t.to(device="cuda", dtype=TORCH_DTYPE[w.Dtype()]).contiguous()
            assert list(t.shape) == shape, (w.Name(), t.shape, shape)
            self.weights.append(t)

    def _arena(self, bucket, device):
        key = (_s(bucket.Name()), device)
        if key not in self.arenas:
            for d in range(bucket.DevicesLength()):
                db = bucket.Devices(d)
                if db.Device() == device:
                    self.arenas[key] = (torch.zeros(max(db.ArenaBytes(), 256), dtype=torch.uint8, device="cuda"), db)
        return self.arenas[key]

    def _pointer(self, bucket, device, arg, io):
        kind = arg.Kind()
        if kind == ArgKind.Buffer:
            arena, db = self._arena(bucket, device)
            return arena.data_ptr() + db.Buffers(arg.Index()).Offset() + arg.Offset()
        if kind == ArgKind.Weight:
            return self.weights[arg.Index()].data_ptr() + arg.Offset()
        if kind == ArgKind.KCache:
            return self.k_cache[arg.Index()].data_ptr()
        if kind == ArgKind.VCache:
            return self.v_cache[arg.Index()].data_ptr()
        if kind == ArgKind.Input:
            return io[arg.Index()].data_ptr() + arg.Offset()
        if kind == ArgKind.Scalar:
            return arg.Value()
        raise ValueError(kind)

    def _view(self, bucket, device, arg, io, shape, dtype):
        ptr = self._pointer(bucket, device, arg, io)
        n = math.prod(shape)
        # A typed view of raw memory at `ptr`.
        base = self._owner_for(ptr, bucket, device, arg, io)
        offset = ptr - base.data_ptr()
        return base.view(torch.uint8)[offset:offset + n * torch.tensor([], dtype=dtype).element_size()].view(dtype).view(shape)

    def _owner_for(self, ptr, bucket, device, arg, io):
        kind = arg.Kind()
        if kind == ArgKind.Buffer:
            return self._arena(bucket, device)[0]
        if kind == ArgKind.Weight:
            return self.weights[arg.Index()]
        if kind == ArgKind.Input:
            return io[arg.Index()]
        raise ValueError(kind)

    def run(self, bucket_name, ids, positions, slots):
        bucket = None
        for i in range(self.plan.BucketsLength()):
            if _s(self.plan.Buckets(i).Name()) == bucket_name:
                bucket = self.plan.Buckets(i)
        assert bucket is not None, bucket_name
        T = bucket.Tokens()
        assert len(ids) == T
        io = {
            InputKind.TokenIds: torch.tensor(ids, dtype=torch.int32, device="cuda"),
            InputKind.Positions: torch.tensor(positions, dtype=torch.int32, device="cuda"),
            InputKind.Slots: torch.tensor(slots, dtype=torch.int32, device="cuda"),
            InputKind.BlockTables: self.block_tables,
            InputKind.Logits: torch.zeros((T, self.vocab), dtype=torch.float32, device="cuda"),
            InputKind.NextTokens: torch.zeros(T, dtype=torch.int32, device="cuda"),
            InputKind.Temperature: torch.zeros(T, dtype=torch.float32, device="cuda"),
            InputKind.TopK: torch.zeros(T, dtype=torch.int32, device="cuda"),
            InputKind.TopP: torch.ones(T, dtype=torch.float32, device="cuda"),
            InputKind.Uniform: torch.zeros(T, dtype=torch.float32, device="cuda"),
        }
        for s in range(bucket.StepsLength()):
            step = bucket.Steps(s)
            device = step.Device()
            table = step.Op()
            if step.OpType() == Op.Launch:
                launch = Launch()
                launch.Init(table.Bytes, table.Pos)
                fn, name = self.functions[launch.Kernel()]
                values = [ctypes.c_uint64(self._pointer(bucket, device, launch.Args(a), io) & (2**64 - 1))
                          for a in range(launch.ArgsLength())]
                params = (ctypes.c_void_p * len(values))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
                shared = launch.SharedBytes()
                if shared > 48 * 1024:
                    _check(_cuda.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared), name)
                g = [launch.Grid(i) for i in range(3)]
                b = [launch.Block(i) for i in range(3)]
                _check(_cuda.cuLaunchKernel(fn, g[0], g[1], g[2], b[0], b[1], b[2], shared,
                                            ctypes.c_void_p(torch.cuda.current_stream().cuda_stream),
                                            params, None), f"launch {name}")
            elif step.OpType() == Op.Gemm:
                gemm = Gemm()
                gemm.Init(table.Bytes, table.Pos)
                dt = TORCH_DTYPE[gemm.Dtype()]
                m, n, k = gemm.M(), gemm.N(), gemm.K()
                a = self._view(bucket, device, gemm.A(), io, (m, k), dt)
                w = self._view(bucket, device, gemm.B(), io, (n, k), dt)
                c = self._view(bucket, device, gemm.C(), io, (m, n), TORCH_DTYPE[gemm.CDtype()])
                out = a.float() @ w.float().t()
                if gemm.Bias() is not None:
                    out += self._view(bucket, device, gemm.Bias(), io, (n,), dt).float()
                if gemm.Residual() is not None:
                    out += self._view(bucket, device, gemm.Residual(), io, (m, n), dt).float()
                c.copy_(out.to(c.dtype))
            elif step.OpType() == Op.Copy:
                copy = Copy()
                copy.Init(table.Bytes, table.Pos)
                nbytes = copy.Bytes()
                src = self._view(bucket, copy.SourceDevice(), copy.Source(), io, (nbytes,), torch.uint8)
                dst = self._view(bucket, copy.TargetDevice(), copy.Target(), io, (nbytes,), torch.uint8)
                dst.copy_(src)
            else:
                raise NotImplementedError(f"step kind {step.OpType()}")
        torch.cuda.synchronize()
        return io[InputKind.Logits].cpu(), io[InputKind.NextTokens].cpu()
