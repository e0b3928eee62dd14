// The GEMMs of a training step, timed in every BLAS-like library installed here, side by side:
// OpenBLAS (what LibTorch calls on Debian), BLIS, oneDNN and libxsmm, and oneDNN's bf16 GEMM
// beside them; and oneDNN's matmul primitive (core/util/onednn_matmul.h) in fp32 (mm-fp32), with
// bf16 operands (mm-bf16) and in bf32 (mm-bf32), the path that reaches AMX's tiles.
//
//   build/tools/bench/kiln_gemm_bench [--threads 1,2] [--seconds 0.3]
//
// Each shared library is opened with dlopen (RTLD_LOCAL | RTLD_DEEPBIND), so that two that export
// the same cblas_sgemm do not take each other's symbols; one missing is listed and skipped. For
// each linear layer of two models, a gpt of the default experiment (experiments/kjv_char.toml:
// width 128, rows of 16 x 64 tokens) and GPT-2 124M (width 768, vocabulary 50,304, rows of 4 x 256
// tokens), three GEMMs in fp32, as the layer's forward and backward run them:
//   fwd     Y[M,out] = X[M,in] W[out,in]^T
//   dgrad   dX[M,in] = dY[M,out] W[out,in]
//   wgrad   dW[out,in] = dY[M,out]^T X[M,in]      (K = M: the long reduction)
// Every figure is GFLOP/s (2 M N K per call over the best of three timings of as many calls as
// fill --seconds), and its share of the CPU's peak (core/util/cpu_peak.h) at that many threads.
// Each library's result is checked against OpenBLAS's (largest difference over the largest
// value); a library that disagrees beyond 1e-4 is marked.
#include <dlfcn.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#ifdef KILN_HAVE_LIBXSMM
#include <libxsmm.h>
#endif

#include "core/util/cpu_features.h"
#include "core/util/cpu_peak.h"
#include "core/util/onednn_matmul.h"

namespace {

// Row-major C[M,N] = A[M,K] (A^T if trans_a: stored [K,M]) x B[K,N] (B^T if trans_b: [N,K]).
using Gemm = std::function<void(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                const float* a, const float* b, float* c)>;

struct Library {
  std::string name;
  Gemm gemm;
  std::function<void(int)> set_threads;
  double tolerance = 1e-4;  // of the largest value, against OpenBLAS's result
  bool bf16 = false;        // bfloat16 operands: not a candidate for the fp32 "best"
};

void* open_first(const std::vector<const char*>& names) {
  for (const char* name : names) {
    if (void* handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND)) return handle;
  }
  return nullptr;
}

// cblas_sgemm(order, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc), order 101 =
// row-major, 111 = no transpose, 112 = transpose: OpenBLAS's and BLIS's CBLAS layers.
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                            int, float, float*, int);

Gemm cblas_gemm(CblasSgemm sgemm) {
  return [sgemm](bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                 float* c) {
    sgemm(101, ta ? 112 : 111, tb ? 112 : 111, static_cast<int>(m), static_cast<int>(n),
          static_cast<int>(k), 1.0f, a, static_cast<int>(ta ? m : k), b,
          static_cast<int>(tb ? k : n), 0.0f, c, static_cast<int>(n));
  };
}

std::optional<Library> openblas() {
  void* h = open_first({"libopenblas.so.0"});
  if (!h) return std::nullopt;
  auto sgemm = reinterpret_cast<CblasSgemm>(::dlsym(h, "cblas_sgemm"));
  auto threads = reinterpret_cast<void (*)(int)>(::dlsym(h, "openblas_set_num_threads"));
  if (!sgemm || !threads) return std::nullopt;
  return Library{"OpenBLAS", cblas_gemm(sgemm), threads};
}

std::optional<Library> blis() {
  void* h = open_first({"libblis.so.4", "libblis-openmp.so.4"});
  if (!h) return std::nullopt;
  auto sgemm = reinterpret_cast<CblasSgemm>(::dlsym(h, "cblas_sgemm"));
  auto threads = reinterpret_cast<void (*)(int64_t)>(::dlsym(h, "bli_thread_set_num_threads"));
  if (!sgemm || !threads) return std::nullopt;
  return Library{"BLIS", cblas_gemm(sgemm), [threads](int n) { threads(n); }};
}

// oneDNN's dnnl_sgemm(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc), row-major,
// its threads OpenMP's; and dnnl_gemm_bf16bf16f32, the same with bfloat16 A and B summed in fp32,
// what Kiln's linear layers call under precision "bf16".
template <typename In>
using OnednnGemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const In*, int64_t,
                           const In*, int64_t, float, float*, int64_t);

template <typename In>
OnednnGemm<In> onednn_symbol(const char* name) {
  void* h = open_first({"libdnnl.so.2", "libdnnl.so.3"});
  return h ? reinterpret_cast<OnednnGemm<In>>(::dlsym(h, name)) : nullptr;
}

template <typename In>
void call_onednn(OnednnGemm<In> gemm, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                 const In* a, const In* b, float* c) {
  gemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, ta ? m : k, b, tb ? k : n, 0.0f, c, n);
}

std::optional<Library> onednn() {
  const auto sgemm = onednn_symbol<float>("dnnl_sgemm");
  if (!sgemm) return std::nullopt;
  return Library{
      "oneDNN",
      [sgemm](bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
              float* c) { call_onednn(sgemm, ta, tb, m, n, k, a, b, c); },
      [](int n) { omp_set_num_threads(n); }};
}

// Each bf16 call rounds the fp32 operands to bf16 first (to nearest even), as Kiln's layers do for
// the input and the weight, so the figure includes that cost.
uint16_t to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// A [m, k] and B [k, n] rounded to bf16, in buffers the next call reuses.
std::pair<const uint16_t*, const uint16_t*> rounded_operands(const float* a, const float* b,
                                                             int64_t m, int64_t n, int64_t k) {
  static std::vector<uint16_t> a16, b16;
  a16.resize(static_cast<size_t>(m * k));
  b16.resize(static_cast<size_t>(k * n));
  std::transform(a, a + m * k, a16.begin(), to_bf16);
  std::transform(b, b + k * n, b16.begin(), to_bf16);
  return {a16.data(), b16.data()};
}

std::optional<Library> onednn_bf16() {
  const auto gemm = onednn_symbol<uint16_t>("dnnl_gemm_bf16bf16f32");
  if (!gemm) return std::nullopt;
  Library lib{"oneDNN-bf16",
              [gemm](bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                     const float* b, float* c) {
                const auto [a16, b16] = rounded_operands(a, b, m, n, k);
                call_onednn(gemm, ta, tb, m, n, k, a16, b16, c);
              },
              [](int n) { omp_set_num_threads(n); }};
  lib.tolerance = 1e-2;  // bf16's 8-bit mantissa
  lib.bf16 = true;
  return lib;
}

// oneDNN's matmul primitive, made once per shape (its first call, the warm-up, makes it); bf16
// rounds the operands in each call as onednn_bf16 does.
std::optional<Library> onednn_matmul(kiln::MatmulMath math) {
  if (!kiln::onednn_matmul_built()) return std::nullopt;
  Library lib{std::string("mm-") + kiln::matmul_math_name(math),
              [math](bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                     const float* b, float* c) {
                const kiln::MatmulShape shape{ta, tb, m, n, k, math};
                if (math != kiln::MatmulMath::bf16) return kiln::onednn_matmul(shape, a, b, c);
                const auto [a16, b16] = rounded_operands(a, b, m, n, k);
                kiln::onednn_matmul(shape, a16, b16, c);
              },
              [](int n) { omp_set_num_threads(n); }};
  if (math != kiln::MatmulMath::fp32) {
    lib.tolerance = 1e-2;
    lib.bf16 = true;
  }
  return lib;
}

// libxsmm is column-major (BLAS's): row-major C = A B is column-major C^T = B^T A^T, so A and B
// swap places. Debian ships it as static libraries only, so it is linked in where CMake found
// them (KILN_HAVE_LIBXSMM); libxsmm_sgemm_omp is its OpenMP form (libxsmmext).
std::optional<Library> libxsmm() {
#ifdef KILN_HAVE_LIBXSMM
  return Library{
      "libxsmm",
      [](bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
         float* c) {
        const char ta_c = ta ? 'T' : 'N', tb_c = tb ? 'T' : 'N';
        const libxsmm_blasint mm = n, nn = m, kk = k, ldb = tb ? k : n, lda = ta ? m : k, ldc = n;
        const float one = 1, zero = 0;
        libxsmm_sgemm_omp(&tb_c, &ta_c, &mm, &nn, &kk, &one, b, &ldb, a, &lda, &zero, c, &ldc);
      },
      [](int n) { omp_set_num_threads(n); }};
#else
  return std::nullopt;
#endif
}

struct Shape {
  std::string model, layer, pass;
  int64_t m, n, k;
  bool trans_a, trans_b;
};

// The three GEMMs of a linear layer `in` -> `out` over `rows` tokens.
void add_layer(std::vector<Shape>& shapes, const std::string& model, const std::string& layer,
               int64_t rows, int64_t in, int64_t out) {
  shapes.push_back({model, layer, "fwd", rows, out, in, false, true});
  shapes.push_back({model, layer, "dgrad", rows, in, out, false, false});
  shapes.push_back({model, layer, "wgrad", out, in, rows, true, false});
}

std::vector<Shape> step_shapes() {
  std::vector<Shape> shapes;
  for (const auto& [model, width, vocab, rows] :
       {std::tuple<std::string, int64_t, int64_t, int64_t>{"default", 128, 64, 16 * 64},
        {"gpt2-124M", 768, 50304, 4 * 256}}) {
    add_layer(shapes, model, "qkv", rows, width, 3 * width);
    add_layer(shapes, model, "attn.proj", rows, width, width);
    add_layer(shapes, model, "mlp.fc", rows, width, 4 * width);
    add_layer(shapes, model, "mlp.proj", rows, 4 * width, width);
    add_layer(shapes, model, "lm_head", rows, width, vocab);
  }
  return shapes;
}

// GFLOP/s: the best of three timings of as many calls as fill `seconds`.
double time_gemm(const Library& lib, const Shape& s, const std::vector<float>& a,
                 const std::vector<float>& b, std::vector<float>& c, double seconds) {
  using Clock = std::chrono::steady_clock;
  auto call = [&] { lib.gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, a.data(), b.data(), c.data()); };
  call();  // warm: packing buffers, thread pool
  int64_t calls = 1;
  for (;;) {
    const auto start = Clock::now();
    for (int64_t i = 0; i < calls; ++i)
      call();
    if (std::chrono::duration<double>(Clock::now() - start).count() > seconds / 3) break;
    calls *= 2;
  }
  double best = INFINITY;
  for (int round = 0; round < 3; ++round) {
    const auto start = Clock::now();
    for (int64_t i = 0; i < calls; ++i)
      call();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count() / calls);
  }
  return 2.0 * s.m * s.n * s.k / best / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> thread_counts = {1, 2};
  double seconds = 0.3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--seconds") {
      seconds = std::atof(argv[i + 1]);
    } else if (flag == "--threads") {
      thread_counts.clear();
      for (const char* p = argv[i + 1]; *p;) {
        char* end = nullptr;
        thread_counts.push_back(static_cast<int>(std::strtol(p, &end, 10)));
        p = *end == ',' ? end + 1 : end;
      }
    } else {
      std::fprintf(stderr, "usage: kiln_gemm_bench [--threads 1,2] [--seconds 0.3]\n");
      return 2;
    }
  }
  std::vector<Library> libraries;
  for (const auto& [name, open] :
       std::vector<std::pair<std::string, std::function<std::optional<Library>()>>>{
           {"OpenBLAS", openblas},
           {"BLIS", blis},
           {"oneDNN", onednn},
           {"libxsmm", libxsmm},
           {"oneDNN-bf16", onednn_bf16},
           {"mm-fp32", [] { return onednn_matmul(kiln::MatmulMath::fp32); }},
           {"mm-bf16", [] { return onednn_matmul(kiln::MatmulMath::bf16); }},
           {"mm-bf32", [] { return onednn_matmul(kiln::MatmulMath::bf32); }}}) {
    if (auto lib = open()) {
      libraries.push_back(std::move(*lib));
    } else {
      std::printf("%s: not installed here (skipped)\n", name.c_str());
    }
  }
  if (libraries.empty() || libraries.front().name != "OpenBLAS") {
    std::fprintf(stderr, "kiln_gemm_bench: OpenBLAS (the reference) is not installed\n");
    return 2;
  }
  const kiln::CpuFeatures cpu = kiln::read_cpu_features();
  const double clock = kiln::core_clock_hz();
  std::mt19937 rng(40);
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (int threads : thread_counts) {
    const auto peak = kiln::cpu_peak(cpu, "fp32", threads, clock);
    std::printf("\n== %d thread%s; fp32 peak %s\n", threads, threads == 1 ? "" : "s",
                peak ? kiln::describe_peak(*peak, "fp32").c_str() : "unknown");
    std::printf("%-10s %-10s %-6s %6s %6s %6s", "model", "layer", "pass", "M", "N", "K");
    for (const auto& lib : libraries)
      std::printf(" %10s", lib.name.c_str());
    std::printf("   best\n");
    std::map<std::string, std::map<std::string, double>> seconds_per_model;  // model -> lib -> s
    for (const Shape& s : step_shapes()) {
      std::vector<float> a(static_cast<size_t>(s.m * s.k)), b(static_cast<size_t>(s.k * s.n));
      for (float& x : a)
        x = uniform(rng);
      for (float& x : b)
        x = uniform(rng);
      std::vector<float> reference(static_cast<size_t>(s.m * s.n)), c(reference.size());
      std::printf("%-10s %-10s %-6s %6ld %6ld %6ld", s.model.c_str(), s.layer.c_str(),
                  s.pass.c_str(), static_cast<long>(s.m), static_cast<long>(s.n),
                  static_cast<long>(s.k));
      std::string best_name;
      double best_rate = 0;
      for (const auto& lib : libraries) {
        lib.set_threads(threads);
        omp_set_num_threads(threads);
        std::vector<float>& out = lib.name == "OpenBLAS" ? reference : c;
        const double rate = time_gemm(lib, s, a, b, out, seconds);
        double worst = 0, largest = 0;
        for (size_t i = 0; i < out.size(); ++i) {
          worst = std::max(worst, static_cast<double>(std::abs(out[i] - reference[i])));
          largest = std::max(largest, static_cast<double>(std::abs(reference[i])));
        }
        const bool agrees = worst <= lib.tolerance * std::max(largest, 1.0);
        std::printf(" %9.1f%s", rate, agrees ? " " : "!");
        seconds_per_model[s.model][lib.name] += 2.0 * s.m * s.n * s.k / (rate * 1e9);
        if (!lib.bf16 && rate > best_rate) best_rate = rate, best_name = lib.name;
      }
      std::printf(
          "   %s%s\n", best_name.c_str(),
          peak ? fmt::format(" ({:.0f}% of peak)", 100 * best_rate * 1e9 / peak->flops).c_str()
               : "");
    }
    for (const auto& [model, per_lib] : seconds_per_model) {
      std::printf("%s step GEMMs (all layers once):", model.c_str());
      for (const auto& lib : libraries)
        std::printf("  %s %.2f ms", lib.name.c_str(), 1e3 * per_lib.at(lib.name));
      std::printf("\n");
    }
  }
  std::printf(
      "\n! = differs from OpenBLAS by more than 1e-4 of the largest value (1e-2 for bf16)\n"
      "best: the fastest fp32 library; oneDNN-bf16 and mm-bf16 round their operands to bf16 in "
      "each call\noneDNN's instruction set: %s; its matmul implementations:\n",
      kiln::onednn_cpu_isa().c_str());
  for (const std::string& used : kiln::onednn_matmul_implementations_used())
    std::printf("  %s\n", used.c_str());
  return 0;
}
