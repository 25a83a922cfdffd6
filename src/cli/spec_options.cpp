#include "cli/spec_options.h"

#include <algorithm>

#include "core/error.h"

namespace tessera::cli {

void AddSpecOptions(CLI::App* cmd, SpecArgs& a) {
  cmd->add_option("--spec", a.method, "speculative decoding: ngram (drafts copied from the prompt and output) or none")
      ->capture_default_str();
  a.k_opt = cmd->add_option("--spec-k", a.k, "most drafted tokens per step (the cost model picks 0..K each step)")
                ->capture_default_str();
  a.min_n_opt =
      cmd->add_option("--spec-min-n", a.min_n, "shortest suffix n-gram matched for a draft")->capture_default_str();
  a.max_n_opt = cmd->add_option("--spec-max-n", a.max_n, "longest suffix n-gram matched (the longest match wins)")
                    ->capture_default_str();
  a.fixed_k_opt = cmd->add_flag("--spec-fixed-k", a.fixed_k, "draft every token available up to K (no cost model)");
}

SpecOptions ParseSpecArgs(const SpecArgs& a) {
  SpecOptions o;
  if (a.method != "ngram" && a.method != "none") Fail("unknown --spec method '", a.method, "' (expected ngram or none)");
  o.method = ParseSpecMethod(a.method);
  if (o.method == SpecMethod::kNone) {
    for (const CLI::Option* opt : {a.k_opt, a.min_n_opt, a.max_n_opt, a.fixed_k_opt}) {
      if (opt && opt->count() > 0) Fail(opt->get_name(), " needs --spec ngram");
    }
    return o;
  }
  if (a.k < 0) Fail("--spec-k must be >= 0 (got ", a.k, ")");
  if (a.min_n < 1) Fail("--spec-min-n must be >= 1 (got ", a.min_n, ")");
  if (a.max_n < 1) Fail("--spec-max-n must be >= 1 (got ", a.max_n, ")");
  o.k = a.k;
  o.min_n = a.min_n;
  o.max_n = a.max_n;
  const bool min_given = a.min_n_opt && a.min_n_opt->count() > 0, max_given = a.max_n_opt && a.max_n_opt->count() > 0;
  if (min_given && !max_given) o.max_n = std::max(o.max_n, o.min_n);
  if (max_given && !min_given) o.min_n = std::min(o.min_n, o.max_n);
  if (o.min_n > o.max_n) Fail("--spec-min-n ", o.min_n, " is larger than --spec-max-n ", o.max_n);
  o.adaptive = !a.fixed_k;
  ValidateSpecOptions(o);
  return o;
}

}  // namespace tessera::cli
