// AVX-512 + VBMI2 N:M sparse bf16 kernel: nm_bf16_avx512.h with 32-value word expands
// (vpexpandw). Installed only when the CPU has VBMI2.
#define NM_BF16_NAMESPACE nm_avx512vbmi2
#include "kernels/nm_bf16_avx512.h"

namespace tessera {

void FillAvx512Vbmi2Nm(KernelTable& t) {
  t.matmul_nm_bf16 = nm_avx512vbmi2::MatmulNmBf16;
  t.matmul_nm_bf16_isa = "avx512vbmi2";
}

}  // namespace tessera
