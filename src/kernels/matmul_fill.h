// Fillers for the matmul entries of KernelTable (matmul_bf16, matmul_f16, matmul_f32,
// matmul_mxfp4), one per ISA file.
// FillAvx2Kernels / FillAvx512Kernels call them, so the matmul kernels live in their own files
// (matmul_avx2.cpp, matmul_avx512.cpp) while dispatch stays in one place.
#pragma once

#include "kernels/kernels.h"

namespace tessera {

void FillAvx2Matmul(KernelTable& table);
void FillAvx512Matmul(KernelTable& table);

}  // namespace tessera
