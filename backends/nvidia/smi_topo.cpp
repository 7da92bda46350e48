#include "smi_topo.h"

#include <charconv>
#include <sstream>
#include <string>

namespace vgpu::nvidia {
namespace {

/// The text without terminal escape sequences (the tool underlines its header on a tty).
std::string withoutEscapes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b') {
      while (i < text.size() && !(text[i] >= '@' && text[i] <= '~' && text[i] != '[')) ++i;
      continue;
    }
    out += text[i];
  }
  return out;
}

/// N for "GPU<N>", else nullopt.
std::optional<std::size_t> gpuNumber(std::string_view word) {
  if (word.substr(0, 3) != "GPU" || word.size() == 3) return std::nullopt;
  std::size_t n = 0;
  auto [end, ec] = std::from_chars(word.data() + 3, word.data() + word.size(), n);
  if (ec != std::errc() || end != word.data() + word.size()) return std::nullopt;
  return n;
}

std::optional<TopoCell> cellOf(std::string_view word) {
  if (word.size() > 2 && word.substr(0, 2) == "NV") {
    std::uint32_t lanes = 0;
    auto [end, ec] = std::from_chars(word.data() + 2, word.data() + word.size(), lanes);
    if (ec != std::errc() || end != word.data() + word.size() || lanes == 0) return std::nullopt;
    return TopoCell{LinkClass::kDirect, lanes};
  }
  if (word == "PIX") return TopoCell{LinkClass::kPcieSwitch, 0};
  if (word == "PXB") return TopoCell{LinkClass::kPcieSwitches, 0};
  if (word == "PHB") return TopoCell{LinkClass::kPcieHostBridge, 0};
  if (word == "NODE") return TopoCell{LinkClass::kSameNuma, 0};
  if (word == "SYS" || word == "SOC") return TopoCell{LinkClass::kCrossNuma, 0};
  return std::nullopt;
}

std::vector<std::string> wordsOf(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

Result<std::vector<std::vector<std::optional<TopoCell>>>> parseTopoMatrix(std::string_view text) {
  std::istringstream in(withoutEscapes(text));
  std::vector<std::size_t> columns;  // GPU number of each leading column
  std::vector<std::vector<std::optional<TopoCell>>> matrix;
  for (std::string line; std::getline(in, line);) {
    const auto words = wordsOf(line);
    if (words.empty()) continue;
    if (words[0] == "Legend:") break;
    if (columns.empty()) {
      for (const auto& w : words) {
        const auto n = gpuNumber(w);
        if (!n) break;
        columns.push_back(*n);
      }
      std::size_t size = 0;
      for (std::size_t n : columns) size = std::max(size, n + 1);
      matrix.assign(size, std::vector<std::optional<TopoCell>>(size));
      continue;
    }
    const auto row = gpuNumber(words[0]);
    if (!row || *row >= matrix.size()) continue;  // a NIC's row, or a GPU not in the header
    for (std::size_t k = 0; k < columns.size() && k + 1 < words.size(); ++k)
      if (columns[k] != *row) matrix[*row][columns[k]] = cellOf(words[k + 1]);
  }
  if (columns.empty()) return makeError("nvidia-smi topo -m: no header with GPU columns");
  return matrix;
}

}  // namespace vgpu::nvidia
