// CPU feature detection and the process-wide instruction-set level.
//
// Detection runs once (first call). The kernel level is the best of scalar < avx2 < avx512 < amx
// that the CPU and the OS both support, capped by the environment variable
// TESSERA_ISA=scalar|avx2|avx512|amx (asking for more than the machine has falls back to the
// best available level with a warning on stderr; an unknown name is an error).
#pragma once

#include <string>

namespace tessera {

enum class Isa : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kAmx = 3 };

const char* IsaName(Isa isa);
// Parses "scalar", "avx2", "avx512" or "amx"; throws tessera::Error otherwise.
Isa ParseIsa(const std::string& name);

struct CpuFeatures {
  std::string vendor;
  std::string brand;
  bool avx2 = false, fma = false, f16c = false, bmi2 = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512cd = false;
  bool avx512_vnni = false, avx512_vbmi = false, avx512_vbmi2 = false, avx512_bf16 = false, avx512_fp16 = false;
  bool avx_vnni = false;
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;
  // The OS saves the AVX (YMM) and AVX-512 (opmask/ZMM) state on context switches.
  bool os_avx = false, os_avx512 = false;
  // Linux granted this process the AMX tile-data state (arch_prctl ARCH_REQ_XCOMP_PERM).
  bool amx_permitted = false;

  // Highest level this machine can run, ignoring TESSERA_ISA.
  Isa BestIsa() const;
  // "AVX2 = 1 | AVX512 = 1 | ..." in the style users paste into bug reports.
  std::string Summary() const;
};

// Detected once per process.
const CpuFeatures& GetCpuFeatures();

// The level every kernel table is built for: BestIsa() capped by TESSERA_ISA. Read once.
Isa ActiveIsa();

// True when `isa` can run on this machine (used by tests to enumerate paths).
bool IsaSupported(Isa isa);

}  // namespace tessera
