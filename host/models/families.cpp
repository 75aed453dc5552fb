#include "host/models/families.h"

namespace spindle {

const FamilyModel* family_model(Family f) {
  switch (f) {
    case Family::Qwen3: return &kQwen3Model;
    case Family::Qwen3Moe: return &kQwen3MoeModel;
    default: return nullptr;
  }
}

}  // namespace spindle
