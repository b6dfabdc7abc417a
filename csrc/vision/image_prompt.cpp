#include "vision/image_prompt.h"

#include <algorithm>

#include "common/errors.h"

namespace tq {

ImagePrompt expand_image_prompt(const std::vector<int64_t>& state, const std::vector<PromptImageShape>& images, const ImageTokens& tokens) {
  const auto pads = std::count(state.begin(), state.end(), tokens.image_pad);
  if (pads != static_cast<int64_t>(images.size()))
    throw EngineError(code::kBadRequest, "the state holds " + std::to_string(pads) + " image placeholder tokens for " + std::to_string(images.size()) +
                                             " images: one <|image_pad|> per image, where it stands");
  ImagePrompt p;
  auto text = [&](int64_t id) {
    p.ids.push_back(id);
    p.hash_ids.push_back(id);
    p.rope_positions.insert(p.rope_positions.end(), 3, p.next_position);
    ++p.next_position;
  };
  size_t image = 0;
  for (const auto id : state) {
    if (id != tokens.image_pad) {
      text(id);
      continue;
    }
    const auto& shape = images[image++];
    const ImageSpan span{static_cast<int64_t>(p.ids.size()), shape.grid_h * shape.grid_w, shape.grid_h, shape.grid_w};
    for (int64_t i = 0; i < span.tokens; ++i) {
      p.ids.push_back(tokens.image_pad);
      p.hash_ids.push_back(static_cast<int64_t>(shape.key[i % 4] | (uint64_t{1} << 63)));
      p.rope_positions.insert(p.rope_positions.end(), {p.next_position, p.next_position + i / shape.grid_w, p.next_position + i % shape.grid_w});
    }
    p.next_position += std::max(shape.grid_h, shape.grid_w);
    p.spans.push_back(span);
  }
  return p;
}

}  // namespace tq
