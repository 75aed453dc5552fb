#include "host/models/families.h"

namespace spindle {

const FamilyModel* family_model(Family f) {
  switch (f) {
    case Family::Qwen3: return &kQwen3Model;
    case Family::Qwen3Moe: return &kQwen3MoeModel;
    case Family::Qwen3_5: return &kQwen3_5Model;
    default: return nullptr;
  }
}

}  // namespace spindle
