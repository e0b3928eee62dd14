#include "core/util/onednn_matmul.h"

#include <stdexcept>

#include <fmt/format.h>

#ifdef KILN_HAVE_ONEDNN
#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace kiln {

const char* matmul_math_name(MatmulMath math) {
  switch (math) {
    case MatmulMath::fp32: return "fp32";
    case MatmulMath::bf16: return "bf16";
    case MatmulMath::bf32: return "bf32";
  }
  return "?";
}

#ifdef KILN_HAVE_ONEDNN
namespace {

// The instruction sets by ONEDNN_MAX_CPU_ISA's spelling, lower-cased. oneDNN 3 names AMX
// avx10_1_512_amx too (the same value): the first name of a value is the one reported.
const std::vector<std::pair<dnnl::cpu_isa, std::string>>& isa_names() {
  static const std::vector<std::pair<dnnl::cpu_isa, std::string>> names = {
    {dnnl::cpu_isa::sse41, "sse41"},
    {dnnl::cpu_isa::avx, "avx"},
    {dnnl::cpu_isa::avx2, "avx2"},
    {dnnl::cpu_isa::avx2_vnni, "avx2_vnni"},
    {dnnl::cpu_isa::avx512_core, "avx512_core"},
    {dnnl::cpu_isa::avx512_core_vnni, "avx512_core_vnni"},
    {dnnl::cpu_isa::avx512_core_bf16, "avx512_core_bf16"},
    {dnnl::cpu_isa::avx512_core_amx, "avx512_core_amx"},
#if DNNL_VERSION_MAJOR >= 3
    {dnnl::cpu_isa::avx2_vnni_2, "avx2_vnni_2"},
    {dnnl::cpu_isa::avx512_core_fp16, "avx512_core_fp16"},
    {dnnl::cpu_isa::avx512_core_amx_fp16, "avx512_core_amx_fp16"},
#endif
  };
  return names;
}

// Whether oneDNN runs AMX's tiles here. Its ISA values are bit sets, each holding the bits of the
// sets it extends (oneDNN 3's AMX with fp16 holds AMX's).
bool runs_amx() {
  const auto amx = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_amx);
  return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & amx) == amx;
}

using ShapeKey = std::tuple<bool, bool, int64_t, int64_t, int64_t, MatmulMath>;

struct Product {
  dnnl::matmul primitive;
  dnnl::memory::desc a, b, c;
  std::string implementation;
};

// The primitives made so far, one per shape. A run's shapes are few and fixed (a layer's
// forward and two backward products, per micro-batch size); the bound only keeps a process that
// sees ever new shapes (generation with a growing context) from keeping them all.
class Products {
 public:
  static Products& instance() {
    static Products products;
    return products;
  }

  // Shared, so that a caller still running a product outlives the bound's clear() below.
  std::shared_ptr<const Product> find(const MatmulShape& s) {
    const ShapeKey key{s.trans_a, s.trans_b, s.m, s.n, s.k, s.math};
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = products_.find(key);
    if (found != products_.end()) return found->second;
    if (products_.size() >= kMaxProducts) products_.clear();
    auto made = std::make_shared<const Product>(make(s));
    const std::string used = fmt::format("{} {}", matmul_math_name(s.math), made->implementation);
    if (std::find(used_.begin(), used_.end(), used) == used_.end()) used_.push_back(used);
    products_.emplace(key, made);
    return made;
  }

  std::vector<std::string> used() {
    std::lock_guard<std::mutex> lock(mutex_);
    return used_;
  }

  const dnnl::engine& engine() const { return engine_; }

 private:
  static constexpr size_t kMaxProducts = 256;

  Product make(const MatmulShape& s) const {
    using dims = dnnl::memory::dims;
    const auto operand =
        s.math == MatmulMath::bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
    // A transposed operand is the plain one read with swapped strides.
    const dnnl::memory::desc a({s.m, s.k}, operand, s.trans_a ? dims{1, s.m} : dims{s.k, 1});
    const dnnl::memory::desc b({s.k, s.n}, operand, s.trans_b ? dims{1, s.k} : dims{s.n, 1});
    const dnnl::memory::desc c({s.m, s.n}, dnnl::memory::data_type::f32, dims{s.n, 1});
    dnnl::primitive_attr attr;
    if (s.math == MatmulMath::bf32) attr.set_fpmath_mode(dnnl::fpmath_mode::bf16);
#if DNNL_VERSION_MAJOR >= 3
    const dnnl::matmul::primitive_desc pd(engine_, a, b, c, attr);
#else
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine_);
#endif
    return {dnnl::matmul(pd), a, b, c, pd.impl_info_str()};
  }

  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  std::mutex mutex_;
  std::map<ShapeKey, std::shared_ptr<const Product>> products_;
  std::vector<std::string> used_;
};

std::string describe(const MatmulShape& s) {
  return fmt::format("{} [{}, {}] x [{}, {}]{}{} on instruction set {}", matmul_math_name(s.math),
                     s.m, s.k, s.k, s.n, s.trans_a ? ", A transposed" : "",
                     s.trans_b ? ", B transposed" : "", onednn_cpu_isa());
}

}  // namespace

bool onednn_matmul_built() {
  return true;
}

void onednn_matmul(const MatmulShape& shape, const void* a, const void* b, float* c) {
  try {
    Products& products = Products::instance();
    const std::shared_ptr<const Product> found = products.find(shape);
    const Product& p = *found;
    // One stream per thread: a stream orders the work submitted to it, and on the CPU it runs
    // each primitive to completion before execute returns.
    thread_local dnnl::stream stream(products.engine());
    const dnnl::engine& engine = products.engine();
    p.primitive.execute(stream,
                        {{DNNL_ARG_SRC, dnnl::memory(p.a, engine, const_cast<void*>(a))},
                         {DNNL_ARG_WEIGHTS, dnnl::memory(p.b, engine, const_cast<void*>(b))},
                         {DNNL_ARG_DST, dnnl::memory(p.c, engine, c)}});
  } catch (const dnnl::error& e) {
    throw std::runtime_error(
        fmt::format("oneDNN's matmul failed on {}: {}", describe(shape), e.what()));
  }
}

std::string onednn_matmul_implementation(const MatmulShape& shape) {
  try {
    return Products::instance().find(shape)->implementation;
  } catch (const dnnl::error& e) {
    throw std::runtime_error(
        fmt::format("oneDNN has no matmul for {}: {}", describe(shape), e.what()));
  }
}

std::vector<std::string> onednn_matmul_implementations_used() {
  return Products::instance().used();
}

std::string onednn_cpu_isa() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  for (const auto& [value, name] : isa_names()) {
    if (value == isa) return name;
  }
  return fmt::format("isa 0x{:x}", static_cast<unsigned>(isa));
}

bool pin_onednn_cpu_isa(const std::string& isa) {
  for (const auto& [value, name] : isa_names()) {
    std::string upper = name;
    for (char& ch : upper)
      ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (upper == isa) return dnnl::set_max_cpu_isa(value) == dnnl::status::success;
  }
  return false;
}

bool onednn_bf32_rounds() {
  return runs_amx();
}

bool onednn_matmul_preferred(MatmulMath math) {
  if (math == MatmulMath::bf32) return true;
  // The BLAS-like bf16 GEMM stops at AVX512-BF16; only the primitive takes AMX's tiles. Elsewhere
  // the BLAS-like entry points were the faster in fp32 and bf16 (docs/benchmarks.md).
  return math == MatmulMath::bf16 && runs_amx();
}

#else  // no oneDNN headers in this build

bool onednn_matmul_built() {
  return false;
}
void onednn_matmul(const MatmulShape&, const void*, const void*, float*) {
  throw std::logic_error("this build has no oneDNN matmul (no oneDNN headers when it was built)");
}
std::string onednn_matmul_implementation(const MatmulShape& shape) {
  onednn_matmul(shape, nullptr, nullptr, nullptr);
  return "";
}
std::vector<std::string> onednn_matmul_implementations_used() {
  return {};
}
std::string onednn_cpu_isa() {
  return "";
}
bool pin_onednn_cpu_isa(const std::string&) {
  return false;
}
bool onednn_bf32_rounds() {
  return false;
}
bool onednn_matmul_preferred(MatmulMath) {
  return false;
}

#endif

}  // namespace kiln
