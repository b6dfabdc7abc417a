#include "engine/readout.h"

#include <ATen/Parallel.h>

#include <algorithm>

#include "common/errors.h"
#include "common/profile_scope.h"
#include "kernels/host_upload.h"
#include "kernels/math/label_readout_math.h"

#if TQ_CUDA
#include <c10/cuda/CUDAStream.h>

#include "kernels/cuda/label_readout.h"
#include "kernels/cuda/launch_check.h"
#endif

namespace tq {
namespace {

template <typename W>
void read_labels_cpu(const float* hidden, const W* head, int64_t hidden_size, const std::vector<ReadoutQuestion>& questions, float softcap,
                     LabelReadout& out) {
  at::parallel_for(0, static_cast<int64_t>(questions.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t q = begin; q < end; ++q) {
      const auto& labels = questions[q].label_ids;
      float* logits = out.logits.data() + out.offsets[q];
      for (size_t i = 0; i < labels.size(); ++i) {
        float partial[readout::kLanes];
        for (int lane = 0; lane < readout::kLanes; ++lane)
          partial[lane] = readout::lane_partial(head + labels[i] * hidden_size, hidden + q * hidden_size, hidden_size, lane);
        logits[i] = readout::soft_cap(readout::combine_lanes(partial), softcap);
      }
      readout::log_probs(logits, static_cast<int>(labels.size()), questions[q].temperature, out.log_probs.data() + out.offsets[q]);
    }
  });
}

#if TQ_CUDA
void queue_readout_cuda(const at::Tensor& hidden, const at::Tensor& lm_head, const std::vector<ReadoutQuestion>& questions, float softcap,
                        QueuedReadout& out) {
  const auto& offsets_of = out.labels.offsets;
  at::Tensor ids = at::empty({offsets_of.back()}, at::kLong), offsets = at::empty({static_cast<int64_t>(questions.size()) + 1}, at::kInt),
             temperatures = at::empty({static_cast<int64_t>(questions.size())}, at::kFloat);
  for (size_t q = 0; q < questions.size(); ++q) {
    std::copy(questions[q].label_ids.begin(), questions[q].label_ids.end(), ids.data_ptr<int64_t>() + offsets_of[q]);
    offsets.data_ptr<int32_t>()[q] = static_cast<int32_t>(offsets_of[q]);
    temperatures.data_ptr<float>()[q] = questions[q].temperature;
  }
  offsets.data_ptr<int32_t>()[questions.size()] = static_cast<int32_t>(offsets_of.back());
  const auto device = hidden.device();
  upload_together({&ids, &offsets, &temperatures}, device);  // without waiting for the forward pass queued before
  const auto values = at::empty({2, offsets_of.back()}, hidden.options());
  auto h = hidden.contiguous();
  cuda::LabelReadoutArgs args{h.data_ptr<float>(), lm_head.data_ptr(), lm_head.scalar_type() == at::kBFloat16, h.size(1),
                              static_cast<int>(questions.size()), ids.data_ptr<int64_t>(), offsets.data_ptr<int32_t>(),
                              temperatures.data_ptr<float>(), softcap, values[0].data_ptr<float>(), values[1].data_ptr<float>()};
  const auto stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  const auto error = cuda::launch_error("label readout kernel", [&] { return cuda::launch_label_readout(args, stream); });
  if (!error.empty()) throw EngineError(code::kInternal, error);
  // Copied back now, behind the kernel: the engine may queue the next call's forward pass before it takes these.
  out.host_values = queue_copy_to_host(values);
  out.copied = std::make_unique<DeviceMark>(device);
}
#endif

}  // namespace

LabelReadout QueuedReadout::wait() {
  if (host_values.defined()) {
    copied->wait();
    const float* v = host_values.data_ptr<float>();
    const int64_t n = host_values.size(1);
    labels.logits.assign(v, v + n);
    labels.log_probs.assign(v + n, v + 2 * n);
    host_values = at::Tensor();
  }
  return labels;
}

QueuedReadout queue_readout(const at::Tensor& hidden, const at::Tensor& lm_head, const std::vector<ReadoutQuestion>& questions, float softcap) {
  TQ_PROFILE_SCOPE("tq::readout");
  TORCH_CHECK(hidden.scalar_type() == at::kFloat && hidden.dim() == 2 && hidden.size(0) == static_cast<int64_t>(questions.size()) &&
                  hidden.size(1) == lm_head.size(1) && hidden.device() == lm_head.device(),
              "read_labels: hidden ", hidden.sizes(), " for lm_head ", lm_head.sizes());
  TORCH_CHECK(lm_head.is_contiguous() && (lm_head.scalar_type() == at::kFloat || lm_head.scalar_type() == at::kBFloat16),
              "read_labels: a contiguous fp32 or bf16 lm_head");
  QueuedReadout queued;
  auto& out = queued.labels;
  out.offsets.push_back(0);
  for (const auto& q : questions) {
    TORCH_CHECK(static_cast<int64_t>(q.label_ids.size()) <= readout::kMaxLabels, "read_labels: more than ", readout::kMaxLabels, " labels (Engine checks requests)");
    out.offsets.push_back(out.offsets.back() + static_cast<int64_t>(q.label_ids.size()));
  }
#if TQ_CUDA
  if (hidden.is_cuda()) {
    queue_readout_cuda(hidden, lm_head, questions, softcap, queued);
    return queued;
  }
#endif
  out.logits.resize(out.offsets.back());
  out.log_probs.resize(out.offsets.back());
  auto h = hidden.contiguous();
  if (lm_head.scalar_type() == at::kBFloat16)
    read_labels_cpu(h.data_ptr<float>(), static_cast<const uint16_t*>(lm_head.data_ptr()), h.size(1), questions, softcap, out);
  else
    read_labels_cpu(h.data_ptr<float>(), lm_head.data_ptr<float>(), h.size(1), questions, softcap, out);
  return queued;
}

at::Tensor full_logits(const at::Tensor& hidden, const at::Tensor& lm_head, float softcap) {
  auto logits = lm_head.scalar_type() == at::kFloat ? at::matmul(hidden.to(at::kFloat), lm_head.t())
                                                    : at::matmul(hidden.to(lm_head.scalar_type()), lm_head.t()).to(at::kFloat);
  return softcap > 0 ? logits.div_(softcap).tanh_().mul_(softcap) : logits;
}

}  // namespace tq
