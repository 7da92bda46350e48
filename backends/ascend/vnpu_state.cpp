// The limiter's state file: one tab-separated line per held chip (holder, container, device
// id, card, chip, template, vNPU id); names with tabs or newlines are refused when saved.
#include "vnpu_state.h"

#include <fstream>
#include <sstream>

namespace vgpu::ascend {

Result<std::vector<HeldChip>> loadHeld(const std::filesystem::path& file) {
  std::vector<HeldChip> out;
  std::ifstream in(file);
  if (!in) {
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) return out;
    return makeError("cannot read the Ascend limiter's state " + file.string());
  }
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string item; std::getline(ss, item, '\t');) f.push_back(item);
    HeldChip h;
    try {
      if (f.size() != 7) throw std::invalid_argument("fields");
      h = {f[0], f[1], f[2], std::stoi(f[3]), std::stoi(f[4]), f[5], static_cast<unsigned>(std::stoul(f[6]))};
    } catch (const std::exception&) {
      return makeError(file.string() + " line " + std::to_string(n) +
                       ": not \"holder container device card chip template vnpu\" separated by tabs");
    }
    out.push_back(std::move(h));
  }
  return out;
}

Status saveHeld(const std::filesystem::path& file, const std::vector<HeldChip>& held) {
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  if (ec) return makeError("cannot create " + file.parent_path().string() + ": " + ec.message());
  const auto tmp = file.string() + ".new";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const auto& h : held) {
      for (const auto* s : {&h.holder, &h.container, &h.deviceId, &h.templateName})
        if (s->find_first_of("\t\n") != std::string::npos)
          return makeError("cannot record \"" + *s + "\" in " + file.string() + ": it holds a tab or newline");
      out << h.holder << '\t' << h.container << '\t' << h.deviceId << '\t' << h.card << '\t' << h.device << '\t'
          << h.templateName << '\t' << h.vdevId << '\n';
    }
    if (!out.flush()) return makeError("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, file, ec);
  if (ec) return makeError("cannot replace " + file.string() + ": " + ec.message());
  return {};
}

}  // namespace vgpu::ascend
