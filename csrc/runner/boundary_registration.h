// When a state's partial last block enters the prefix cache: when register_boundary(ticket) is called, which
// the server does after sending the response (After), or in the same call (Before). The runner's option
// (runner/paged_model.h), chosen by the engine's (engine/engine_options.h).
#pragma once
#include "common/choices.h"

namespace tq {

enum class BoundaryRegistration { After, Before };

template <>
struct ChoiceTable<BoundaryRegistration> {
  static constexpr const char* option = "registerBoundary";
  static constexpr NamedValue<BoundaryRegistration> values[] = {{BoundaryRegistration::After, "after"}, {BoundaryRegistration::Before, "before"}};
};

}  // namespace tq
