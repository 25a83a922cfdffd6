#include "tokenizer/embedded_assets.h"

#include <zstd.h>

#include "core/error.h"

extern "C" {
extern const char tessera_asset_tokenizer_json_zst[];
extern const char tessera_asset_tokenizer_json_zst_end[];
extern const char tessera_asset_tokenizer_config_json[];
extern const char tessera_asset_tokenizer_config_json_end[];
}

namespace tessera {

const std::string& EmbeddedTokenizerJson() {
  static const std::string text = [] {
    const size_t packed = tessera_asset_tokenizer_json_zst_end - tessera_asset_tokenizer_json_zst;
    const unsigned long long size = ZSTD_getFrameContentSize(tessera_asset_tokenizer_json_zst, packed);
    TESSERA_CHECK(size != ZSTD_CONTENTSIZE_ERROR && size != ZSTD_CONTENTSIZE_UNKNOWN);
    std::string out(size, '\0');
    const size_t got = ZSTD_decompress(out.data(), out.size(), tessera_asset_tokenizer_json_zst, packed);
    TESSERA_CHECK(!ZSTD_isError(got) && got == size);
    return out;
  }();
  return text;
}

std::string_view EmbeddedTokenizerConfigJson() {
  return {tessera_asset_tokenizer_config_json,
          static_cast<size_t>(tessera_asset_tokenizer_config_json_end - tessera_asset_tokenizer_config_json)};
}

}  // namespace tessera
