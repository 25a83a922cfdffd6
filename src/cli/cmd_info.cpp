// `tessera info`: detected CPU features, the chosen kernel path and the thread count.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/chat_template.h"
#include "engine/grammar.h"
#include "kernels/kernels.h"
#include "model/architecture.h"
#include "model/linear.h"

namespace tessera::cli {

void RegisterInfo(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "print CPU features, the kernel path and the thread count");
  auto chat_templates = std::make_shared<bool>(false);
  cmd->add_flag("--chat-templates", *chat_templates, "list the names --chat-template accepts, one per line");
  cmd->callback([chat_templates] {
    if (*chat_templates) {
      for (const std::string& name : ChatTemplateNames()) std::printf("%s\n", name.c_str());
      return;
    }
    const CpuFeatures& cpu = GetCpuFeatures();
    const Isa active = ActiveIsa();
    const KernelTable& k = ActiveKernels();
    std::printf("tessera %s\n", TESSERA_VERSION);
    std::printf("cpu: %s (%s)\n", cpu.brand.empty() ? "unknown" : cpu.brand.c_str(), cpu.vendor.c_str());
    std::printf("system_info: %s\n", cpu.Summary().c_str());
    std::printf("isa: best=%s active=%s%s\n", IsaName(cpu.BestIsa()), IsaName(active),
                active != cpu.BestIsa() ? " (capped by TESSERA_ISA)" : "");
    std::printf("kernels: convert_bf16_f32=%s dot_bf16_f32=%s matmul_bf16=%s matmul_f16=%s matmul_f32=%s "
                "matmul_mxfp4=%s rope_apply=%s "
                "gather_reduce=%s attend=%s quantize_q8=%s matmul_q8_mxfp4=%s matmul_q8_int8=%s matmul_int4=%s "
                "matmul_q8_int4=%s matmul_nm_bf16=%s matmul_q8_nm_int8=%s decode_fp8_row=%s matmul_fp8_dot=%s "
                "matmul_fp8_bf16=%s matmul_q8_ggml=%s\n",
                k.convert_bf16_f32_isa, k.dot_bf16_f32_isa, k.matmul_bf16_isa, k.matmul_f16_isa,
                k.matmul_f32_isa, k.matmul_mxfp4_isa,
                k.rope_apply_isa, k.gather_reduce_isa, k.attend_isa, k.quantize_q8_isa, k.matmul_q8_mxfp4_isa,
                k.matmul_q8_int8_isa, k.matmul_int4_isa, k.matmul_q8_int4_isa, k.matmul_nm_bf16_isa,
                k.matmul_q8_nm_int8_isa, k.decode_fp8_row_isa, k.matmul_fp8_dot_isa, k.matmul_fp8_bf16_isa,
                k.matmul_q8_ggml_isa);
    std::printf("threads: %d (cpus available: %d)\n", GlobalPool().num_threads(), DefaultThreadCount());
    // What model/architecture.h and model/linear.h describe: the model_types and weight formats.
    std::string archs;
    for (const Architecture& a : Architectures()) archs += StrCat(archs.empty() ? "" : ", ", a.model_type, " (", a.hf_class, ")");
    std::printf("architectures: %s\n", archs.c_str());
    std::string formats;
    for (LinearFormat f : LinearFormats()) {
      formats += StrCat(formats.empty() ? "" : ", ", LinearFormatName(f));
    }
    std::printf("weight formats: %s\n", formats.c_str());
    std::printf("structured outputs: %s\n", GrammarVocabulary::Available() ? "yes (xgrammar)" : "no (scripts/setup_xgrammar.sh)");
  });
}

}  // namespace tessera::cli
