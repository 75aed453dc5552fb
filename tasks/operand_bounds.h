// What each op reads and writes, checked against the views it is given and the graph's
// dimensions, so that a graph validate() accepts keeps every executor inside its arenas
// whatever a graph file says (docs/graph-format.md, "What validation guarantees").
#pragma once
#include <cstddef>
#include <string>

#include "tasks/graph.h"

namespace spindle {

// Why task i of `g` would read or write outside its operands' views, or the graph's
// dimensions cannot serve its op; "" when it stays inside. The task's opcode is known and its
// view operands are in range (validate() checks those first).
std::string operand_bounds_problem(const Graph& g, size_t i);

// Why the graph's dimensions, fixed arenas and io views cannot serve an executor (heads, head
// dim, rotary dims, context and chunks that every executor plans attention with; the STATE
// arena holds the step state, the CONST arena the RoPE table, the io views the host's tokens
// and logits); "" when they can. The views are within their arenas (validate()).
std::string graph_layout_problem(const Graph& g);

}  // namespace spindle
