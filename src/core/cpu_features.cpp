#include "core/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace tessera {
namespace {

// arch_prctl codes from <asm/prctl.h>; spelled out so old headers still build.
constexpr int kArchGetXcompPerm = 0x1022;
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtileData = 18;

void Cpuid(uint32_t leaf, uint32_t subleaf, uint32_t r[4]) {
  __cpuid_count(leaf, subleaf, r[0], r[1], r[2], r[3]);
}

uint64_t ReadXcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

bool RequestAmxPermission() {
  // Linux >= 5.16 hands out the 8 KiB tile-data state only on request.
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) != 0) return false;
  unsigned long bitmask = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &bitmask) != 0) return false;
  return (bitmask & (1ul << kXfeatureXtileData)) != 0;
}

CpuFeatures Detect() {
  CpuFeatures f;
  uint32_t r[4];
  Cpuid(0, 0, r);
  const uint32_t max_leaf = r[0];
  char vendor[13] = {};
  std::memcpy(vendor + 0, &r[1], 4);
  std::memcpy(vendor + 4, &r[3], 4);
  std::memcpy(vendor + 8, &r[2], 4);
  f.vendor = vendor;

  Cpuid(0x80000000u, 0, r);
  if (r[0] >= 0x80000004u) {
    char brand[49] = {};
    for (uint32_t i = 0; i < 3; ++i) {
      Cpuid(0x80000002u + i, 0, r);
      std::memcpy(brand + 16 * i, r, 16);
    }
    f.brand = brand;
    const size_t first = f.brand.find_first_not_of(' ');
    f.brand = first == std::string::npos ? "" : f.brand.substr(first);
  }

  Cpuid(1, 0, r);
  const bool osxsave = (r[2] >> 27) & 1;
  f.fma = (r[2] >> 12) & 1;
  f.f16c = (r[2] >> 29) & 1;
  const bool avx = (r[2] >> 28) & 1;
  if (osxsave) {
    const uint64_t xcr0 = ReadXcr0();
    f.os_avx = avx && (xcr0 & 0x6) == 0x6;            // SSE + AVX state
    f.os_avx512 = f.os_avx && (xcr0 & 0xE0) == 0xE0;  // opmask + ZMM_Hi256 + Hi16_ZMM
  }
  if (max_leaf >= 7) {
    Cpuid(7, 0, r);
    const uint32_t ebx = r[1], ecx = r[2], edx = r[3];
    f.avx2 = (ebx >> 5) & 1;
    f.bmi2 = (ebx >> 8) & 1;
    f.avx512f = (ebx >> 16) & 1;
    f.avx512dq = (ebx >> 17) & 1;
    f.avx512cd = (ebx >> 28) & 1;
    f.avx512bw = (ebx >> 30) & 1;
    f.avx512vl = (ebx >> 31) & 1;
    f.avx512_vbmi = (ecx >> 1) & 1;
    f.avx512_vbmi2 = (ecx >> 6) & 1;
    f.avx512_vnni = (ecx >> 11) & 1;
    f.avx512_fp16 = (edx >> 23) & 1;
    f.amx_bf16 = (edx >> 22) & 1;
    f.amx_tile = (edx >> 24) & 1;
    f.amx_int8 = (edx >> 25) & 1;
    Cpuid(7, 1, r);
    f.avx_vnni = (r[0] >> 4) & 1;
    f.avx512_bf16 = (r[0] >> 5) & 1;
  }
  if (!f.os_avx) {
    f.avx2 = f.fma = f.f16c = f.avx_vnni = false;
  }
  if (!f.os_avx512) {
    f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512cd = false;
    f.avx512_vnni = f.avx512_vbmi = f.avx512_vbmi2 = f.avx512_bf16 = f.avx512_fp16 = false;
  }
  if (f.amx_tile) f.amx_permitted = RequestAmxPermission();
  return f;
}

}  // namespace

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kAmx: return "amx";
  }
  return "?";
}

Isa ParseIsa(const std::string& name) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAmx}) {
    if (name == IsaName(isa)) return isa;
  }
  Fail("TESSERA_ISA: unknown instruction set '", name, "' (expected scalar, avx2, avx512 or amx)");
}

Isa CpuFeatures::BestIsa() const {
  const bool has_avx2 = avx2 && fma && f16c && bmi2;
  const bool has_avx512 = has_avx2 && avx512f && avx512bw && avx512vl && avx512dq;
  const bool has_amx = has_avx512 && amx_tile && amx_int8 && amx_bf16 && amx_permitted;
  if (has_amx) return Isa::kAmx;
  if (has_avx512) return Isa::kAvx512;
  if (has_avx2) return Isa::kAvx2;
  return Isa::kScalar;
}

std::string CpuFeatures::Summary() const {
  std::string s;
  auto add = [&](const char* name, bool on) {
    if (!s.empty()) s += " | ";
    s += name;
    s += on ? " = 1" : " = 0";
  };
  add("AVX2", avx2);
  add("FMA", fma);
  add("F16C", f16c);
  add("AVX512F", avx512f);
  add("AVX512BW", avx512bw);
  add("AVX512VL", avx512vl);
  add("AVX512DQ", avx512dq);
  add("AVX512_VNNI", avx512_vnni);
  add("AVX512_VBMI", avx512_vbmi);
  add("AVX512_VBMI2", avx512_vbmi2);
  add("AVX512_BF16", avx512_bf16);
  add("AVX512_FP16", avx512_fp16);
  add("AVX_VNNI", avx_vnni);
  add("AMX_TILE", amx_tile);
  add("AMX_INT8", amx_int8);
  add("AMX_BF16", amx_bf16);
  add("AMX_PERMITTED", amx_permitted);
  return s;
}

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

bool IsaSupported(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(GetCpuFeatures().BestIsa()); }

Isa ActiveIsa() {
  static const Isa active = [] {
    const Isa best = GetCpuFeatures().BestIsa();
    const char* env = std::getenv("TESSERA_ISA");
    if (env == nullptr || *env == '\0') return best;
    const Isa wanted = ParseIsa(env);
    if (!IsaSupported(wanted)) {
      // A cap above the machine's best is not an error (scripts set it everywhere), but say so.
      std::fprintf(stderr, "tessera: warning: TESSERA_ISA=%s is not available on this CPU; using %s\n",
                   env, IsaName(best));
      return best;
    }
    return wanted;
  }();
  return active;
}

}  // namespace tessera
