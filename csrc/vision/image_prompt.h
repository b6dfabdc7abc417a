// A state with images, as the text model reads it. The request's state holds
// one <|image_pad|> per image, where the image stands; here each becomes one
// pad per merged 2x2 patch group, and every token gets M-RoPE's three position
// streams (temporal, height, width) with transformers' get_rope_index rule:
// text continues one past the largest position so far (t = h = w); an image
// starting after it takes that start plus its merged grid coordinates (t = 0
// for a still image), so text after an image of g_h x g_w groups continues
// max(g_h, g_w) past the image's start.
//
// The prefix cache hashes token ids, and two different images of the same
// size give identical ids. So the ids the cache hashes (hash_ids) carry each
// image's key instead: its tokens cycle through the four 64-bit words of the
// key (SHA-256 of its pixels, size, recipe and model, made by the image engine
// process), with the top bit set so they can never equal a real token id. Every
// block that overlaps an image then has the key in its chained hash and in the
// tokens a hit is verified against (as vLLM's extra block-hash keys do).
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "batch/image_state.h"
#include "model/model_config.h"

namespace tq {

using ImageKey = std::array<uint64_t, 4>;

struct PromptImageShape {
  int64_t grid_h = 0, grid_w = 0;  // merged grid: the image's sides / (patch_size * merge)
  ImageKey key{};
};

// Throws BAD_REQUEST unless the state holds exactly one <|image_pad|> per image.
ImagePrompt expand_image_prompt(const std::vector<int64_t>& state, const std::vector<PromptImageShape>& images, const ImageTokens& tokens);

}  // namespace tq
