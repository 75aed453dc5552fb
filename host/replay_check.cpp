#include "host/replay_check.h"

#include <algorithm>
#include <cstring>
#include <iomanip>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "host/graph_builder.h"
#include "host/safetensors.h"
#include "tasks/error.h"
#include "tasks/graph_param_fields.h"

namespace spindle {
namespace {

// A number in full: a float with the digits that tell it from any other.
template <class T>
std::string str(T v) {
  std::ostringstream out;
  out << std::setprecision(9) << v;
  return out.str();
}

std::string words(const SpOpParams& p) {
  std::string s = "{";
  for (uint32_t i = 0; i < SP_OP_PARAM_WORDS; ++i) s += (i ? ", " : "") + str(p.word[i]);
  return s + "}";
}

// "ROWS x COLS DTYPE (row stride S) at byte B of arena 'NAME'".
std::string describe(const Graph& g, const SpView& v) {
  return str(v.rows) + " x " + str(v.cols) + " " + sp_dtype_name(v.dtype) + " (row stride " + str(v.row_stride) +
         ") at byte " + str(sp_view_offset(v)) + " of arena '" + g.arenas[v.arena].name + "'";
}

template <class T>
void check_params(const Graph& g, const Graph& model, const GraphParamField<T>* begin, const GraphParamField<T>* end) {
  for (const GraphParamField<T>* f = begin; f != end; ++f)
    if (f->of_model && g.params.*f->field != model.params.*f->field)
      throw Error("the graph's " + std::string(f->name) + " is " + str(g.params.*f->field) + ", the model's " +
                  str(model.params.*f->field));
}

// The tensor a weight view named `name` reads: the tensor of that name, or for a part of one
// ("NAME.kv0", "NAME.rows128", as the builder names them) the longest tensor name it begins with
// followed by a dot; null when there is none.
const std::pair<const std::string, TensorRef>* named_tensor(const ModelWeights& w, std::string name) {
  for (;;) {
    if (auto it = w.tensors.find(name); it != w.tensors.end()) return &*it;
    const size_t dot = name.rfind('.');
    if (dot == std::string::npos) return nullptr;
    name.resize(dot);
  }
}

// Throws unless view `id`, in a weight arena, is bf16 and a window of the tensor its name
// names: the whole tensor when the name is the tensor's; else rows of the tensor's rows (its row
// stride the tensor's row length) and columns within a row, its last element within the tensor.
void check_weight_view(const Graph& g, const ModelWeights& w, uint32_t id) {
  const SpView& v = g.views[id];
  const std::string& name = g.view_names[id];
  const std::string view = "the graph's weight view '" + name + "' (" + describe(g, v) + ")";
  if (v.dtype != SP_BF16) throw Error(view + " is not bf16, as every weight is");
  const auto* named = named_tensor(w, name);
  if (!named) throw Error(view + " names no tensor of the model");
  const auto& [tensor_name, t] = *named;
  const uint64_t row = t.shape.empty() ? 1 : t.shape.back(), elements = t.elements();
  const uint64_t offset = sp_view_offset(v), tensor_offset = t.offset;
  const std::string tensor = "the model's tensor '" + tensor_name + "' (" + shape_string(t.shape) +
                             " bf16 at byte " + str(tensor_offset) + " of arena 'weights:" +
                             w.arenas[t.arena].name + "')";
  const uint64_t first = (offset - tensor_offset) / 2;  // the view's first element in the tensor
  const bool inside = row > 0 && v.arena == SP_ARENA_WEIGHTS0 + t.arena && offset >= tensor_offset &&
                      (offset - tensor_offset) % 2 == 0 && (v.rows <= 1 || v.row_stride == row) &&
                      first % row + v.cols <= row &&
                      (v.rows == 0 || first + (uint64_t(v.rows) - 1) * row + v.cols <= elements);
  if (!inside) throw Error(view + " is not within " + tensor);
  if (name == tensor_name && (first != 0 || v.cols != row || uint64_t(v.rows) * row != elements))
    throw Error(view + " is not " + tensor);
}

// The views in the arenas whose layout the model sets (all but WORK and the weights), in order.
std::vector<uint32_t> state_views(const Graph& g) {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < g.views.size(); ++i)
    if (g.views[i].arena != SP_ARENA_WORK && g.views[i].arena < SP_ARENA_WEIGHTS0) ids.push_back(i);
  return ids;
}

}  // namespace

void check_replay(const Graph& g, const ModelWeights& w) {
  const SpGraphParams& p = g.params;
  if (p.context > w.config.max_position)
    throw Error("the graph's context is " + str(p.context) + " positions, more than the model's " +
                str(w.config.max_position) + " (max_position_embeddings)");
  BuildOptions build;
  build.context = p.context;
  build.max_steps = p.max_steps;
  const Graph model = build_decode_graph(w, build);

  check_params(g, model, std::begin(kU32GraphParams), std::end(kU32GraphParams));
  check_params(g, model, std::begin(kF32GraphParams), std::end(kF32GraphParams));

  if (g.arenas.size() != model.arenas.size())
    throw Error("the graph has " + str(g.arenas.size() - SP_ARENA_WEIGHTS0) + " weight arenas, the model " +
                str(model.arenas.size() - SP_ARENA_WEIGHTS0));
  for (uint32_t a = SP_ARENA_WEIGHTS0; a < g.arenas.size(); ++a)
    if (g.arenas[a].name != model.arenas[a].name || g.arenas[a].bytes != model.arenas[a].bytes)
      throw Error("the graph's weight arena " + str(a - SP_ARENA_WEIGHTS0) + " is '" + g.arenas[a].name + "' of " +
                  str(g.arenas[a].bytes) + " bytes, the model's '" + model.arenas[a].name + "' of " +
                  str(model.arenas[a].bytes) + " bytes");
  for (uint32_t i = 0; i < g.views.size(); ++i)
    if (g.views[i].arena >= SP_ARENA_WEIGHTS0) check_weight_view(g, w, i);

  if (g.op_params.size() != model.op_params.size())
    throw Error("the graph has " + str(g.op_params.size()) + " op parameter records, the model " +
                str(model.op_params.size()));
  // Each record's model words (every record is an SpMoeParams); the held experts and the shared
  // split are the partition's and the tiling's, which may differ.
  for (size_t i = 0; i < g.op_params.size(); ++i)
    if (!std::equal(g.op_params[i].word, g.op_params[i].word + kSpMoeModelWords, model.op_params[i].word))
      throw Error("the graph's op parameter record " + str(i) + " is " + words(g.op_params[i]) + ", the model's " +
                  words(model.op_params[i]) + " (tasks/op_params.h)");

  for (uint32_t a = SP_ARENA_STATE; a < SP_ARENA_WEIGHTS0; ++a)
    if (a != SP_ARENA_WORK && g.arenas[a].bytes != model.arenas[a].bytes)
      throw Error("the graph's arena '" + g.arenas[a].name + "' has " + str(g.arenas[a].bytes) +
                  " bytes, the model's " + str(model.arenas[a].bytes));
  const std::vector<uint32_t> ours = state_views(g), theirs = state_views(model);
  for (size_t i = 0; i < std::max(ours.size(), theirs.size()); ++i) {
    // Every field of the view but its reserved word, which no executor reads.
    const auto said = [](const Graph& of, const std::vector<uint32_t>& ids, size_t k) {
      return k < ids.size() ? "view '" + of.view_names[ids[k]] + "' (" + describe(of, of.views[ids[k]]) + ")"
                            : std::string("no more views");
    };
    const std::string graph_has = said(g, ours, i), model_has = said(model, theirs, i);
    if (graph_has != model_has)
      throw Error("the graph lays out the state the model keeps (token arrays, KV cache, RoPE table, recurrent "
                  "state) otherwise: the graph has " + graph_has + " where the model has " + model_has);
  }
}

}  // namespace spindle
