/* Raw asset bytes linked into libtessera; sizes are computed from the end labels. */
  .section .rodata
  .balign 16
  .global tessera_asset_tokenizer_json_zst
tessera_asset_tokenizer_json_zst:
  .incbin "o200k_harmony/tokenizer.json.zst"
  .global tessera_asset_tokenizer_json_zst_end
tessera_asset_tokenizer_json_zst_end:
  .balign 16
  .global tessera_asset_tokenizer_config_json
tessera_asset_tokenizer_config_json:
  .incbin "o200k_harmony/tokenizer_config.json"
  .global tessera_asset_tokenizer_config_json_end
tessera_asset_tokenizer_config_json_end:
  .section .note.GNU-stack,"",@progbits
