#include "env_choice.h"

#include <cstdlib>

#include "check.h"

namespace rlloop {

std::string env_choice(const char* name, std::initializer_list<const char*> choices) {
  const char* raw = std::getenv(name);
  const std::string value = raw ? raw : "";
  if (value.empty()) return *choices.begin();
  std::string listed;
  for (const char* choice : choices) {
    if (value == choice) return value;
    listed += listed.empty() ? std::string(choice) + " (the default)" : std::string(" or ") + choice;
  }
  RLLOOP_FAIL(Invalid, name << ": \"" << value << "\" is not " << listed);
}

}  // namespace rlloop
