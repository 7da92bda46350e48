#pragma once

#include <string>
#include <vector>

#include <boost/json/value.hpp>

#include "vgpu/result.h"

namespace vgpu {

/// Every document of a YAML stream as JSON values (Kubernetes manifests are the same data
/// in either syntax). Plain scalars that look like integers, floats, booleans or null
/// become those JSON types; quoted scalars stay strings. Errors name the source and line.
Result<std::vector<boost::json::value>> yamlDocumentsToJson(const std::string& yamlText, const std::string& source);

}  // namespace vgpu
