#pragma once
// How kubectl-vgpu prints: kubectl's tables (upper-case headers, columns three spaces
// apart, "<none>" for nothing) and the same data as JSON or YAML for -o json|yaml.

#include <ostream>
#include <string>
#include <vector>

#include <boost/json/value.hpp>

#include "cli.h"

namespace vgpu::kubectl {

using Row = std::vector<std::string>;

/// Writes `header` and `rows` as kubectl does, each column as wide as its widest cell.
void printTable(std::ostream& out, const Row& header, const std::vector<Row>& rows);

/// Writes `value` as indented JSON (-o json) or as YAML (-o yaml).
void printStructured(std::ostream& out, const boost::json::value& value, OutputFormat format);

/// "4096/81920 MiB".
std::string formatMemory(std::uint64_t usedMiB, std::uint64_t totalMiB);

}  // namespace vgpu::kubectl
