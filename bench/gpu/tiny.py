"""The tiny test families every part of the GPU check runs (make_models.py writes them), and the vision-language ones."""
TINY = ["tiny-llama", "tiny-mistral", "tiny-qwen2", "tiny-qwen3", "tiny-gemma3", "tiny-phi3", "tiny-olmo2", "tiny-smollm3",
        "tiny-qwen3-moe", "tiny-mixtral", "tiny-qwen2-moe"]
VISION = ["tiny-qwen2-vl", "tiny-qwen2.5-vl"]
