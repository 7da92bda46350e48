#pragma once
// Objects from YAML or JSON fixture text: single objects, multi-document YAML, v1 Lists.

#include <string>
#include <utility>
#include <vector>

#include <boost/json/object.hpp>

#include "vgpu/result.h"

namespace vgpu::fakes::detail {

/// Each object with the plural it is stored under ("pods"...). Errors name `source`.
Result<std::vector<std::pair<std::string, boost::json::object>>> parseFixtures(
    const std::string& text, const std::string& source);

}  // namespace vgpu::fakes::detail
