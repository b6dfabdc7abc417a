"""Random-weight checkpoints for the GPU check, written with transformers (no Node on the GPU machine).

The tiny models have the shapes and config fields of src/testmodels/specs.ts, one per family (their
weights differ: the float64 reference and transformers run on the same machine, on these very
files, and bench/gpu/families.py checks the engine against transformers' own classes on them).
bench-qwen3 has the shape of Qwen3-0.6B, in bf16: the benchmark model, loaded by both tqserve and
transformers.

  python3 bench/gpu/make_models.py OUT_DIR [NAME ...]      (NAME: only these; default all)

The configs are written in transformers 5's layout where that is the version (v5_fields); the float64 reference
reads both layouts, which test/engine/reference-config.test.ts checks with v5_fields itself (importing this file
needs neither torch nor transformers: the config classes are named, and found when a model is written).
"""
import os
import sys

TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, rms_norm_eps=1e-6, max_position_embeddings=4096,
            # Larger than a trained model's init, so attention is far from uniform (as in specs.ts).
            initializer_range=0.08)

MODELS = {
    "tiny-llama": ("LlamaConfig", dict(TINY, vocab_size=128256, rope_theta=500000.0, tie_word_embeddings=False,
                                        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
                   "bfloat16"),
    "tiny-mistral": ("MistralConfig", dict(TINY, vocab_size=32000, rope_theta=10000.0, tie_word_embeddings=False, sliding_window=24),
                     "float16"),
    "tiny-qwen2": ("Qwen2Config", dict(TINY, vocab_size=151936, rope_theta=1000000.0, tie_word_embeddings=True), "float32"),
    "tiny-qwen3": ("Qwen3Config", dict(TINY, head_dim=32, vocab_size=151936, rope_theta=1000000.0, tie_word_embeddings=True), "bfloat16"),
    # The families after the first four, with the test models' fields (specs.ts: tiny-gemma3, tiny-phi3, ...).
    "tiny-gemma3": ("Gemma3TextConfig",
                    dict(TINY, num_hidden_layers=3, head_dim=32, vocab_size=262144, rope_theta=1000000.0, tie_word_embeddings=True,
                         rope_scaling={"rope_type": "linear", "factor": 8.0}, rope_local_base_freq=10000.0, sliding_window=16,
                         layer_types=["sliding_attention", "sliding_attention", "full_attention"], query_pre_attn_scalar=24,
                         attn_logit_softcapping=None, final_logit_softcapping=30.0, hidden_activation="gelu_pytorch_tanh"),
                    "bfloat16"),
    "tiny-phi3": ("Phi3Config",
                  dict({k: v for k, v in TINY.items() if k != "head_dim"}, vocab_size=200064, rope_theta=10000.0, tie_word_embeddings=True,
                       partial_rotary_factor=0.75, original_max_position_embeddings=64, sliding_window=None, pad_token_id=199999,
                       bos_token_id=199999, eos_token_id=199999,
                       rope_scaling={"type": "longrope", "short_factor": [1, 1.1, 1.3, 1.7, 2.3, 3.1], "long_factor": [1, 1.5, 3, 6, 12, 24]}),
                  "bfloat16"),
    "tiny-olmo2": ("Olmo2Config", dict(TINY, vocab_size=100352, rope_theta=500000.0, tie_word_embeddings=False, pad_token_id=100257,
                                        bos_token_id=100257, eos_token_id=100257), "float32"),
    "tiny-smollm3": ("SmolLM3Config",
                     dict(TINY, num_hidden_layers=3, vocab_size=128256, rope_theta=5000000.0, tie_word_embeddings=True,
                          no_rope_layers=[1, 1, 0], no_rope_layer_interval=3, use_sliding_window=False),
                     "bfloat16"),
    # The mixtures of experts, as specs.ts's: Qwen3-MoE (top 2 of 8, renormalised, a dense layer between two sparse),
    # Mixtral (top 2 of 4), Qwen2-MoE (top 3 of 6, not renormalised, a shared expert). Their tensors are as this
    # transformers saves them (per expert, or stacked in transformers 5): the engine reads both.
    "tiny-qwen3-moe": ("Qwen3MoeConfig",
                       dict(TINY, num_hidden_layers=3, head_dim=32, vocab_size=151936, rope_theta=1000000.0, tie_word_embeddings=False,
                            num_experts=8, num_experts_per_tok=2, moe_intermediate_size=48, norm_topk_prob=True, decoder_sparse_step=1,
                            mlp_only_layers=[1]),
                       "bfloat16"),
    "tiny-mixtral": ("MixtralConfig", dict(TINY, vocab_size=32000, rope_theta=1000000.0, tie_word_embeddings=False, num_local_experts=4,
                                            num_experts_per_tok=2, intermediate_size=96, sliding_window=None),
                     "bfloat16"),
    "tiny-qwen2-moe": ("Qwen2MoeConfig",
                       dict(TINY, vocab_size=151936, rope_theta=1000000.0, tie_word_embeddings=False, num_experts=6, num_experts_per_tok=3,
                            moe_intermediate_size=32, shared_expert_intermediate_size=80, norm_topk_prob=False, decoder_sparse_step=1,
                            mlp_only_layers=[]),
                       "float32"),
    # The vision-language families (their text model as tiny-qwen2's under M-RoPE), as specs.ts's tiny-qwen2-vl and
    # tiny-qwen2.5-vl: written with their own ForConditionalGeneration classes (VL_TEXT, VL_VISION below).
    "tiny-qwen2-vl": ("Qwen2VLConfig", "vl", "float32"),
    "tiny-qwen2.5-vl": ("Qwen2_5_VLConfig", "vl", "float32"),
    "bench-qwen3": ("Qwen3Config", dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                                         num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6, vocab_size=151936,
                                         rope_theta=1000000.0, tie_word_embeddings=True, max_position_embeddings=40960),
                    "bfloat16"),
}


VL_TEXT = dict(TINY, vocab_size=151936, rope_theta=1000000.0, tie_word_embeddings=True,
               rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]})
VL_IDS = dict(vision_start_token_id=151652, vision_end_token_id=151653, vision_token_id=151654, image_token_id=151655, video_token_id=151656)
VL_VISION = {
    "tiny-qwen2-vl": dict(depth=2, embed_dim=32, hidden_size=64, num_heads=2, mlp_ratio=4, patch_size=14, temporal_patch_size=2,
                          spatial_merge_size=2, hidden_act="quick_gelu"),
    "tiny-qwen2.5-vl": dict(depth=3, hidden_size=32, out_hidden_size=64, intermediate_size=48, num_heads=2, patch_size=14,
                            temporal_patch_size=2, spatial_merge_size=2, hidden_act="silu", window_size=56, fullatt_block_indexes=[2],
                            tokens_per_second=2),
}


def vl_config(tf, name, config_class):
    """A vision-language config: the text fields at the top (transformers 4) or in text_config (5)."""
    text = dict(VL_TEXT)
    if int(tf.__version__.split(".")[0]) >= 5:
        rope = dict(text.pop("rope_scaling"), rope_type="default", rope_theta=text.pop("rope_theta"))
        rope.pop("type")
        text["rope_parameters"] = rope
        return config_class(text_config=text, vision_config=VL_VISION[name], tie_word_embeddings=True, **VL_IDS)
    return config_class(**text, vision_config=VL_VISION[name], **VL_IDS)


def v5_fields(fields):
    """transformers 5's layout of a config's fields: RoPE's theta and scaling in one rope_parameters object (Gemma 3:
    one per layer type)."""
    fields = dict(fields)
    rope = dict(fields.pop("rope_scaling", None) or {"rope_type": "default"})
    if "type" in rope:
        rope["rope_type"] = rope.pop("type")
    rope["rope_theta"] = fields.pop("rope_theta")
    if "rope_local_base_freq" in fields:
        local = {"rope_type": "default", "rope_theta": fields.pop("rope_local_base_freq")}
        rope = {"full_attention": rope, "sliding_attention": local}
    elif "original_max_position_embeddings" in fields:
        rope["original_max_position_embeddings"] = fields["original_max_position_embeddings"]
    fields["rope_parameters"] = rope
    return fields


def config_of(tf, config_class, fields):
    return config_class(**(v5_fields(fields) if int(tf.__version__.split(".")[0]) >= 5 else fields))


def main():
    import torch
    import transformers as tf

    out, only = sys.argv[1], set(sys.argv[2:])
    for i, (name, (class_name, fields, dtype)) in enumerate(MODELS.items()):
        folder = os.path.join(out, name)
        if (only and name not in only) or os.path.exists(os.path.join(folder, "config.json")):
            continue
        config_class, dtype = getattr(tf, class_name, None), getattr(torch, dtype)
        if config_class is None:
            print(f"{name}: this transformers ({tf.__version__}) has no class for it; skipped", flush=True)
            continue
        torch.manual_seed(20261122 + i)
        if fields == "vl":
            config = vl_config(tf, name, config_class)
            model = getattr(tf, config.architectures[0] if config.architectures else config_class.__name__.replace("Config", "ForConditionalGeneration"))(config)
        else:
            model = tf.AutoModelForCausalLM.from_config(config_of(tf, config_class, fields))
        with torch.no_grad():  # norm weights near 1 but not 1 (the ViT's and the merger's too), so a missing norm shows
            for n, p in model.named_parameters():
                part = n.split(".")[-2] if "." in n else ""
                if n.endswith(".weight") and ("norm" in part or part.startswith("ln_")):
                    p.add_(torch.randn_like(p) * 0.1)
        model.to(dtype).save_pretrained(folder, safe_serialization=True)
        print(f"{name}: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters, {dtype}", flush=True)


if __name__ == "__main__":
    main()
