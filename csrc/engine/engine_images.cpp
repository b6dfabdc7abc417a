// The engine's images (a vision-language model): a state expanded around its images' tokens, and the images'
// embeddings from the vision cache or the tower; a text model refuses them.
#include "engine/engine.h"

#include "vision/patches.h"

namespace tq {

void Engine::require_vision(const std::string& asker) const {
  if (!vision_) throw EngineError(code::kBadRequest, asker + " has images but " + info_.architecture + " has no vision tower");
}

ImagePrompt Engine::image_prompt(const std::vector<int64_t>& state, const std::vector<ImageInput>& images) const {
  std::vector<PromptImageShape> shapes;
  for (const auto& image : images) {
    const auto [h, w] = merged_grid(image.rgb, *info_.vision);
    shapes.push_back({h, w, image.key});
  }
  return expand_image_prompt(state, shapes, info_.image_tokens);
}

at::Tensor Engine::image_embeddings(const std::vector<ImageInput>& images) {
  std::vector<at::Tensor> parts;
  for (const auto& image : images) {
    auto embeds = vision_cache_->find(image.key);
    if (!embeds.defined()) {
      embeds = vision_->embed(image_patches(image.rgb, *info_.vision));
      vision_cache_->insert(image.key, embeds);
    }
    parts.push_back(embeds);
  }
  return at::cat(parts);
}

}  // namespace tq
