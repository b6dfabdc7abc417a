// A call's work queued on the device (Engine::launch_batch), and what its answers are made of once the
// device has done it (Engine::finish_batch). Between the two the engine thread may prepare and queue the
// next call behind it (addon/engine_thread.h): on CUDA the host's work for one call then overlaps the
// device's for the other.
#pragma once
#include <memory>
#include <vector>

#include "batch/pack_requests.h"
#include "engine/engine.h"
#include "engine/readout.h"
#include "runner/device.h"
#include "vision/image_prompt.h"

namespace tq {

struct LaunchedBatch {
  std::vector<AnswerRequest> requests;
  std::vector<ImagePrompt> prompts;  // a multimodal call's states expanded around their images
  bool multimodal = false;
  PackedRequests packed;  // its image embeddings read `requests`: a batch is not moved once packed
  ForwardResult forward;
  QueuedReadout readout;
  at::Tensor hidden_host;  // the final hidden rows on the host, copied at launch where a request asked for them
  double readout_queue_ms = 0;  // the host's time queuing the readout
  std::unique_ptr<DeviceMark> done;  // marked after the readout and the copies back

  bool device_done() const { return done->reached(); }
};

}  // namespace tq
