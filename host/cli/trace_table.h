// The columnar trace a notebook loads with pandas (docs/trace-format.md): a CSV row a task run,
// with the bytes it moved, and beside it a JSON file of what holds for the whole export.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "host/executor.h"
#include "tasks/graph.h"

namespace spindle::cli {

// Where the metadata of the table at `csv_path` goes: the path with its extension replaced by
// ".meta.json" (tasks.csv -> tasks.meta.json).
std::string trace_meta_path(const std::string& csv_path);

// Writes the runs of `trace` to `csv_path`, step s of the trace at position first_position + s
// - (its first step), and `meta` to trace_meta_path(csv_path). `option` names the paths in
// errors.
void write_trace_table(const Graph& g, const std::vector<TaskTrace>& trace, uint32_t first_position,
                       const nlohmann::json& meta, const std::string& csv_path, const std::string& option);

}  // namespace spindle::cli
