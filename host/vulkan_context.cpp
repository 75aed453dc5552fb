#include "host/vulkan_context.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "host/vulkan_devices.h"
#include "tasks/error.h"

namespace spindle::vk {
namespace {

constexpr uint32_t kApiVersion = VK_API_VERSION_1_2;

VkInstance make_instance() {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "spindle";
  app.apiVersion = kApiVersion;
  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.pApplicationInfo = &app;
  VkInstance instance = VK_NULL_HANDLE;
  const VkResult r = vkCreateInstance(&info, nullptr, &instance);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
    throw Error("vulkan: the loader found no Vulkan driver (" + result_name(r) +
                "); for the CPU driver install mesa-vulkan-drivers, or point VK_DRIVER_FILES at a driver's ICD json");
  check(r, "vkCreateInstance");
  return instance;
}

// Destroys the instance on every path out of a listing.
struct InstanceGuard {
  VkInstance instance;
  ~InstanceGuard() { vkDestroyInstance(instance, nullptr); }
};

std::vector<VkPhysicalDevice> physical_devices(VkInstance instance) {
  uint32_t n = 0;
  check(vkEnumeratePhysicalDevices(instance, &n, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> devices(n);
  check(vkEnumeratePhysicalDevices(instance, &n, devices.data()), "vkEnumeratePhysicalDevices");
  devices.resize(n);
  return devices;
}

bool has_extension(VkPhysicalDevice p, const char* name) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(p, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> ext(n);
  vkEnumerateDeviceExtensionProperties(p, nullptr, &n, ext.data());
  return std::any_of(ext.begin(), ext.end(), [&](const auto& e) { return std::strcmp(e.extensionName, name) == 0; });
}

// A queue family with compute, or UINT32_MAX.
uint32_t compute_queue_family(VkPhysicalDevice p) {
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(p, &n, nullptr);
  std::vector<VkQueueFamilyProperties> families(n);
  vkGetPhysicalDeviceQueueFamilyProperties(p, &n, families.data());
  for (uint32_t i = 0; i < n; ++i)
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) return i;
  return UINT32_MAX;
}

// The feature structures the shaders need, chained for a query or for device creation.
struct Features {
  VkPhysicalDeviceShaderClockFeaturesKHR clock{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CLOCK_FEATURES_KHR};
  VkPhysicalDeviceVulkan12Features v12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, &clock};
  VkPhysicalDeviceVulkan11Features v11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, &v12};
  VkPhysicalDeviceFeatures2 base{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &v11};

  Features() = default;
  Features(const Features&) = delete;

  // Only what the shaders use.
  void require() {
    base.features.shaderInt64 = base.features.shaderInt16 = VK_TRUE;
    v11.storageBuffer16BitAccess = VK_TRUE;
    v12.bufferDeviceAddress = v12.vulkanMemoryModel = v12.vulkanMemoryModelDeviceScope = VK_TRUE;
    clock.shaderDeviceClock = VK_TRUE;
  }
};

// Why the executor cannot run on the device, or "" when it can.
std::string unusable_reason(VkPhysicalDevice p) {
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(p, &props);
  if (props.apiVersion < kApiVersion) return "needs Vulkan 1.2";
  if (compute_queue_family(p) == UINT32_MAX) return "no compute queue";
  if (!has_extension(p, VK_KHR_SHADER_CLOCK_EXTENSION_NAME)) return "no " VK_KHR_SHADER_CLOCK_EXTENSION_NAME;
  VkPhysicalDeviceVulkan11Properties v11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES};
  VkPhysicalDeviceProperties2 props2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &v11};
  vkGetPhysicalDeviceProperties2(p, &props2);
  if (!(v11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ||
      !(v11.subgroupSupportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT))
    return "no subgroup shuffle in compute shaders";
  Features f;
  vkGetPhysicalDeviceFeatures2(p, &f.base);
  std::string missing;
  const auto need = [&](VkBool32 have, const char* name) {
    if (!have) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
  need(f.base.features.shaderInt64, "shaderInt64");
  need(f.base.features.shaderInt16, "shaderInt16");
  need(f.v11.storageBuffer16BitAccess, "storageBuffer16BitAccess");
  need(f.v12.bufferDeviceAddress, "bufferDeviceAddress");
  need(f.v12.vulkanMemoryModel, "vulkanMemoryModel");
  need(f.v12.vulkanMemoryModelDeviceScope, "vulkanMemoryModelDeviceScope");
  need(f.clock.shaderDeviceClock, "shaderDeviceClock");
  return missing.empty() ? "" : "lacks " + missing;
}

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete-gpu";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated-gpu";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual-gpu";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
  }
}

// Lower is preferred when no device is named.
int preference(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 4;
    default: return 3;
  }
}

std::string version_string(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
         std::to_string(VK_API_VERSION_PATCH(v));
}

VulkanDeviceInfo describe_device(VkPhysicalDevice p, uint32_t index) {
  VkPhysicalDeviceVulkan12Properties v12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  VkPhysicalDeviceProperties& base = props.properties;
  vkGetPhysicalDeviceProperties(p, &base);
  if (base.apiVersion >= kApiVersion) {
    props.pNext = &v12;
    vkGetPhysicalDeviceProperties2(p, &props);
  }
  VulkanDeviceInfo d;
  d.index = index;
  d.name = base.deviceName;
  d.type = type_name(base.deviceType);
  d.driver = base.apiVersion >= kApiVersion ? std::string(v12.driverName) + ": " + v12.driverInfo : "?";
  d.api = version_string(base.apiVersion);
  d.unusable = unusable_reason(p);
  return d;
}

// Whether the driver reports the statistics of the pipelines it compiles.
bool has_pipeline_statistics(VkPhysicalDevice p) {
  if (!has_extension(p, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME)) return false;
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR executables{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &executables};
  vkGetPhysicalDeviceFeatures2(p, &features);
  return executables.pipelineExecutableInfo;
}

// Whether shaders can read their SM id (gl_SMIDNV): NVIDIA's drivers.
bool has_sm_builtins(VkPhysicalDevice p) {
  if (!has_extension(p, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) return false;
  VkPhysicalDeviceShaderSMBuiltinsFeaturesNV sm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_FEATURES_NV};
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &sm};
  vkGetPhysicalDeviceFeatures2(p, &features);
  return sm.shaderSMBuiltins;
}

DeviceTraits device_traits(VkPhysicalDevice p) {
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
  VkPhysicalDeviceVulkan12Properties v12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES};
  if (has_extension(p, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) v12.pNext = &sm;
  VkPhysicalDeviceVulkan11Properties v11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES, &v12};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &v11};
  vkGetPhysicalDeviceProperties2(p, &props);
  const VkPhysicalDeviceLimits& limits = props.properties.limits;
  DeviceTraits t;
  t.name = props.properties.deviceName;
  t.driver = v12.driverID;
  t.max_shared_bytes = limits.maxComputeSharedMemorySize;
  t.max_workgroup_size = std::min(limits.maxComputeWorkGroupSize[0], limits.maxComputeWorkGroupInvocations);
  t.max_workgroups = limits.maxComputeWorkGroupCount[0];
  t.compute_units = sm.shaderSMCount;
  t.subgroup_size = v11.subgroupSize;
  t.cpu = props.properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  t.pipeline_statistics = has_pipeline_statistics(p);
  t.sm_builtins = has_sm_builtins(p);
  return t;
}

// Device `index`, or the best usable one for -1. Throws spindle::Error when there is none, or
// it lacks what the executor needs.
uint32_t choose_device(const std::vector<VkPhysicalDevice>& devices, int32_t index) {
  if (devices.empty())
    throw Error("vulkan executor: the Vulkan loader found no device (for the CPU driver install "
                "mesa-vulkan-drivers, or point VK_DRIVER_FILES at a driver's ICD json)");
  if (index < -1)
    throw Error("vulkan executor: there is no device " + std::to_string(index) +
                "; give an index `spindle info` lists, or -1 for the best usable one");
  if (index >= int32_t(devices.size()))
    throw Error("vulkan executor: there is no device " + std::to_string(index) + "; `spindle info` lists the " +
                std::to_string(devices.size()) + " found");
  if (index >= 0) {
    if (const std::string why = unusable_reason(devices[size_t(index)]); !why.empty())
      throw Error("vulkan executor: device " + std::to_string(index) + " cannot run it: " + why);
    return uint32_t(index);
  }
  int best = INT32_MAX;
  uint32_t chosen = 0;
  for (uint32_t i = 0; i < devices.size(); ++i) {
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(devices[i], &props);
    if (unusable_reason(devices[i]).empty() && preference(props.deviceType) < best) {
      best = preference(props.deviceType);
      chosen = i;
    }
  }
  if (best == INT32_MAX)
    throw Error("vulkan executor: none of the " + std::to_string(devices.size()) +
                " Vulkan devices can run it; `spindle info` says why");
  return chosen;
}

}  // namespace

std::string result_name(VkResult r) {
  const char* name = nullptr;
  switch (r) {
#define SP_VK_RESULT(x) \
  case x: name = #x; break;
    SP_VK_RESULT(VK_SUCCESS)
    SP_VK_RESULT(VK_NOT_READY)
    SP_VK_RESULT(VK_TIMEOUT)
    SP_VK_RESULT(VK_INCOMPLETE)
    SP_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    SP_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    SP_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    SP_VK_RESULT(VK_ERROR_DEVICE_LOST)
    SP_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    SP_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    SP_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    SP_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    SP_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    SP_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    SP_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    SP_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
    SP_VK_RESULT(VK_ERROR_UNKNOWN)
    SP_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    SP_VK_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    SP_VK_RESULT(VK_ERROR_FRAGMENTATION)
    SP_VK_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    SP_VK_RESULT(VK_ERROR_INVALID_SHADER_NV)
#undef SP_VK_RESULT
    default: break;
  }
  return std::string(name ? name : "VkResult") + " (" + std::to_string(int(r)) + ")";
}

void check(VkResult r, const char* what) {
  if (r != VK_SUCCESS) throw Error(std::string("vulkan: ") + what + " failed: " + result_name(r));
}

Context::Context(int32_t index) {
  instance_ = make_instance();
  try {
    const std::vector<VkPhysicalDevice> devices = physical_devices(instance_);
    index_ = choose_device(devices, index);
    physical_ = devices[index_];
    traits_ = device_traits(physical_);
    queue_family_ = compute_queue_family(physical_);

    const float priority = 1.0f;
    VkDeviceQueueCreateInfo queue{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    queue.queueFamilyIndex = queue_family_;
    queue.queueCount = 1;
    queue.pQueuePriorities = &priority;
    Features features;
    features.require();
    std::vector<const char*> extensions = {VK_KHR_SHADER_CLOCK_EXTENSION_NAME};
    // The optional features the device has, each chained after the required ones.
    void** chain_end = &features.clock.pNext;
    const auto enable = [&](const char* extension, auto& feature) {
      extensions.push_back(extension);
      *chain_end = &feature;
      chain_end = &feature.pNext;
    };
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR executables{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
    executables.pipelineExecutableInfo = VK_TRUE;
    if (traits_.pipeline_statistics) enable(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME, executables);
    VkPhysicalDeviceShaderSMBuiltinsFeaturesNV sm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_FEATURES_NV};
    sm.shaderSMBuiltins = VK_TRUE;
    if (traits_.sm_builtins) enable(VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME, sm);
    VkDeviceCreateInfo info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, &features.base};
    info.queueCreateInfoCount = 1;
    info.pQueueCreateInfos = &queue;
    info.enabledExtensionCount = uint32_t(extensions.size());
    info.ppEnabledExtensionNames = extensions.data();
    check(vkCreateDevice(physical_, &info, nullptr, &device_), "vkCreateDevice");
    vkGetDeviceQueue(device_, queue_family_, 0, &queue_);
  } catch (...) {
    vkDestroyInstance(instance_, nullptr);
    throw;
  }
}

Context::~Context() {
  if (device_) vkDestroyDevice(device_, nullptr);
  vkDestroyInstance(instance_, nullptr);
}

}  // namespace spindle::vk

namespace spindle {

std::vector<VulkanDeviceInfo> list_vulkan_devices() {
  const vk::InstanceGuard guard{vk::make_instance()};
  std::vector<VulkanDeviceInfo> out;
  const std::vector<VkPhysicalDevice> devices = vk::physical_devices(guard.instance);
  for (uint32_t i = 0; i < devices.size(); ++i) out.push_back(vk::describe_device(devices[i], i));
  return out;
}

VulkanDeviceInfo chosen_vulkan_device(int32_t device) {
  const vk::InstanceGuard guard{vk::make_instance()};
  const std::vector<VkPhysicalDevice> devices = vk::physical_devices(guard.instance);
  const uint32_t index = vk::choose_device(devices, device);
  return vk::describe_device(devices[index], index);
}

}  // namespace spindle
