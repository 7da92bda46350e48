#pragma once
// Reads the Prometheus text exposition the node agents serve on /metrics: the samples of
// the families `top` needs, with their labels. Comments, types and other families are skipped.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "vgpu/result.h"

namespace vgpu::kubectl {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

/// Every sample of `text` (version 0.0.4); errors name the line that does not parse.
Result<std::vector<Sample>> parseExposition(std::string_view text);

}  // namespace vgpu::kubectl
