// A model directory for chat-format tests: the shipped tiny-llama's weights (symlinked) with a
// family tokenizer of tests/data/tokenizer/families and a Hub chat template of
// tests/data/chat_templates, so that a family's template, stop tokens, reasoning and tool calls
// run through the real server code on a model that loads in milliseconds. Removed with the object.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace tessera {

class ChatModelDir {
 public:
  // `variant`: a family tokenizer ("mistral", "deepseek3"); `template_kind`: a template file
  // ("mistral-v0.3", "deepseek-r1"). tokenizer.json is copied only when `with_tokenizer_json`
  // (a test may load the tokenizer from the family file itself).
  ChatModelDir(const std::string& variant, const std::string& template_kind, bool with_tokenizer_json = true) {
    namespace fs = std::filesystem;
    path_ = fs::path(::testing::TempDir()) /
            ("tessera_chat_model_" + template_kind + "_" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
    const fs::path llama = fs::path(TESSERA_SOURCE_DIR) / "models" / "tiny-llama";
    const fs::path data = fs::path(TESSERA_SOURCE_DIR) / "tests" / "data";
    const fs::path family = data / "tokenizer" / "families" / variant;
    for (const char* f : {"config.json", "generation_config.json", "model.safetensors"}) {
      fs::create_symlink(llama / f, path_ / f);
    }
    if (with_tokenizer_json) fs::copy_file(family / "tokenizer.json", path_ / "tokenizer.json");
    fs::copy_file(family / "tokenizer_config.json", path_ / "tokenizer_config.json");
    fs::copy_file(data / "chat_templates" / (template_kind + ".jinja"), path_ / "chat_template.jinja");
  }
  ~ChatModelDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ChatModelDir(const ChatModelDir&) = delete;
  ChatModelDir& operator=(const ChatModelDir&) = delete;
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace tessera
