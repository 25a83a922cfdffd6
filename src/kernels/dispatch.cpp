#include <array>
#include <mutex>

#include "core/error.h"
#include "kernels/kernels.h"

namespace tessera {
namespace {

KernelTable Build(Isa isa) {
  KernelTable t{};
  t.isa = isa;
  FillReferenceKernels(t);
  if (isa >= Isa::kAvx2) FillAvx2Kernels(t);
  if (isa >= Isa::kAvx512) FillAvx512Kernels(t);
  // Isa::kAmx adds tile kernels (matmul) on top of the AVX-512 table; none of the basic
  // kernels here benefit from tiles.
  return t;
}

}  // namespace

const KernelTable& KernelsFor(Isa isa) {
  TESSERA_CHECK(IsaSupported(isa));
  static std::array<KernelTable, 4> tables;
  static std::array<std::once_flag, 4> built;
  const auto i = static_cast<size_t>(isa);
  std::call_once(built[i], [&] { tables[i] = Build(isa); });
  return tables[i];
}

const KernelTable& ActiveKernels() {
  static const KernelTable& table = KernelsFor(ActiveIsa());
  return table;
}

}  // namespace tessera
