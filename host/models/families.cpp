#include "host/models/families.h"

#include <stdexcept>

namespace spindle {

const FamilyModel& family_model(Family f) {
  switch (f) {
    case Family::Qwen3: return kQwen3Model;
    case Family::Qwen3Moe: return kQwen3MoeModel;
    case Family::Qwen3Next: return kQwen3NextModel;
    case Family::Qwen3_5: return kQwen3_5Model;
    case Family::Qwen3_5Moe: return kQwen3_5MoeModel;
  }
  throw std::logic_error("unknown model family");
}

}  // namespace spindle
