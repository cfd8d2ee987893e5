// The runtime's one piece of C++: it puts gpuinstr's wrappers into ROCr's
// API table (the HSA_TOOLS_LIB interface, hsa_api_trace.h) and calls the
// original entries for the Rust side. Everything here is plumbing; what
// the wrappers decide is in Rust (src/hsa.rs receives the calls below).

#include <hsa_api_trace.h>
#include <hsa_ven_amd_loader.h>

#include <cstddef>
#include <cstdint>

extern "C" {
// Implemented in Rust (src/hsa.rs).
uint32_t gpuinstr_rt_replace_code_object(const void* bytes, size_t size, const void** replaced,
                                         size_t* replaced_size);
uint32_t gpuinstr_rt_replace_code_object_file(int fd, const void** replaced, size_t* replaced_size);
void gpuinstr_rt_on_reader(uint64_t reader, const void* bytes, size_t size);
void gpuinstr_rt_on_reader_file(uint64_t reader, int fd);
void gpuinstr_rt_on_reader_destroyed(uint64_t reader);
void gpuinstr_rt_on_code_object_loaded(uint64_t executable, uint64_t agent, uint64_t reader,
                                       int64_t load_delta, int delta_known);
void gpuinstr_rt_on_executable_frozen(uint64_t executable);
void gpuinstr_rt_on_executable_destroyed(uint64_t executable);
void gpuinstr_rt_on_packets(const hsa_queue_t* queue, const void* packets, uint64_t count,
                            hsa_amd_queue_intercept_packet_writer writer);
}

namespace {

CoreApiTable original_core;
AmdExtTable original_amd;

bool loader_known = false;
hsa_ven_amd_loader_1_01_pfn_t loader;

// The loader extension, asked for once ROCr is up (it is not during OnLoad).
bool loader_table() {
  if (!loader_known) {
    loader_known = original_core.hsa_system_get_major_extension_table_fn(
                       HSA_EXTENSION_AMD_LOADER, 1, sizeof(loader), &loader) == HSA_STATUS_SUCCESS;
  }
  return loader_known;
}

void intercept(const void* packets, uint64_t count, uint64_t, void* queue,
               hsa_amd_queue_intercept_packet_writer writer) {
  gpuinstr_rt_on_packets(static_cast<const hsa_queue_t*>(queue), packets, count, writer);
}

// Every queue the program creates is an intercept queue, so that the
// runtime sees each packet before the device does.
hsa_status_t queue_create(hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
                          void (*callback)(hsa_status_t, hsa_queue_t*, void*), void* data,
                          uint32_t private_segment_size, uint32_t group_segment_size,
                          hsa_queue_t** queue) {
  hsa_status_t status = original_amd.hsa_amd_queue_intercept_create_fn(
      agent, size, type, callback, data, private_segment_size, group_segment_size, queue);
  if (status != HSA_STATUS_SUCCESS) return status;
  status = original_amd.hsa_amd_queue_intercept_register_fn(*queue, intercept, *queue);
  if (status != HSA_STATUS_SUCCESS) {
    original_core.hsa_queue_destroy_fn(*queue);
    return status;
  }
  return status;
}

// In dynamic mode the runtime may hand ROCr an instrumented code object
// instead (or refuse to load one it cannot instrument).
hsa_status_t reader_create_from_memory(const void* bytes, size_t size,
                                       hsa_code_object_reader_t* reader) {
  const void* replaced = nullptr;
  size_t replaced_size = 0;
  uint32_t refused = gpuinstr_rt_replace_code_object(bytes, size, &replaced, &replaced_size);
  if (refused != HSA_STATUS_SUCCESS) return static_cast<hsa_status_t>(refused);
  if (replaced != nullptr) {
    bytes = replaced;
    size = replaced_size;
  }
  hsa_status_t status =
      original_core.hsa_code_object_reader_create_from_memory_fn(bytes, size, reader);
  if (status == HSA_STATUS_SUCCESS) gpuinstr_rt_on_reader(reader->handle, bytes, size);
  return status;
}

hsa_status_t reader_create_from_file(hsa_file_t file, hsa_code_object_reader_t* reader) {
  const void* replaced = nullptr;
  size_t replaced_size = 0;
  uint32_t refused = gpuinstr_rt_replace_code_object_file(file, &replaced, &replaced_size);
  if (refused != HSA_STATUS_SUCCESS) return static_cast<hsa_status_t>(refused);
  if (replaced != nullptr) {
    hsa_status_t status =
        original_core.hsa_code_object_reader_create_from_memory_fn(replaced, replaced_size, reader);
    if (status == HSA_STATUS_SUCCESS) gpuinstr_rt_on_reader(reader->handle, replaced, replaced_size);
    return status;
  }
  hsa_status_t status = original_core.hsa_code_object_reader_create_from_file_fn(file, reader);
  if (status == HSA_STATUS_SUCCESS) gpuinstr_rt_on_reader_file(reader->handle, file);
  return status;
}

hsa_status_t reader_destroy(hsa_code_object_reader_t reader) {
  gpuinstr_rt_on_reader_destroyed(reader.handle);
  return original_core.hsa_code_object_reader_destroy_fn(reader);
}

hsa_status_t load_agent_code_object(hsa_executable_t executable, hsa_agent_t agent,
                                    hsa_code_object_reader_t reader, const char* options,
                                    hsa_loaded_code_object_t* loaded) {
  hsa_loaded_code_object_t ours = {0};
  if (loaded == nullptr) loaded = &ours;
  hsa_status_t status = original_core.hsa_executable_load_agent_code_object_fn(
      executable, agent, reader, options, loaded);
  if (status != HSA_STATUS_SUCCESS) return status;
  int64_t delta = 0;
  bool known = loader_table() &&
               loader.hsa_ven_amd_loader_loaded_code_object_get_info(
                   *loaded, HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_DELTA, &delta) ==
                   HSA_STATUS_SUCCESS;
  gpuinstr_rt_on_code_object_loaded(executable.handle, agent.handle, reader.handle, delta, known);
  return status;
}

// The loader writes a code object's data to the device when the executable
// is frozen: what the runtime writes there must come after.
hsa_status_t executable_freeze(hsa_executable_t executable, const char* options) {
  hsa_status_t status = original_core.hsa_executable_freeze_fn(executable, options);
  if (status == HSA_STATUS_SUCCESS) gpuinstr_rt_on_executable_frozen(executable.handle);
  return status;
}

hsa_status_t executable_destroy(hsa_executable_t executable) {
  gpuinstr_rt_on_executable_destroyed(executable.handle);
  return original_core.hsa_executable_destroy_fn(executable);
}

// The first global, fine-grained memory pool of a CPU agent: host memory
// every GPU can be given access to.
hsa_amd_memory_pool_t host_pool = {0};

hsa_status_t find_host_pool(hsa_amd_memory_pool_t pool, void*) {
  hsa_amd_segment_t segment;
  uint32_t flags = 0;
  bool allowed = false;
  if (original_amd.hsa_amd_memory_pool_get_info_fn(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &segment) !=
          HSA_STATUS_SUCCESS ||
      segment != HSA_AMD_SEGMENT_GLOBAL)
    return HSA_STATUS_SUCCESS;
  original_amd.hsa_amd_memory_pool_get_info_fn(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags);
  original_amd.hsa_amd_memory_pool_get_info_fn(pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED,
                                               &allowed);
  if (allowed && (flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED)) {
    host_pool = pool;
    return HSA_STATUS_INFO_BREAK;
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t find_host_agent_pool(hsa_agent_t agent, void*) {
  hsa_device_type_t type;
  if (original_core.hsa_agent_get_info_fn(agent, HSA_AGENT_INFO_DEVICE, &type) != HSA_STATUS_SUCCESS ||
      type != HSA_DEVICE_TYPE_CPU)
    return HSA_STATUS_SUCCESS;
  original_amd.hsa_amd_agent_iterate_memory_pools_fn(agent, find_host_pool, nullptr);
  return host_pool.handle != 0 ? HSA_STATUS_INFO_BREAK : HSA_STATUS_SUCCESS;
}

// True if a table of `size` bytes (its version's minor_id) has `field`.
template <typename Table, typename Field>
bool has(const Table* table, Field Table::*field) {
  if (table == nullptr) return false;
  auto end = reinterpret_cast<const char*>(&(table->*field)) + sizeof(Field);
  return end <= reinterpret_cast<const char*>(table) + table->version.minor_id;
}

}  // namespace

extern "C" {

// Installs the wrappers; false if the runtime's tables lack an entry.
bool gpuinstr_rt_install(void* api_table) {
  auto table = static_cast<HsaApiTable*>(api_table);
  CoreApiTable* core = table->core_;
  AmdExtTable* amd = table->amd_ext_;
  if (!has(core, &CoreApiTable::hsa_executable_load_agent_code_object_fn) ||
      !has(core, &CoreApiTable::hsa_system_get_major_extension_table_fn) ||
      !has(amd, &AmdExtTable::hsa_amd_queue_intercept_register_fn) ||
      !has(amd, &AmdExtTable::hsa_amd_signal_async_handler_fn))
    return false;
  original_core = *core;
  original_amd = *amd;
  core->hsa_queue_create_fn = queue_create;
  core->hsa_code_object_reader_create_from_memory_fn = reader_create_from_memory;
  core->hsa_code_object_reader_create_from_file_fn = reader_create_from_file;
  core->hsa_code_object_reader_destroy_fn = reader_destroy;
  core->hsa_executable_load_agent_code_object_fn = load_agent_code_object;
  core->hsa_executable_freeze_fn = executable_freeze;
  core->hsa_executable_destroy_fn = executable_destroy;
  return true;
}

uint32_t gpuinstr_rt_signal_create(int64_t initial, uint64_t* signal) {
  hsa_signal_t created = {0};
  hsa_status_t status = original_core.hsa_signal_create_fn(initial, 0, nullptr, &created);
  *signal = created.handle;
  return status;
}

uint32_t gpuinstr_rt_signal_destroy(uint64_t signal) {
  return original_core.hsa_signal_destroy_fn(hsa_signal_t{signal});
}

// Calls `handler(value, argument)` on ROCr's event thread once `signal` is 0.
uint32_t gpuinstr_rt_signal_when_zero(uint64_t signal, bool (*handler)(hsa_signal_value_t, void*),
                                      void* argument) {
  return original_amd.hsa_amd_signal_async_handler_fn(hsa_signal_t{signal}, HSA_SIGNAL_CONDITION_EQ,
                                                       0, handler, argument);
}

int64_t gpuinstr_rt_signal_load(uint64_t signal) {
  return original_core.hsa_signal_load_scacquire_fn(hsa_signal_t{signal});
}

// The agent's name (`gfx90a`) into `name` (64 bytes).
uint32_t gpuinstr_rt_agent_name(uint64_t agent, char* name) {
  return original_core.hsa_agent_get_info_fn(hsa_agent_t{agent}, HSA_AGENT_INFO_NAME, name);
}

// `size` bytes of host memory that `agent` can read and write.
uint32_t gpuinstr_rt_host_free(void* memory) { return original_amd.hsa_amd_memory_pool_free_fn(memory); }

uint32_t gpuinstr_rt_executable_destroy(uint64_t executable) {
  return original_core.hsa_executable_destroy_fn(hsa_executable_t{executable});
}

uint32_t gpuinstr_rt_host_allocate(uint64_t agent, size_t size, void** memory) {
  if (host_pool.handle == 0) {
    original_core.hsa_iterate_agents_fn(find_host_agent_pool, nullptr);
    if (host_pool.handle == 0) return HSA_STATUS_ERROR_INVALID_REGION;
  }
  hsa_status_t status = original_amd.hsa_amd_memory_pool_allocate_fn(host_pool, size, 0, memory);
  if (status != HSA_STATUS_SUCCESS) return status;
  hsa_agent_t gpu = {agent};
  status = original_amd.hsa_amd_agents_allow_access_fn(1, &gpu, nullptr, *memory);
  if (status != HSA_STATUS_SUCCESS) original_amd.hsa_amd_memory_pool_free_fn(*memory);
  return status;
}

// Copies `size` bytes from host memory the runtime allocated to the device
// (a loaded code object's global); returns when they are there.
uint32_t gpuinstr_rt_memory_copy(uint64_t to, uint64_t from, size_t size) {
  return original_core.hsa_memory_copy_fn(reinterpret_cast<void*>(to), reinterpret_cast<const void*>(from),
                                          size);
}

// Loads a code object of the runtime's own into an executable of its own
// for `agent`; the kernel object and private segment size of `kernel`.
uint32_t gpuinstr_rt_load_kernel(uint64_t agent, const void* bytes, size_t size, const char* kernel,
                                 uint64_t* executable_handle, uint64_t* kernel_object, uint32_t* private_segment_size,
                                 uint32_t* group_segment_size) {
  hsa_agent_t gpu = {agent};
  hsa_code_object_reader_t reader;
  hsa_status_t status =
      original_core.hsa_code_object_reader_create_from_memory_fn(bytes, size, &reader);
  if (status != HSA_STATUS_SUCCESS) return status;
  hsa_executable_t executable;
  status = original_core.hsa_executable_create_alt_fn(
      HSA_PROFILE_FULL, HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT, nullptr, &executable);
  if (status == HSA_STATUS_SUCCESS) *executable_handle = executable.handle;
  if (status == HSA_STATUS_SUCCESS)
    status = original_core.hsa_executable_load_agent_code_object_fn(executable, gpu, reader, nullptr,
                                                                     nullptr);
  if (status == HSA_STATUS_SUCCESS)
    status = original_core.hsa_executable_freeze_fn(executable, nullptr);
  hsa_executable_symbol_t symbol;
  if (status == HSA_STATUS_SUCCESS)
    status = original_core.hsa_executable_get_symbol_by_name_fn(executable, kernel, &gpu, &symbol);
  if (status == HSA_STATUS_SUCCESS)
    status = original_core.hsa_executable_symbol_get_info_fn(
        symbol, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, kernel_object);
  if (status == HSA_STATUS_SUCCESS)
    status = original_core.hsa_executable_symbol_get_info_fn(
        symbol, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE, private_segment_size);
  if (status == HSA_STATUS_SUCCESS)
    status = original_core.hsa_executable_symbol_get_info_fn(
        symbol, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE, group_segment_size);
  original_core.hsa_code_object_reader_destroy_fn(reader);
  return status;
}

const char* gpuinstr_rt_status_string(uint32_t status) {
  const char* text = nullptr;
  if (original_core.hsa_status_string_fn(static_cast<hsa_status_t>(status), &text) !=
          HSA_STATUS_SUCCESS ||
      text == nullptr)
    return "an unknown HSA status";
  return text;
}

}  // extern "C"
