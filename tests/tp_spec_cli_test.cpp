// `mpirun -np 2 tessera generate ... --tp 2 --spec ngram` (issue 13 point 1): the job emits exactly
// what one process emits, with drafts accepted, on a prompt the model copies (the synthetic tiny
// gpt-oss with the real tokenizer, made to copy: tests/copying_model.h). The deterministic
// check that ranks follow rank 0's choice of k is tests/parallel/tp_model_test.cpp
// SpeculationFollowsRankZero; this one runs the command a user runs.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "copying_model.h"
#include "core/mapped_file.h"
#include "model/synth.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

TEST(TpSpeculationCli, MatchesOneProcessWithDraftsAccepted) {
  if (std::system("command -v mpirun > /dev/null 2>&1") != 0) GTEST_SKIP() << "mpirun is not installed";
  const std::string root = ::testing::TempDir() + "tessera_tp_spec_" + std::to_string(::getpid());
  fs::remove_all(root);
  SynthOptions options;
  options.config_json = SynthPresetConfigJson("tiny");
  options.seed = 21;
  WriteSyntheticModel(root + "/synth", options);
  test::WriteCopyingModel(root + "/synth", root + "/copy");
  const std::string generate = std::string(TESSERA_CLI_PATH) + " generate -m " + root +
                               "/copy --raw -p 'one two three four' -n 40 --temp 0 --json --spec ngram";
  auto run = [&](const std::string& prefix, const std::string& suffix, const std::string& out) {
    const std::string cmd = prefix + generate + suffix + " > " + out + " 2> " + out + ".err";
    const int status = std::system(cmd.c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd << ": " << ReadFile(out + ".err");
    return nlohmann::json::parse(ReadFile(out));
  };
  const nlohmann::json one = run("", "", root + "/one.json");
  const nlohmann::json tp = run(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 timeout 300 "
      "mpirun --oversubscribe -np 2 ",
      " --tp 2", root + "/tp.json");
  EXPECT_EQ(tp.at("tokens"), one.at("tokens"));
  EXPECT_EQ(tp.at("text"), one.at("text"));
  EXPECT_GT(tp.at("spec").at("accepted").get<int64_t>(), 0) << tp.dump();
  fs::remove_all(root);
}

}  // namespace
}  // namespace tessera
