// A named span of the engine's own work in libtorch's profiler (tq_cli answer --profile, bench/gpu/kernel_profile.py):
// the phases of a call beside ATen's ops, so a profile says which phase an op, a launch or a host gap belongs to. When no
// profiler runs it costs a flag check.
#pragma once
#include <ATen/record_function.h>

#define TQ_PROFILE_SCOPE(name) RECORD_FUNCTION(name, c10::ArrayRef<const c10::IValue>{})
