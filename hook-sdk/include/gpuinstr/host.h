// gpuinstr/host.h: a tool's host part, in ordinary C or C++.
//
// A tool's hooks (tool.hip) write its globals on the device; after every
// dispatch of an instrumented kernel, gpuinstr's runtime copies them out,
// resets them to their initial values, and calls the tool's host part with
// what the dispatch left (of a buffer of records declared with
// GPUINSTR_RECORDS, the records written, and zeros past them); records of
// a ring (GPUINSTR_RING) come while the dispatch runs. The host part is a
// shared library (built by
// `gpuinstr_add_tool(... HOST host.cpp)`, or `c++ -shared -fPIC`) that the
// runtime loads when `gpuinstr-run --tool-host LIB` (GPUINSTR_TOOL_HOST)
// names it. It defines any of these entry points:
//
//   extern "C" void gpuinstr_tool_load(const gpuinstr_code_object *CodeObject);
//       when the program loads an instrumented code object, before any
//       dispatch of its kernels is handed over: build per code object
//       tables here (its sites, its kernels)
//   extern "C" void gpuinstr_tool_records(const gpuinstr_records *Records);
//       records of a ring (GPUINSTR_RING) in the order the hooks reserved
//       them, in batches, while the dispatch runs and after it: every
//       record a dispatch appended comes before its dispatch call
//   extern "C" void gpuinstr_tool_dispatch(gpuinstr_dispatch *Dispatch);
//       after each dispatch of an instrumented kernel
//   extern "C" void gpuinstr_tool_exit(void);
//       once, when the program ends: print the tool's summary and report
//       the run's totals (gpuinstr_report_run_*) here
//
// The runtime calls them one at a time (loads come on the program's
// threads, records and dispatches on runtime threads), so a host part
// needs no locks;
// do not call HIP or HSA from them. It calls the functions below, which
// the runtime provides.
#ifndef GPUINSTR_HOST_H
#define GPUINSTR_HOST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The version of the API this header describes. Every host part built
/// with it carries it (the definition below, one per library however many
/// files include this header), and the runtime refuses a host part of
/// another version: it would read the runtime's structs with the wrong
/// layout.
#define GPUINSTR_HOST_API 6
__attribute__((weak, visibility("default"))) extern const uint32_t gpuinstr_tool_host_api;
const uint32_t gpuinstr_tool_host_api = GPUINSTR_HOST_API;

/// One completed dispatch of an instrumented kernel; valid during the call.
typedef struct gpuinstr_dispatch gpuinstr_dispatch;
/// An instrumented code object the program loaded; valid until the program
/// ends (the same pointer in its load call and with each of its dispatches).
typedef struct gpuinstr_code_object gpuinstr_code_object;
typedef struct gpuinstr_site gpuinstr_site;
/// A batch of records of a ring; valid during the call.
typedef struct gpuinstr_records gpuinstr_records;

/// 0, 1, ... in load order: the index of the code object in the report's
/// `code_objects` (and each dispatch record's `code_object`).
uint32_t gpuinstr_code_object_index(const gpuinstr_code_object *CodeObject);
/// The GPU it is for (`gfx90a`).
const char *gpuinstr_code_object_processor(const gpuinstr_code_object *CodeObject);
/// Its kernels' symbol names (mangled) as the program dispatches them
/// (instrumented copies kept beside originals are not listed): how many,
/// and the `Kernel`-th (NULL past the end).
size_t gpuinstr_code_object_kernel_count(const gpuinstr_code_object *CodeObject);
const char *gpuinstr_code_object_kernel(const gpuinstr_code_object *CodeObject, size_t Kernel);
/// Its points, indexed by the `site` number a hook gets, and their count in
/// *Count (as gpuinstr_sites gives them for its dispatches).
const gpuinstr_site *gpuinstr_code_object_sites(const gpuinstr_code_object *CodeObject, size_t *Count);

/// 1, 2, ... in the order the program submitted observed dispatches.
uint64_t gpuinstr_dispatch_id(const gpuinstr_dispatch *Dispatch);
/// The kernel's symbol name (mangled, as in the code object).
const char *gpuinstr_dispatch_kernel(const gpuinstr_dispatch *Dispatch);
/// The code object of the dispatch's kernel (the one its load call got).
const gpuinstr_code_object *gpuinstr_dispatch_code_object(const gpuinstr_dispatch *Dispatch);
/// The grid in work-items and the workgroup size, as the dispatch packet gives them.
void gpuinstr_dispatch_grid(const gpuinstr_dispatch *Dispatch, uint32_t Grid[3]);
void gpuinstr_dispatch_workgroup(const gpuinstr_dispatch *Dispatch, uint32_t Workgroup[3]);
/// Selected points this kernel (or a function it calls) may run that were
/// left out when it was instrumented (`--allow-partial`): 0 when the
/// tool's data for it is complete. Otherwise the data misses what those
/// points would have recorded: the runtime marks the dispatch's record, and
/// a tool's own summary should say so too.
uint32_t gpuinstr_dispatch_points_left_out(const gpuinstr_dispatch *Dispatch);
/// The tool global `Name` (its name in tool.hip) as the dispatch left it,
/// and its size in *Size; NULL if the dispatch's code object has no such
/// global.
const void *gpuinstr_global(const gpuinstr_dispatch *Dispatch, const char *Name, size_t *Size);

/// Records of the ring `Ring` (its name in tool.hip) the dispatch appended:
/// all of them reached gpuinstr_tool_records before this call.
uint64_t gpuinstr_dispatch_records(const gpuinstr_dispatch *Dispatch, const char *Ring);
/// Records of the ring `Ring` the dispatch's hooks dropped because it was
/// full: 0 unless the run drops them (`gpuinstr-run --ring-full drop`), in
/// which case the report counts them too. Say so with the tool's results.
uint64_t gpuinstr_dispatch_dropped(const gpuinstr_dispatch *Dispatch, const char *Ring);

/// The dispatch the records belong to (its gpuinstr_dispatch_id), its
/// kernel and code object (the same pointer as its load call got).
uint64_t gpuinstr_records_dispatch_id(const gpuinstr_records *Records);
const char *gpuinstr_records_kernel(const gpuinstr_records *Records);
const gpuinstr_code_object *gpuinstr_records_code_object(const gpuinstr_records *Records);
/// The ring's name (`Trace` for GPUINSTR_RING(MemoryAccess, Trace)).
const char *gpuinstr_records_ring(const gpuinstr_records *Records);
/// The first record's index among the records the dispatch appended to
/// the ring (0 for its first batch).
uint64_t gpuinstr_records_first(const gpuinstr_records *Records);
/// The records, their count in *Count and each one's size in *RecordBytes
/// (the record type's size in tool.hip).
const void *gpuinstr_records_data(const gpuinstr_records *Records, size_t *Count, size_t *RecordBytes);

/// An instrumentation point of a code object.
struct gpuinstr_site {
  /// The instruction's address in the original code object.
  uint64_t Address;
  /// LLVM's pseudo opcode number: what a hook gets as `opcode`.
  uint32_t Opcode;
  /// The function or kernel it is in (its symbol name).
  const char *Function;
  /// LLVM's pseudo opcode name (`S_AND_SAVEEXEC_B64`).
  const char *OpcodeName;
  /// The instruction as assembly (`s_and_saveexec_b64 s[0:1], vcc`).
  const char *Text;
  /// `file:line` from the code object's DWARF line table (built with -g);
  /// "" when there is none.
  const char *Location;
  /// Nonzero: the point was selected and left out (`--allow-partial`); its
  /// hook never runs.
  uint32_t LeftOut;
};

/// The points of the dispatch's code object, indexed by the `site` number a
/// hook gets (plan argument `{ value = "site" }`), and their count in
/// *Count. Valid until the program ends.
const gpuinstr_site *gpuinstr_sites(const gpuinstr_dispatch *Dispatch, size_t *Count);

/// Adds `Key: Value` to the dispatch's record in the runtime's report (the
/// JSON report's `tool` object, and the summary line).
void gpuinstr_report_u64(gpuinstr_dispatch *Dispatch, const char *Key, uint64_t Value);
void gpuinstr_report_text(gpuinstr_dispatch *Dispatch, const char *Key, const char *Text);
/// `Json` is a JSON value (an object, a list, ...) put into the report as it is.
void gpuinstr_report_json(gpuinstr_dispatch *Dispatch, const char *Key, const char *Json);
/// Says that the dispatch's data is incomplete or may be wrong (records a
/// full buffer dropped, counters two sites share): a counted warning in the
/// report and a problem of the dispatch's record. Never leave it unsaid.
void gpuinstr_report_warning(gpuinstr_dispatch *Dispatch, const char *Text);

/// Adds `Key: Value` to the report's values for the whole run (the JSON
/// report's top-level `tool` object): the run's totals, usually from
/// gpuinstr_tool_exit.
void gpuinstr_report_run_u64(const char *Key, uint64_t Value);
void gpuinstr_report_run_text(const char *Key, const char *Text);
void gpuinstr_report_run_json(const char *Key, const char *Json);
/// Says that the run's results are incomplete or may be wrong beyond any
/// one dispatch: a counted warning in the report.
void gpuinstr_report_run_warning(const char *Text);

/// Appends `Size` bytes to the tool's file `Name` (a plain file name, such
/// as `memory-trace.tsv`): for records too many for the report. The file is
/// written beside the JSON report as `<report stem>.<Name>`, appears there
/// when the program ends (never partial) and is listed in the report.
void gpuinstr_write(const char *Name, const void *Bytes, size_t Size);

/// Whether the user asked for the tool's file `Name` (`gpuinstr-run
/// --tool-file Name`, or `--tool-file all`; `GPUINSTR_TOOL_FILES`), or the
/// run's database keeps no records (`--no-database-records`, `--database
/// none`): a tool whose rings' records the database holds writes its text
/// copy of them only then, so a run stores its records once. A file a tool
/// writes unasked is written all the same.
int gpuinstr_file_requested(const char *Name);

#ifdef __cplusplus
}

#include <string>

namespace gpuinstr {
/// `Text` as a JSON string (quoted, `"` and `\` escaped, control
/// characters as \u escapes), for `gpuinstr_report_json`.
inline std::string jsonString(const std::string &Text) {
  std::string Out = "\"";
  for (char C : Text) {
    if (C == '"' || C == '\\') {
      Out += '\\';
      Out += C;
    } else if (static_cast<unsigned char>(C) < 0x20) {
      const char *Hex = "0123456789abcdef";
      Out += "\\u00";
      Out += Hex[(C >> 4) & 0xf];
      Out += Hex[C & 0xf];
    } else {
      Out += C;
    }
  }
  return Out + "\"";
}

/// The records of a batch as `T`s and their count in *Count; NULL when
/// the ring's records are not sizeof(T) bytes.
template <typename T> const T *records(const gpuinstr_records *Records, size_t *Count) {
  size_t RecordBytes = 0;
  const void *Data = gpuinstr_records_data(Records, Count, &RecordBytes);
  return RecordBytes == sizeof(T) ? static_cast<const T *>(Data) : nullptr;
}

/// The tool global `Name` as `Count` values of `T` (an array global): NULL
/// if the dispatch's code object has no such global or it is not
/// `Count * sizeof(T)` bytes.
template <typename T>
const T *array(const gpuinstr_dispatch *Dispatch, const char *Name, size_t Count) {
  size_t Size = 0;
  const void *Bytes = gpuinstr_global(Dispatch, Name, &Size);
  return Bytes && Size == Count * sizeof(T) ? static_cast<const T *>(Bytes) : nullptr;
}

/// The tool global `Name` as a `T`; false (and `Value` untouched) if the
/// dispatch's code object has no such global or it is not sizeof(T) bytes.
template <typename T>
bool read(const gpuinstr_dispatch *Dispatch, const char *Name, T &Value) {
  size_t Size = 0;
  const void *Bytes = gpuinstr_global(Dispatch, Name, &Size);
  if (!Bytes || Size != sizeof(T))
    return false;
  __builtin_memcpy(&Value, Bytes, sizeof(T));
  return true;
}
} // namespace gpuinstr
#endif

#endif // GPUINSTR_HOST_H
