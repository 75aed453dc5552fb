#!/usr/bin/env python3
"""Build tiny random-weight Hugging Face models and save the reference fixtures the C++ tests
compare against (see DESIGN.md, "Correctness gates": HF is the external arbiter of the math).

For every fixture NAME this writes OUT/NAME/:
  config.json, generation_config.json, model.safetensors
        model.save_pretrained(safe_serialization=True), weights in bfloat16. A fixture may pass
        extra save_pretrained keywords (FIXTURES options), e.g. save_original_format=False to
        store MoE experts in transformers' fused in-memory layout instead of per-expert tensors.
  logits.safetensors
        one fp32 tensor `logits` [len(ids), vocab]; row t = HF's next-token logits after
        ids[0..t], from ONE teacher-forced forward pass of the bf16 model over all of `ids`.
  greedy.json
        prompt_ids (= ids[:4]), max_new_tokens, tokens (the generated tokens only, prompt not
        included) from model.generate(do_sample=False) in bf16, top1_margins
        (logit[top1] - logit[top2] at each generated step), versions, attn_implementation, dtype.
  meta.json
        everything else: the full `ids`, family, classes, seeds, init scheme, logit std,
        device, versions; for MoE families also the experts implementation transformers ran
        (config._experts_implementation), the on-disk experts layout, which experts the router
        chose in each layer over the teacher-forced `ids`, and the smallest router-logit gap
        between the k-th and (k+1)-th expert (see MIN_ROUTER_GAP).

Usage:
  python3 -m venv build-fixtures-venv
  build-fixtures-venv/bin/pip install -r scripts/requirements-fixtures.txt
  build-fixtures-venv/bin/python scripts/make_hf_fixtures.py [--out tests/fixtures] [--only NAME]
        [--device cpu|cuda] [--threads 1] [--no-verify] [--search START:COUNT]
The checked-in fixtures were made with --device cpu --threads 1 (the defaults); another device
or thread count may round differently. --search writes nothing and lists candidate seeds.

The tokenizer's fixture (tests/fixtures/qwen2-bpe-tokenizer: a byte-level BPE trained with
Qwen2's pre-tokenizer, a corpus and the `tokenizers` library's ids for it) is made by
scripts/make_tokenizer_fixture.py, which needs only `tokenizers`, not torch or transformers.

Adding a family (qwen3_next, qwen3_5, qwen3_5_moe; qwen3 and qwen3_moe are done) = one entry
in FAMILIES plus one or more entries in FIXTURES. For an MoE family the seed must also give,
in every MoE layer, more than top-k distinct experts over the teacher-forced ids and a router
gap >= MIN_ROUTER_GAP (--search marks such seeds; the build fails otherwise). The script is
deterministic: every random draw comes from a torch.Generator seeded per fixture.
"""

import argparse
import json
import math
import os
import re
import sys

import torch
import transformers
from safetensors.torch import load_file, save_file

# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------

# Sizes shared by every tiny fixture. A family entry may override any of them.
TINY = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    intermediate_size=128,
    vocab_size=512,
    max_position_embeddings=256,
    rms_norm_eps=1e-6,
    rope_theta=10000.0,
    tie_word_embeddings=False,
    # No special tokens: a random model must never stop early, and the C++ greedy loop does
    # not stop on EOS either.
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
)

# family -> how to build it.
#   config_class / model_class: names in the `transformers` namespace.
#   config_kwargs: merged over TINY.
#   norm_center: every `*norm.weight` is initialised to norm_center + U(-NORM_SPREAD, NORM_SPREAD).
#       1.0 for the plain-scale RMSNorm (qwen3, qwen3_moe); 0.0 for the zero-centred "(1+w)"
#       RMSNorm (qwen3_next, qwen3_5, qwen3_5_moe; spec section 1.2).
#   plain_norm_patterns: regexes of norm weights that are plain scales (centre 1.0) even when
#       norm_center is 0.0, e.g. r"linear_attn\.norm\.weight$" (GDN gated norm, spec 1.3).
FAMILIES = {
    "qwen3": dict(
        config_class="Qwen3Config",
        model_class="Qwen3ForCausalLM",
        config_kwargs=dict(attention_bias=False, use_sliding_window=False),
        norm_center=1.0,
        plain_norm_patterns=[],
    ),
    # intermediate_size (TINY's) is used by HF only for dense layers; with decoder_sparse_step=1
    # and mlp_only_layers=[] every layer is an MoE block. The router `mlp.gate.weight` [E, H] and
    # the experts get the generic N(0, 1/sqrt(fan_in)) init.
    "qwen3_moe": dict(
        config_class="Qwen3MoeConfig",
        model_class="Qwen3MoeForCausalLM",
        config_kwargs=dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                           norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[]),
        norm_center=1.0,
        plain_norm_patterns=[],
    ),
    # Gated DeltaNet layers 0-2, gated attention in layer 3 (full_attention_interval 4), a dense
    # MLP; a quarter of head_dim rotary. Qwen3_5ForCausalLM saves its tensors under `model.`
    # (the released checkpoints' `model.language_model.` is the loader's to fold, spec 3.4).
    # A_log and dt_bias keep the model's own init (log U(0.01, 16) and ones).
    "qwen3_5": dict(
        config_class="Qwen3_5TextConfig",
        model_class="Qwen3_5ForCausalLM",
        config_kwargs=dict(num_hidden_layers=4, linear_num_key_heads=2, linear_num_value_heads=4,
                           linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4,
                           partial_rotary_factor=0.25),
        norm_center=0.0,
        plain_norm_patterns=[r"linear_attn\.norm\.weight$"],
    ),
    # The hybrid MoE families in two layers (a GDN layer, then gated attention), so that a seed
    # meets the routing conditions in both as often as qwen3_moe's do; 8 experts, top 2, and a
    # gated shared expert.
    "qwen3_5_moe": dict(
        config_class="Qwen3_5MoeTextConfig",
        model_class="Qwen3_5MoeForCausalLM",
        config_kwargs=dict(num_hidden_layers=2, layer_types=["linear_attention", "full_attention"],
                           linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
                           linear_value_head_dim=16, linear_conv_kernel_dim=4, partial_rotary_factor=0.25,
                           num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                           shared_expert_intermediate_size=32),
        norm_center=0.0,
        plain_norm_patterns=[r"linear_attn\.norm\.weight$"],
    ),
    "qwen3_next": dict(
        config_class="Qwen3NextConfig",
        model_class="Qwen3NextForCausalLM",
        config_kwargs=dict(num_hidden_layers=2, layer_types=["linear_attention", "full_attention"],
                           linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
                           linear_value_head_dim=16, linear_conv_kernel_dim=4, partial_rotary_factor=0.25,
                           num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                           shared_expert_intermediate_size=32, norm_topk_prob=True, decoder_sparse_step=1,
                           mlp_only_layers=[]),
        norm_center=0.0,
        plain_norm_patterns=[r"linear_attn\.norm\.weight$"],
    ),
}

# fixture name -> (family, config overrides, seed[, options]). The seed draws the weights and the
# ids; it was chosen with --search so that every greedy step has a top-1 margin >= MIN_MARGIN
# (with --device cpu --threads 1), and for MoE the routing conditions (MIN_ROUTER_GAP). A tied
# random model tends to repeat tokens; that is expected.
# options (optional dict):
#   save_kwargs: extra model.save_pretrained keywords.
#   experts_layout: the MoE experts layout the saved model.safetensors must have (checked):
#       "per_expert": model.layers.{i}.mlp.experts.{e}.{gate,up,down}_proj.weight, what
#           transformers 5.x save_pretrained writes by default for a model built from a config
#           (save_original_format=True reverts its fused in-memory tensors to the original
#           checkpoint format; a model loaded from a fused checkpoint is re-saved fused);
#       "fused": model.layers.{i}.mlp.experts.gate_up_proj [E, 2*I, H] (gate rows, then up
#           rows) and model.layers.{i}.mlp.experts.down_proj [E, H, I], no ".weight" suffix;
#           transformers' in-memory layout, written with save_original_format=False.
#   vl_wrapper: rewrite the saved text model, once its reference outputs are taken and
#       verified, into the released Qwen3.5 checkpoints' layout (spec 3.4): config.json the
#       vision-language wrapper's with the text config under text_config, the text tensors under
#       model.language_model., and a vision tensor and an MTP tensor that a text decoder must
#       ignore. The weights are the text model's, so its outputs are the references.
FIXTURES = {
    "qwen3-tiny": ("qwen3", dict(tie_word_embeddings=False), 1080),
    "qwen3-tiny-tied": ("qwen3", dict(tie_word_embeddings=True), 1389),
    "qwen3-moe-tiny": ("qwen3_moe", dict(tie_word_embeddings=False), 1503,
                       dict(experts_layout="per_expert")),
    "qwen3-moe-tiny-fused": ("qwen3_moe", dict(tie_word_embeddings=True), 7926,
                             dict(experts_layout="fused",
                                  save_kwargs=dict(save_original_format=False))),
    "qwen3.5-tiny": ("qwen3_5", dict(tie_word_embeddings=False), 254),
    "qwen3.5-tiny-vl": ("qwen3_5", dict(tie_word_embeddings=False), 254, dict(vl_wrapper=True)),
    "qwen3.5-moe-tiny": ("qwen3_5_moe", dict(tie_word_embeddings=False), 2974,
                         dict(experts_layout="fused", save_kwargs=dict(save_original_format=False))),
    "qwen3-next-tiny": ("qwen3_next", dict(tie_word_embeddings=False), 857, dict(experts_layout="per_expert")),
}

ATTN_IMPLEMENTATION = "sdpa"  # HF's default; recorded in the fixture.
DTYPE = torch.bfloat16
NUM_IDS = 24                  # teacher-forced sequence length
NUM_PROMPT = 4                # greedy prompt = ids[:NUM_PROMPT]
MAX_NEW_TOKENS = 16
IDS_SEED = 4242               # ids are drawn with this seed (+ fixture seed), see make_ids
NORM_SPREAD = 0.25            # norm weights: centre +- U(0.25)
# Logit scale. KL between two bf16 implementations grows with the square of the logit scale:
# at std 3 HF's own paths disagree by mean KL ~1e-4 (its cached decode vs one forward pass;
# eager vs sdpa; fp32 vs bf16), far above the 1e-5 gate. At std 0.3 HF's fp32 model sits within
# ~3e-6 (untied) and ~1e-5 (tied) of its bf16 logits, so the gate measures our arithmetic, not
# HF's rounding; a real math error still moves the logits by their own scale (KL ~1e-2).
LOGIT_STD_TARGET = 0.3        # lm_head (or tied embedding) is rescaled towards this
LOGIT_STD_RANGE = (0.24, 0.36)
MIN_MARGIN = 0.02             # wanted min greedy top-1 margin, twice what HF's own decode and teacher-forced
                              # paths differ by (up to ~0.01 at this scale); seeds chosen with --search
# MoE routing is discontinuous: when the k-th and (k+1)-th router logits (bf16) are within
# rounding noise, a different but correct implementation may pick another expert and move the
# logits by their own scale (HF's own cached decode vs teacher-forced router logits differ by up
# to ~0.02, about one bf16 ulp of the logit). MoE seeds need, in every MoE layer and at every
# position of the teacher-forced ids and of prompt + greedy tokens, a k-th vs (k+1)-th router
# logit gap >= this. (Scaling the router weights does not help: the noise scales with them.
# With 8 experts, top-2, ~44 positions x 2 layers: about 1 seed in 40 reaches 0.02, 1 in 140
# reaches 0.03; with the greedy margin too, about 1 in 700 qualifies.)
MIN_ROUTER_GAP = 0.02

# ---------------------------------------------------------------------------------------------
# transformers 4.x / 5.x compatibility
# ---------------------------------------------------------------------------------------------

TF_MAJOR = int(transformers.__version__.split(".")[0])


def dtype_kwarg(dtype):
    """from_pretrained / from_config keyword for the dtype: `dtype=` in v5, `torch_dtype=` in v4."""
    return {"dtype": dtype} if TF_MAJOR >= 5 else {"torch_dtype": dtype}


def make_config(family, overrides):
    fam = FAMILIES[family]
    kwargs = dict(TINY)
    kwargs.update(fam["config_kwargs"])
    kwargs.update(overrides)
    theta = kwargs.pop("rope_theta")
    if TF_MAJOR >= 5:
        # v5 reads the rotary fraction from rope_parameters (the hybrid families' rotary
        # embedding takes 1.0 when it is missing there).
        kwargs["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
        if "partial_rotary_factor" in kwargs:
            kwargs["rope_parameters"]["partial_rotary_factor"] = kwargs.pop("partial_rotary_factor")
    else:
        kwargs["rope_theta"] = theta
    cfg = getattr(transformers, fam["config_class"])(**kwargs)
    cfg._attn_implementation = ATTN_IMPLEMENTATION
    # Both spellings so the saved config.json says bfloat16 whatever the version.
    if TF_MAJOR >= 5:
        cfg.dtype = DTYPE
    else:
        cfg.torch_dtype = DTYPE
    return cfg


# ---------------------------------------------------------------------------------------------
# Weight initialisation
# ---------------------------------------------------------------------------------------------


def init_weights(model, family, gen):
    """Deterministic init (fp32 master model).

    * 2-D+ weights [.., out, in]: N(0, 1/sqrt(in)), so every projection keeps unit scale.
    * input embedding (untied): N(0, 1).
    * lm_head (or the tied embedding): N(0, LOGIT_STD_TARGET/sqrt(hidden)); calibrated later.
    * `*norm.weight`: centre + U(-NORM_SPREAD, NORM_SPREAD), so a missing norm weight, or a
      wrong "(1+w)" convention, changes the logits.
    * other 1-D parameters (none in qwen3; A_log, dt_bias etc. in the hybrid families): left
      as the model's own init (which ran under torch.manual_seed).
    """
    fam = FAMILIES[family]
    cfg = model.config
    H = cfg.hidden_size
    tied = bool(getattr(cfg, "tie_word_embeddings", False))
    out_emb = model.get_output_embeddings().weight
    in_emb = model.get_input_embeddings().weight
    plain = [re.compile(p) for p in fam["plain_norm_patterns"]]
    seen = set()
    with torch.no_grad():
        for name, p in model.named_parameters(remove_duplicate=True):
            if id(p) in seen:
                continue
            seen.add(id(p))
            if p is out_emb or (tied and p is in_emb):
                std = LOGIT_STD_TARGET / math.sqrt(H)
                p.copy_(torch.randn(p.shape, generator=gen) * std)
            elif p is in_emb:
                p.copy_(torch.randn(p.shape, generator=gen))
            elif name.endswith("norm.weight"):
                centre = 1.0 if any(r.search(name) for r in plain) else fam["norm_center"]
                u = torch.rand(p.shape, generator=gen) * 2.0 - 1.0
                p.copy_(centre + NORM_SPREAD * u)
            elif p.dim() >= 2:
                fan_in = p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(fan_in))
            # else: keep the model's own init


def to_bf16_copy(model):
    """A bf16 model with the fp32 master's weights, built the way from_pretrained builds it.

    NOT model.to(bfloat16): that also casts the rotary `inv_freq` buffer to bf16, which changes
    the RoPE angles; from_pretrained(dtype=bfloat16) keeps inv_freq in fp32.
    """
    m = type(model)._from_config(model.config, **dtype_kwarg(DTYPE))
    sd = {k: v.to(DTYPE) for k, v in model.state_dict().items()
          if v.is_floating_point() and "inv_freq" not in k}
    missing, unexpected = m.load_state_dict(sd, strict=False)
    assert not unexpected and all("inv_freq" in k for k in missing), (missing, unexpected)
    for n, b in m.named_buffers():
        assert "inv_freq" not in n or b.dtype == torch.float32, (n, b.dtype)
    m.eval()
    return m


@torch.no_grad()
def teacher_forced_logits(model, ids, device):
    x = torch.tensor([ids], dtype=torch.long, device=device)
    out = model(input_ids=x, attention_mask=torch.ones_like(x), use_cache=False)
    return out.logits[0].float().cpu()


def calibrate(model_fp32, ids, device):
    """Rescale lm_head (or the tied embedding) so that the bf16 logits have std ~ target."""
    w = model_fp32.get_output_embeddings().weight
    total_scale = 1.0
    for _ in range(6):
        m = to_bf16_copy(model_fp32).to(device)
        std = teacher_forced_logits(m, ids, device).std().item()
        if abs(std - LOGIT_STD_TARGET) < 0.1 * LOGIT_STD_TARGET:
            break
        s = LOGIT_STD_TARGET / std
        with torch.no_grad():
            w.mul_(s)
        total_scale *= s
    return total_scale


# ---------------------------------------------------------------------------------------------
# Fixture
# ---------------------------------------------------------------------------------------------


def fixture_spec(name):
    """(family, config overrides, seed, options) of fixture `name`."""
    spec = FIXTURES[name]
    return (*spec, {}) if len(spec) == 3 else spec


def make_ids(vocab, seed):
    g = torch.Generator().manual_seed(IDS_SEED + seed)
    return torch.randint(0, vocab, (NUM_IDS,), generator=g).tolist()


def build_master(name, seed, device):
    """fp32 master model of fixture `name` with weights from `seed`, calibrated; and its ids."""
    family, overrides, _, _ = fixture_spec(name)
    fam = FAMILIES[family]
    torch.manual_seed(seed)  # for any parameter init_weights leaves to the model
    gen = torch.Generator().manual_seed(seed)
    cfg = make_config(family, overrides)
    model = getattr(transformers, fam["model_class"])(cfg)
    model.eval()
    assert model.config._attn_implementation == ATTN_IMPLEMENTATION, model.config._attn_implementation
    init_weights(model, family, gen)
    ids = make_ids(cfg.vocab_size, seed)
    scale = calibrate(model, ids, device)
    return model, ids, scale


@torch.no_grad()
def greedy(model, prompt_ids, device):
    x = torch.tensor([prompt_ids], dtype=torch.long, device=device)
    gen_cfg = transformers.GenerationConfig(
        do_sample=False, max_new_tokens=MAX_NEW_TOKENS, min_new_tokens=MAX_NEW_TOKENS,
        eos_token_id=None, bos_token_id=None, pad_token_id=0, num_beams=1,
        temperature=None, top_p=None, top_k=None,
        return_dict_in_generate=True, output_logits=True)
    out = model.generate(x, attention_mask=torch.ones_like(x), generation_config=gen_cfg)
    tokens = out.sequences[0, len(prompt_ids):].tolist()
    step_logits = torch.stack([l[0].float().cpu() for l in out.logits])  # [new, V]
    top2 = step_logits.topk(2, dim=-1)
    margins = (top2.values[:, 0] - top2.values[:, 1]).tolist()
    argmax = step_logits.argmax(-1).tolist()
    assert argmax == tokens, f"generate tokens {tokens} != argmax of its logits {argmax}"
    return tokens, margins, step_logits


@torch.no_grad()
def routing(model, ids, device):
    """For MoE models, over one teacher-forced pass of `ids`: ({layer: sorted distinct expert ids
    the router picked}, top_k, {layer: min over positions of the k-th minus the (k+1)-th router
    logit}); ({}, None, {}) for dense models."""
    out_by_layer, hooks, top_k = {}, [], None
    for name, mod in model.named_modules():
        m = re.search(r"layers\.(\d+)\.mlp\.gate$", name)
        if m and hasattr(mod, "top_k") and hasattr(mod, "num_experts"):
            top_k = mod.top_k
            layer = int(m.group(1))
            # router forward returns (router_logits, router_scores, router_indices)
            hooks.append(mod.register_forward_hook(
                lambda _m, _i, out, layer=layer: out_by_layer.__setitem__(layer, out)))
    if hooks:
        teacher_forced_logits(model, ids, device)
        for h in hooks:
            h.remove()
    used, gaps = {}, {}
    for l in sorted(out_by_layer):
        logits, _, indices = out_by_layer[l]
        used[l] = sorted(set(indices.flatten().tolist()))
        top = logits.float().topk(top_k + 1, dim=-1).values
        gaps[l] = (top[:, top_k - 1] - top[:, top_k]).min().item()
    return used, top_k, gaps


def routing_summary(model, ids, prompt_and_tokens, device):
    """routing() over the teacher-forced ids (experts used, gaps) and over prompt + greedy
    tokens (gaps); the min gap of both. None for dense models."""
    used, top_k, gaps = routing(model, ids, device)
    if top_k is None:
        return None
    _, _, gaps_greedy = routing(model, prompt_and_tokens, device)
    return dict(top_k=top_k, used=used, gaps_ids=gaps, gaps_greedy=gaps_greedy,
                min_gap=min(list(gaps.values()) + list(gaps_greedy.values())))


def routing_ok(rt):
    return rt is None or (all(len(e) > rt["top_k"] for e in rt["used"].values())
                          and rt["min_gap"] >= MIN_ROUTER_GAP)


def experts_layout(tensor_names):
    """On-disk MoE experts layout of a checkpoint: "per_expert", "fused", or None (dense)."""
    per = any(re.search(r"\.mlp\.experts\.\d+\.", n) for n in tensor_names)
    fused = any(re.search(r"\.mlp\.experts\.(gate_up_proj|down_proj)$", n) for n in tensor_names)
    assert not (per and fused), "mixed experts layouts"
    return "per_expert" if per else "fused" if fused else None


def reference_outputs(model, ids, device):
    """What the fixture stores, computed with `model` (a bf16 model)."""
    prompt = ids[:NUM_PROMPT]
    logits = teacher_forced_logits(model, ids, device)
    tokens, margins, step_logits = greedy(model, prompt, device)
    # HF's own decode path (KV cache, one token a step) vs one teacher-forced pass over
    # prompt + generated: how far HF disagrees with itself through bf16 rounding alone.
    tf = teacher_forced_logits(model, prompt + tokens, device)[NUM_PROMPT - 1:-1]
    return dict(logits=logits, prompt=prompt, tokens=tokens, margins=margins,
                decode_vs_tf=(tf - step_logits).abs().max().item())


def load_fixture_model(d, family, device):
    model_cls = getattr(transformers, FAMILIES[family]["model_class"])
    m = model_cls.from_pretrained(d, attn_implementation=ATTN_IMPLEMENTATION, **dtype_kwarg(DTYPE))
    m.eval()
    assert m.dtype == DTYPE, m.dtype
    assert m.config._attn_implementation == ATTN_IMPLEMENTATION, m.config._attn_implementation
    return m.to(device)


def build_fixture(name, out_root, device, verify):
    family, _, seed, options = fixture_spec(name)
    fam = FAMILIES[family]
    model, ids, scale = build_master(name, seed, device)
    model_bf16 = to_bf16_copy(model)

    d = os.path.join(out_root, name)
    os.makedirs(d, exist_ok=True)
    model_bf16.save_pretrained(d, safe_serialization=True, **options.get("save_kwargs", {}))
    layout = experts_layout(load_file(os.path.join(d, "model.safetensors")).keys())
    assert layout == options.get("experts_layout"), (layout, options)

    # The reference outputs come from the checkpoint as transformers loads it.
    loaded = load_fixture_model(d, family, device)
    ref = reference_outputs(loaded, ids, device)
    rt = routing_summary(loaded, ids, ref["prompt"] + ref["tokens"], device)
    logits, tokens, margins = ref["logits"], ref["tokens"], ref["margins"]
    logit_std = logits.std().item()
    save_file({"logits": logits.contiguous()}, os.path.join(d, "logits.safetensors"))

    versions = dict(transformers_version=transformers.__version__,
                    torch_version=torch.__version__)
    greedy_doc = dict(prompt_ids=ref["prompt"], max_new_tokens=MAX_NEW_TOKENS, tokens=tokens,
                      top1_margins=[round(m, 6) for m in margins],
                      **versions, attn_implementation=ATTN_IMPLEMENTATION, dtype="bfloat16")
    with open(os.path.join(d, "greedy.json"), "w") as f:
        json.dump(greedy_doc, f, indent=1)
        f.write("\n")

    moe = {}
    if rt is not None:
        moe = dict(
            experts_implementation=loaded.config._experts_implementation,
            experts_layout=layout,
            save_pretrained_kwargs=options.get("save_kwargs", {}),
            experts_used={f"layer{l}": e for l, e in rt["used"].items()},
            experts_used_note="distinct experts the router picked in each layer over one "
                              "teacher-forced pass of ids (num_experts_per_tok = "
                              f"{rt['top_k']} per token)",
            router_min_gap=dict(
                ids={f"layer{l}": g for l, g in rt["gaps_ids"].items()},
                greedy={f"layer{l}": g for l, g in rt["gaps_greedy"].items()},
                note="min over positions of the k-th minus the (k+1)-th (bf16) router logit, "
                     "teacher-forced over ids, and over prompt_ids + greedy tokens"),
        )
    meta = dict(
        name=name, family=family, config_class=fam["config_class"],
        model_class=fam["model_class"], seed=seed, ids_seed=IDS_SEED + seed, ids=ids,
        logits="logits.safetensors: fp32 [len(ids), vocab]; row t = next-token logits after "
               "ids[0..t], one teacher-forced forward of the bf16 model",
        greedy="greedy.json: tokens = the max_new_tokens generated after prompt_ids "
               "(prompt not included)",
        init=dict(linear="N(0, 1/sqrt(fan_in))", embedding="N(0, 1) when untied",
                  lm_head=f"N(0, {LOGIT_STD_TARGET}/sqrt(hidden)) x {scale:.6f} (calibration)",
                  norms=f"{fam['norm_center']} + U(-{NORM_SPREAD}, {NORM_SPREAD})"),
        logit_std=round(logit_std, 6), min_top1_margin=round(min(margins), 6),
        hf_decode_vs_teacher_forced_max_abs_diff=ref["decode_vs_tf"],
        device=str(device), torch_num_threads=torch.get_num_threads(), **versions,
        attn_implementation=ATTN_IMPLEMENTATION, dtype="bfloat16", **moe,
        python_version=sys.version.split()[0],
    )
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")

    result = dict(name=name, dir=d, logit_std=logit_std, logit_absmax=logits.abs().max().item(),
                  prompt=ref["prompt"], tokens=tokens, min_margin=min(margins),
                  decode_vs_tf=ref["decode_vs_tf"], scale=scale, layout=layout, routing=rt,
                  experts_impl=moe.get("experts_implementation"))
    if verify:
        result.update(verify_fixture(d, family, device, model_bf16.to(device)))
    if options.get("vl_wrapper"):
        to_vl_wrapper(d, seed)
    result["files"] = {fn: os.path.getsize(os.path.join(d, fn)) for fn in sorted(os.listdir(d))}
    return result


def to_vl_wrapper(d, seed):
    """Rewrites the text checkpoint in d into the released Qwen3.5 layout (FIXTURES, vl_wrapper)."""
    path = os.path.join(d, "config.json")
    text = json.load(open(path))
    wrapper = dict(architectures=["Qwen3_5ForConditionalGeneration"], model_type="qwen3_5",
                   tie_word_embeddings=text["tie_word_embeddings"], text_config=text,
                   vision_config=dict(depth=1, hidden_size=16), transformers_version=text["transformers_version"])
    with open(path, "w") as f:
        json.dump(wrapper, f, indent=2)
        f.write("\n")
    st = os.path.join(d, "model.safetensors")
    tensors = {("model.language_model." + k[len("model."):] if k.startswith("model.") else k): v
               for k, v in load_file(st).items()}
    g = torch.Generator().manual_seed(seed)
    tensors["model.visual.blocks.0.attn.qkv.weight"] = torch.randn(48, 16, generator=g).to(DTYPE)
    tensors["mtp.fc.weight"] = torch.randn(64, 128, generator=g).to(DTYPE)
    save_file(tensors, st, metadata={"format": "pt"})


@torch.no_grad()
def verify_fixture(d, family, device, model_in_memory):
    """Reload the saved files with transformers and check that they reproduce the saved
    outputs exactly, and that the in-memory bf16 model (before saving) agrees too."""
    meta = json.load(open(os.path.join(d, "meta.json")))
    g = json.load(open(os.path.join(d, "greedy.json")))
    saved = load_file(os.path.join(d, "logits.safetensors"))
    assert list(saved) == ["logits"] and saved["logits"].dtype == torch.float32
    st = load_file(os.path.join(d, "model.safetensors"))
    assert all(t.dtype == DTYPE for t in st.values()), {k: t.dtype for k, t in st.items()}
    checks = {}
    for label, m in (("reload", load_fixture_model(d, family, device)),
                     ("in-memory", model_in_memory)):
        r = reference_outputs(m, meta["ids"], device)
        checks[label] = ((r["logits"] - saved["logits"]).abs().max().item(),
                         r["tokens"] == g["tokens"])
    ok = all(diff == 0.0 and same for diff, same in checks.values())
    return dict(verify_ok=ok, verify=checks, tensors=sorted(st))


def search(name, start, count, device):
    """Print, for seeds start..start+count-1, what fixture `name` would look like."""
    print(f"{name}: seed  min_top1_margin  distinct_greedy_tokens  logit_std  tokens"
          "  [MoE: distinct experts per layer, min router gap]")
    for seed in range(start, start + count):
        model, ids, _ = build_master(name, seed, device)
        m = to_bf16_copy(model).to(device)
        r = reference_outputs(m, ids, device)
        rt = routing_summary(m, ids, r["prompt"] + r["tokens"], device)
        ok = min(r["margins"]) >= MIN_MARGIN and routing_ok(rt)
        flag = "  *" if ok else ""
        experts = (f" {[len(e) for e in rt['used'].values()]} {rt['min_gap']:.4f}"
                   if rt is not None else "")
        print(f"{name}: {seed} {min(r['margins']):.4f} {len(set(r['tokens']))} "
              f"{r['logits'].std().item():.3f} {r['tokens']}{experts}{flag}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="tests/fixtures", help="output root (default tests/fixtures)")
    ap.add_argument("--only", action="append", metavar="NAME",
                    help=f"build only this fixture (repeatable); one of {sorted(FIXTURES)}")
    ap.add_argument("--device", default="cpu", help="torch device for the HF runs (default cpu)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads (default 1, so CPU results do not depend on the machine)")
    ap.add_argument("--no-verify", action="store_true", help="skip the reload check")
    ap.add_argument("--search", metavar="START:COUNT",
                    help="write nothing; print the greedy margins for seeds START.. of each "
                         "selected fixture (to choose the seed in FIXTURES)")
    args = ap.parse_args()

    names = args.only or list(FIXTURES)
    for n in names:
        if n not in FIXTURES:
            ap.error(f"unknown fixture {n!r}; known: {sorted(FIXTURES)}")

    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    device = torch.device(args.device)
    print(f"transformers {transformers.__version__}  torch {torch.__version__}  "
          f"device {device}  threads {torch.get_num_threads()}  attn {ATTN_IMPLEMENTATION}  "
          f"dtype bfloat16")
    if args.search:
        start, count = (int(v) for v in args.search.split(":"))
        for n in names:
            search(n, start, count, device)
        return

    failed = False
    for n in names:
        r = build_fixture(n, args.out, device, not args.no_verify)
        lo, hi = LOGIT_STD_RANGE
        bad_std = not lo <= r["logit_std"] <= hi
        bad_margin = r["min_margin"] < MIN_MARGIN
        print(f"\n== {n}  ->  {r['dir']}")
        print(f"   logit std {r['logit_std']:.3f}{'  <-- OUT OF RANGE' if bad_std else ''}  "
              f"|max| {r['logit_absmax']:.2f}  (lm_head calibration x{r['scale']:.4f})")
        print(f"   greedy prompt {r['prompt']} -> tokens {r['tokens']}")
        print(f"   min top-1 margin {r['min_margin']:.4f}"
              f"{f'  <-- below {MIN_MARGIN}: choose another seed (--search)' if bad_margin else ''}"
              f"   HF decode vs teacher-forced max|diff| {r['decode_vs_tf']:.4g}")
        rt = r["routing"]
        if rt is not None:
            print(f"   experts: implementation {r['experts_impl']}, on-disk layout {r['layout']}, "
                  f"distinct experts per layer (top_k {rt['top_k']}) "
                  + ", ".join(f"{l}: {len(e)} {e}" for l, e in rt["used"].items())
                  + f"; min router gap {rt['min_gap']:.4f}"
                  + ("" if routing_ok(rt) else
                     f"  <-- a layer uses <= top_k experts or router gap < {MIN_ROUTER_GAP}: "
                     "choose another seed (--search)"))
            failed |= not routing_ok(rt)
        if "verify_ok" in r:
            print(f"   reload check: {'OK' if r['verify_ok'] else 'FAILED'}  "
                  + "  ".join(f"{k}: logits max|diff| {d}, greedy equal {e}"
                              for k, (d, e) in r["verify"].items())
                  + f"  ({len(r['tensors'])} tensors)")
            failed |= not r["verify_ok"]
        for fn, sz in r["files"].items():
            print(f"   {sz:>9d}  {fn}")
        failed |= bad_std
        if bad_margin:
            print(f"   warning: min top-1 margin below {MIN_MARGIN}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
