#include "host/cli/trace_table.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "host/cli/graph_stats.h"
#include "host/cli/options.h"

namespace spindle::cli {

std::string trace_meta_path(const std::string& csv_path) {
  return std::filesystem::path(csv_path).replace_extension(".meta.json").string();
}

void write_trace_table(const Graph& g, const std::vector<TaskTrace>& trace, uint32_t first_position,
                       const nlohmann::json& meta, const std::string& csv_path, const std::string& option) {
  uint32_t first_step = UINT32_MAX;
  for (const TaskTrace& t : trace) first_step = std::min(first_step, t.step);
  std::ofstream f = open_output(csv_path, option);
  f << "step,task,op,layer,stage,worker,start_ns,end_ns,wait_ns,bytes_read,bytes_written,device\n";
  for (const TaskTrace& t : trace) {
    const SpTask& task = g.tasks[t.task];
    const TaskBytes bytes = task_bytes(g, task, first_position + (t.step - first_step));
    f << t.step << ',' << t.task << ',' << sp_opcode_name(task.op) << ','
      << (task.layer == 0xFFFFFFFFu ? -1 : int64_t(task.layer)) << ',' << g.counter_names[task.signal_counter] << ','
      << t.worker << ',' << t.start_ns << ',' << t.end_ns << ',' << t.wait_ns << ',' << bytes.read << ','
      << bytes.written << ',' << t.device << '\n';
  }
  close_output(f, csv_path, option);
  const std::string meta_path = trace_meta_path(csv_path);
  std::ofstream m = open_output(meta_path, option + "'s metadata");
  m << meta.dump(2) << "\n";
  close_output(m, meta_path, option + "'s metadata");
}

}  // namespace spindle::cli
