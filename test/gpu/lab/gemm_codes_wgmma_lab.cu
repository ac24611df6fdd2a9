// A bench for the Hopper candidate of gemm_codes_wgmma.cuh alone: the
// 4-bit projections of one Llama 3.1 8B layer (AWQ-style group 128; f16 at
// 16, 32, 64 and 100 tokens, bf16 at 32 and 100), in candidate
// configurations, beside what a 16-bit plan runs (cuBLAS on the 16-bit
// matrix) and what an int4 plan runs above 32 tokens (the codes expanded to
// a 16-bit matrix, then cuBLAS). Every result
// is checked against cuBLAS on the same dequantized matrix in f32, and the
// expansion against the host's dequantization first (a wrong expansion and a
// wrong descriptor fail apart). Not yet run: written on a machine without a
// GPU, to be measured on the first one lent.
//
//   python3 test/gpu/lab/gen_wgmma_rs.py > test/gpu/lab/wgmma_rs.inc   (checked in)
//   nvcc -std=c++17 -O3 -arch=sm_90a -I targets/CUDA/kernels -I test/gpu/lab \
//        test/gpu/lab/gemm_codes_wgmma_lab.cu -lcublas -o wgmma_lab && ./wgmma_lab
//
// The table's last column is the relative difference to the reference; a
// configuration whose descriptor strides are the wrong way round shows a
// large one there (the lab runs both orders).
#include "gemm_codes_wgmma.cuh"

#include <cublas_v2.h>
#include "lab.cuh"

#include <cmath>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

using namespace weft::kernels;

template <class M, int T_, int TN_, int K_, int NW_, int WGS_, int SPLITS_, int STAGES_,
          bool SWAP_, bool OVERLAP_ = false>
struct WCfg {
  using m_t = M;
  static constexpr int T = T_, TN = TN_, K = K_, NW = NW_, WGS = WGS_, SPLITS = SPLITS_,
                       STAGES = STAGES_;
  static constexpr bool SWAP_STRIDES = SWAP_, OVERLAP = OVERLAP_;
};

// Splits for at least `want` blocks, each split at least 4 chunks.
constexpr int wgmmaSplits(int blocks, int chunks, int want) {
  int s = 1;
  while (blocks * s < want && chunks % (2 * s) == 0 && chunks / (2 * s) >= 4)
    s *= 2;
  return s;
}

template <class C>
__global__ void __launch_bounds__(C::WGS * 128)
    wgmmaKernel(const typename C::m_t *x, const unsigned *codes, const unsigned *pairs, float *out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  wgmmaCodes<C>(x, codes, pairs, out);
#else
  __trap();
#endif
}
template <class C> __global__ void reduceKernel(const float *partials, float *out) {
  wgmmaCodesReduce<C>(partials, out);
}

// The codes expanded to M [NW][K] by the kernel's own expansion (what an
// int4 plan does above 32 tokens, in this layout): a thread per word.
template <class M, int K>
__global__ void expandKernel(const unsigned *codes, const unsigned *pairs, int nw, M *out) {
  const size_t word = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (word >= (size_t)nw * K / 8)
    return;
  // word = ((tile * K/64 + chunk) * 4 + warp) * 128 + lane * 4 + s
  const int s = int(word % 4), lane = int(word / 4 % 32), warp = int(word / 128 % 4);
  const size_t tc = word / 512;
  const int chunk = int(tc % (K / 64)), tile = int(tc / (K / 64));
  const int g = lane / 4, q = lane % 4;
  const int r0 = tile * 64 + warp * 16 + g, r1 = r0 + 8, k0 = chunk * 64 + 16 * s + 2 * q;
  const WgmmaRowPair<M> rp(pairs[(size_t)r0 * (K / 128) + k0 / 128],
                           pairs[(size_t)r1 * (K / 128) + k0 / 128]);
  unsigned a[4];
  rp.expand(codes[word], a);
  auto put = [&](int r, int k, unsigned h2) {
    *reinterpret_cast<unsigned *>(out + (size_t)r * K + k) = h2;
  };
  put(r0, k0, a[0]);
  put(r1, k0, a[1]);
  put(r0, k0 + 8, a[2]);
  put(r1, k0 + 8, a[3]);
}

template <class M> struct Layer {
  int K, NW, T;
  unsigned *codes, *pairs;
  M *x, *w16, *expanded, *y16;
  float *out, *partials, *ref;
  size_t codeBytes, pairBytes;
};

// M from a float, rounded to nearest, and back (host).
inline __half toM(float v, __half) { return __float2half(v); }
inline __nv_bfloat16 toM(float v, __nv_bfloat16) { return __float2bfloat16(v); }
inline float fromM(__half v) { return __half2float(v); }
inline float fromM(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class M> constexpr cudaDataType kBlasType =
    std::is_same<M, __half>::value ? CUDA_R_16F : CUDA_R_16BF;
template <class M> constexpr const char *kTypeName = std::is_same<M, __half>::value ? "f16" : "bf16";

// Random codes and pairs, packed in the kernel's order; the host's
// dequantized matrix of M (for cuBLAS) beside them.
template <class M> Layer<M> make(int K, int NW, int T, unsigned seed) {
  Layer<M> l{};
  l.K = K, l.NW = NW, l.T = T;
  std::mt19937 rng(seed);
  std::vector<uint8_t> q((size_t)NW * K);
  for (auto &c : q)
    c = uint8_t(rng() & 15u);
  std::vector<unsigned> pairs((size_t)NW * (K / 128));
  std::uniform_real_distribution<float> scale(0.002f, 0.02f);
  std::uniform_int_distribution<int> zero(4, 11);
  for (auto &p : pairs) {
    const M pair[2] = {toM(scale(rng), M()), toM(float(zero(rng)), M())};
    std::memcpy(&p, pair, 4);
  }
  std::vector<unsigned> codes((size_t)NW * K / 8);
  for (size_t word = 0; word < codes.size(); ++word) {
    const int s = int(word % 4), lane = int(word / 4 % 32), warp = int(word / 128 % 4);
    const size_t tc = word / 512;
    const int chunk = int(tc % (K / 64)), tile = int(tc / (K / 64));
    const int g = lane / 4, qd = lane % 4;
    const size_t r0 = (size_t)tile * 64 + warp * 16 + g, r1 = r0 + 8;
    const int k = chunk * 64 + 16 * s + 2 * qd;
    // nibble i: (row, input) as gemm_codes_wgmma.cuh lists them
    const uint8_t n[8] = {q[r0 * K + k],     q[r1 * K + k],     q[r0 * K + k + 8], q[r1 * K + k + 8],
                          q[r0 * K + k + 1], q[r1 * K + k + 1], q[r0 * K + k + 9], q[r1 * K + k + 9]};
    unsigned v = 0;
    for (int i = 0; i < 8; ++i)
      v |= unsigned(n[i]) << (4 * i);
    codes[word] = v;
  }
  // (code - zero) is exact, and so is its product with the scale in f32:
  // one rounding to M, as the kernels' multiply.
  std::vector<M> w((size_t)NW * K);
  for (size_t r = 0; r < (size_t)NW; ++r)
    for (int k = 0; k < K; ++k) {
      M p[2];
      std::memcpy(p, &pairs[r * (K / 128) + k / 128], 4);
      const float d = float(q[r * K + k]) - fromM(p[1]);
      w[r * K + k] = toM(d == 0.0f ? 0.0f : d * fromM(p[0]), M());
    }
  std::vector<M> x((size_t)T * K);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto &v : x)
    v = toM(nd(rng), M());
  l.codeBytes = codes.size() * 4, l.pairBytes = pairs.size() * 4;
  CHECK(cudaMalloc(&l.codes, l.codeBytes));
  CHECK(cudaMalloc(&l.pairs, l.pairBytes));
  CHECK(cudaMalloc(&l.x, x.size() * 2));
  CHECK(cudaMalloc(&l.w16, w.size() * 2));
  CHECK(cudaMalloc(&l.expanded, w.size() * 2));
  CHECK(cudaMalloc(&l.y16, (size_t)T * NW * 2));
  CHECK(cudaMalloc(&l.out, (size_t)T * NW * 4));
  CHECK(cudaMalloc(&l.partials, (size_t)16 * T * NW * 4));
  CHECK(cudaMalloc(&l.ref, (size_t)T * NW * 4));
  CHECK(cudaMemcpy(l.codes, codes.data(), l.codeBytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(l.pairs, pairs.data(), l.pairBytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(l.x, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(l.w16, w.data(), w.size() * 2, cudaMemcpyHostToDevice));
  return l;
}

template <class M> void release(Layer<M> &l) {
  cudaFree(l.codes), cudaFree(l.pairs), cudaFree(l.x), cudaFree(l.w16), cudaFree(l.expanded),
      cudaFree(l.y16), cudaFree(l.out), cudaFree(l.partials), cudaFree(l.ref);
}

constexpr int kIters = 50;

// Microseconds per call of launch() (lab.cuh's timeMs on the default
// stream), the last error checked.
template <class F> float timeUs(F launch) {
  const float ms = timeMs(0, kIters, launch);
  CHECK(cudaGetLastError());
  return ms * 1000.0f;
}

cublasHandle_t blas;
float sixteenUs = 0, expandUs = 0; // the 16-bit matrix's cuBLAS time, and the expanded path's

// y[T][NW] = x[T][K] w[NW][K]^T (column-major: y^T = w x^T).
template <class M> void gemm16(const Layer<M> &l, const M *w, void *y, cudaDataType yType) {
  const float one = 1.0f, zero = 0.0f;
  CHECK_BLAS(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, l.NW, l.T, l.K, &one, w, kBlasType<M>,
                          l.K, l.x, kBlasType<M>, l.K, &zero, y, yType, l.NW, CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT));
}

template <class M> double relDiff(const float *dev, const Layer<M> &l) {
  std::vector<float> got((size_t)l.T * l.NW), ref(got.size());
  CHECK(cudaMemcpy(got.data(), dev, got.size() * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(ref.data(), l.ref, ref.size() * 4, cudaMemcpyDeviceToHost));
  double err = 0, mag = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::isfinite(got[i]) ? std::fmax(err, std::fabs(double(got[i]) - ref[i])) : INFINITY;
    mag = std::fmax(mag, std::fabs(double(ref[i])));
  }
  return err / (mag > 0 ? mag : 1);
}

// The references: cuBLAS on the host's matrix (f32 out: the check; f16
// out: an fp16 plan's time), and the codes expanded then cuBLAS.
template <class M, int K> void baselines(const char *shape, Layer<M> &l) {
  gemm16(l, l.w16, l.ref, CUDA_R_32F);
  sixteenUs = timeUs([&] { gemm16(l, l.w16, l.y16, kBlasType<M>); });
  const int blocks = int(((size_t)l.NW * K / 8 + 255) / 256);
  expandKernel<M, K><<<blocks, 256>>>(l.codes, l.pairs, l.NW, l.expanded);
  CHECK(cudaDeviceSynchronize());
  size_t bad = 0;
  {
    std::vector<M> a((size_t)l.NW * K), b(a.size());
    CHECK(cudaMemcpy(a.data(), l.expanded, a.size() * 2, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(b.data(), l.w16, b.size() * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < a.size(); ++i)
      bad += std::memcmp(&a[i], &b[i], 2) != 0 && fromM(a[i]) != fromM(b[i]);
  }
  expandUs = timeUs([&] {
    expandKernel<M, K><<<blocks, 256>>>(l.codes, l.pairs, l.NW, l.expanded);
    gemm16(l, l.expanded, l.y16, kBlasType<M>);
  });
  std::printf("| %s, %s | %d | cuBLAS on the 16-bit matrix (a 16-bit plan) | | | %.2f | 1.00 | |\n",
              shape, kTypeName<M>, l.T, sixteenUs);
  std::printf("| %s, %s | %d | codes expanded, then cuBLAS (%zu weights differ from the host's) "
              "| | | %.2f | %.2f | |\n",
              shape, kTypeName<M>, l.T, bad, expandUs, sixteenUs / expandUs);
}

template <class C> void run(const char *shape, Layer<typename C::m_t> &l) {
  constexpr int smem = wgmmaCodesSharedBytes<C>();
  auto kernel = wgmmaKernel<C>;
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(C::NW / 64 / C::WGS, C::SPLITS);
  const int reduceBlocks = (C::T * C::NW + 255) / 256;
  auto step = [&] {
    kernel<<<grid, C::WGS * 128, smem>>>(l.x, l.codes, l.pairs,
                                         C::SPLITS > 1 ? l.partials : l.out);
    if constexpr (C::SPLITS > 1)
      reduceKernel<C><<<reduceBlocks, 256>>>(l.partials, l.out);
  };
  CHECK(cudaMemset(l.out, 0, (size_t)l.T * l.NW * 4));
  step();
  CHECK(cudaDeviceSynchronize());
  const double diff = relDiff(l.out, l);
  const float us = timeUs(step);
  cudaFuncAttributes attr;
  CHECK(cudaFuncGetAttributes(&attr, kernel));
  int perSm = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, C::WGS * 128, smem));
  std::printf("| %s, %s | %d | wgmma m64n%dk16, %d warpgroup%s, %d split%s, %d stages%s%s | %d x %d | "
              "%d, %d/SM | %.2f | %.2f | %.1e |\n",
              shape, kTypeName<typename C::m_t>, l.T, C::TN, C::WGS, C::WGS > 1 ? "s" : "", C::SPLITS,
              C::SPLITS > 1 ? "s" : "", C::STAGES, C::SWAP_STRIDES ? ", strides swapped" : "",
              C::OVERLAP ? ", expansion under the MMAs (serialized by ptxas)" : "",
              grid.x, grid.y, attr.numRegs, perSm, us, sixteenUs / us, diff);
}

template <class M, int T, int K, int NW> void shape(const char *name) {
  constexpr int TN = T <= 16 ? 16 : T <= 32 ? 32 : T <= 64 ? 64 : T <= 104 ? 104 : 128;
  Layer<M> l = make<M>(K, NW, T, 7 + K + NW + T);
  baselines<M, K>(name, l);
  constexpr int S1 = wgmmaSplits(NW / 64, K / 64, 264), S2 = wgmmaSplits(NW / 128, K / 64, 264),
                S4 = wgmmaSplits(NW / 256, K / 64, 132);
  run<WCfg<M, T, TN, K, NW, 1, S1, 4, false>>(name, l);
  run<WCfg<M, T, TN, K, NW, 1, S1, 4, true>>(name, l);
  run<WCfg<M, T, TN, K, NW, 2, S2, 4, false>>(name, l);
  run<WCfg<M, T, TN, K, NW, 2, S2, 4, true>>(name, l);
  run<WCfg<M, T, TN, K, NW, 2, S2, 6, false>>(name, l);
  run<WCfg<M, T, TN, K, NW, 4, S4, 4, false>>(name, l);
  run<WCfg<M, T, TN, K, NW, 2, S2, 4, false, true>>(name, l);
  release(l);
}

template <class M, int T> void layer() {
  shape<M, T, 4096, 6144>("QKV");
  shape<M, T, 4096, 4096>("O");
  shape<M, T, 4096, 28672>("gate/up");
  shape<M, T, 14336, 4096>("down");
}

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs\n\n", prop.name, prop.multiProcessorCount);
  if (prop.major < 9) {
    std::printf("wgmma needs sm_90\n");
    return 0;
  }
  CHECK_BLAS(cublasCreate(&blas));
  std::printf("| projection | tokens | configuration | grid | registers, blocks | us | 16-bit / "
              "this | rel. diff |\n|---|---|---|---|---|---|---|---|\n");
  layer<__half, 100>();
  layer<__half, 64>();
  layer<__half, 32>();
  layer<__half, 16>();
  layer<__nv_bfloat16, 100>();
  layer<__nv_bfloat16, 32>();
  cublasDestroy(blas);
  return 0;
}
