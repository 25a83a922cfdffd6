// AVX-512 (F/BW/VL/DQ) N:M sparse bf16 kernel: nm_bf16_avx512.h with 16-value float expands.
#define NM_BF16_NAMESPACE nm_avx512
#include "kernels/nm_bf16_avx512.h"

namespace tessera {

void FillAvx512Nm(KernelTable& t) {
  t.matmul_nm_bf16 = nm_avx512::MatmulNmBf16;
  t.matmul_nm_bf16_isa = "avx512";
}

}  // namespace tessera
