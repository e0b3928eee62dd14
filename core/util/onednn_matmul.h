// Products on oneDNN's matmul primitive, the interface through which oneDNN runs its brgemm
// kernels, AMX's tile kernels among them. oneDNN's BLAS-like entry points (dnnl_sgemm,
// dnnl_gemm_bf16bf16f32, core/api/onednn_linear.cpp) never reach the tiles: a bf16 product there
// runs on AVX512-BF16 at best. A primitive is made once per shape and kept, as oneDNN intends (its
// kernels are generated code). Built where oneDNN's headers are (Debian's libdnnl-dev, the same
// library Debian's LibTorch loads); elsewhere onednn_matmul_built() is false and the linear layers
// keep the BLAS-like entry points or LibTorch's linear. Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

// How a product's operands are stored and multiplied; the sums and the result are fp32 always.
enum class MatmulMath {
  fp32,  // fp32 operands and products
  bf16,  // bfloat16 operands, rounded by the caller
  bf32,  // fp32 operands that oneDNN rounds to bf16 itself where the CPU multiplies bf16
         // natively (its fpmath mode bf16, PyTorch's float32 matmul precision "medium"), and
         // multiplies in fp32 where it does not
};
const char* matmul_math_name(MatmulMath math);  // "fp32", "bf16", "bf32"

// Row-major C[m, n] = op(A) op(B): A is [m, k] ([k, m] when trans_a), B is [k, n] ([n, k] when
// trans_b), C is fp32.
struct MatmulShape {
  bool trans_a = false;
  bool trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  MatmulMath math = MatmulMath::fp32;
};

// Whether this build has oneDNN's matmul primitive.
bool onednn_matmul_built();

// C = op(A) op(B) for a shape with m, n and k all positive; A and B are float for fp32 and bf32,
// uint16_t bfloat16 bits for bf16. Throws std::runtime_error when oneDNN refuses the shape.
void onednn_matmul(const MatmulShape& shape, const void* a, const void* b, float* c);

// The implementation oneDNN chose for `shape` ("brg:avx512_core_amx_bf16"), as its primitive
// descriptor reports it; makes the primitive if it was not yet.
std::string onednn_matmul_implementation(const MatmulShape& shape);

// The implementations of the products run so far in this process, each once, in the order first
// run, with the math they ran ("bf16 brg:avx512_core_bf16"): what `kiln bench` prints.
std::vector<std::string> onednn_matmul_implementations_used();

// The widest instruction set oneDNN's kernels may use in this process, by the names of
// ONEDNN_MAX_CPU_ISA lower-cased: "avx512_core_amx", "avx512_core_bf16", "avx2"; "" unbuilt.
std::string onednn_cpu_isa();

// Caps oneDNN's instruction set for this process at `isa` (ONEDNN_MAX_CPU_ISA's names:
// "AVX512_CORE_AMX", "AVX512_CORE_BF16", "AVX512_CORE"), as that variable does. Possible only
// before oneDNN generates its first kernel: false after that, or for a name it does not know.
bool pin_onednn_cpu_isa(const std::string& isa);

// Whether bf32 products round their operands to bf16 on the instruction set oneDNN runs here
// (AMX, in oneDNN 2.6), rather than multiplying in fp32.
bool onednn_bf32_rounds();

// Whether the linear layers take `math`'s products through the matmul primitive rather than the
// BLAS-like entry point, on the instruction set oneDNN runs here: the faster of the two as
// measured (tools/bench/gemm.sh, docs/benchmarks.md). bf32 has no BLAS-like entry point.
bool onednn_matmul_preferred(MatmulMath math);

}  // namespace kiln
