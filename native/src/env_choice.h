// The module's switches that pick one of a few named choices from the environment (RLLOOP_SDPA, RLLOOP_TF32,
// RLLOOP_GDN_BACKWARD, RLLOOP_DELTA_RULE_CPU): unset or empty means the first choice; anything else that is not a
// choice is an Invalid error naming the variable and its choices, so a typo cannot silently select the default.
#pragma once
#include <initializer_list>
#include <string>

namespace rlloop {

std::string env_choice(const char* name, std::initializer_list<const char*> choices);

}  // namespace rlloop
