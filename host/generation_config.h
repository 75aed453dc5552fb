// What a checkpoint says about generating from it, beyond the model: the ids that end a
// generation (generation_config.json's eos_token_id, else config.json's).
#pragma once
#include <cstdint>
#include <filesystem>
#include <vector>

namespace spindle {

// The checkpoint directory's EOS ids: generation_config.json's eos_token_id (one id or a
// list), else config.json's (or its text_config's, in a vision-language wrapper); none when
// neither names one. Throws spindle::Error naming the file when it is not JSON or the field is
// not an id or a list of ids.
std::vector<uint32_t> checkpoint_eos_ids(const std::filesystem::path& dir);

}  // namespace spindle
