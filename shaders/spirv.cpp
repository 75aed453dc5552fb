#include "shaders/spirv.h"

namespace spindle::shaders {
namespace {

const uint32_t kPersistent[] =
#include "persistent.spv.inc"
    ;
const uint32_t kPersistentSmIds[] =
#include "persistent_sm.spv.inc"
    ;
const uint32_t kNumericsTest[] =
#include "numerics_test.spv.inc"
    ;
const uint32_t kCopy[] =
#include "copy.spv.inc"
    ;

}  // namespace

std::span<const uint32_t> persistent() { return kPersistent; }
std::span<const uint32_t> persistent_sm_ids() { return kPersistentSmIds; }
std::span<const uint32_t> numerics_test() { return kNumericsTest; }
std::span<const uint32_t> copy() { return kCopy; }

}  // namespace spindle::shaders
