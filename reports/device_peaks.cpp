#include "reports/device_peaks.hpp"

#include <array>
#include <cctype>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace ddpbench {
namespace {

struct Peak {
  std::string_view model;    // the name's model word, as CUDA reports it ("H100")
  std::string_view variant;  // the form factor words after it, "" for SXM
  double fp32, tf32, bf16, fp16;  // TFLOP/s, dense (no structured sparsity)
};

// NVIDIA's data sheets: A100 (SXM and PCIe alike), H100 SXM5, H100 PCIe, H200 (SXM). Other
// variants of the same chips (H100 NVL, H200 NVL, GH200) run at other clocks and are not here.
constexpr std::array<Peak, 6> kPeaks = {{
    {"A100", "", 19.5, 156.0, 312.0, 312.0},
    {"A100", "PCIE", 19.5, 156.0, 312.0, 312.0},
    {"H100", "", 66.9, 494.7, 989.4, 989.4},
    {"H100", "SXM", 66.9, 494.7, 989.4, 989.4},
    {"H100", "PCIE", 51.2, 378.0, 756.0, 756.0},
    {"H200", "", 66.9, 494.7, 989.4, 989.4},
}};

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// Words that say how much memory, not which board: "80GB", "141GB", "HBM3", "HBM3E", "SXM4-80GB".
bool is_memory_word(const std::string& word) {
  if (word.starts_with("HBM")) return true;
  std::size_t digits = 0;
  while (digits < word.size() && std::isdigit(static_cast<unsigned char>(word[digits])) != 0) ++digits;
  return digits > 0 && (word.substr(digits) == "GB" || word.substr(digits) == "G");
}

// A CUDA device name as its model word and its variant: "NVIDIA H100 80GB HBM3" is H100 and
// "", "NVIDIA A100-SXM4-40GB" A100 and "", "NVIDIA H100 PCIe" H100 and "PCIE", "NVIDIA H100
// NVL" H100 and "NVL". SXM's generation ("SXM4", "SXM5") says nothing more than SXM.
std::pair<std::string, std::string> model_and_variant(std::string_view device_name) {
  std::vector<std::string> words;
  std::string word;
  for (char c : upper(device_name) + " ") {
    if (c == ' ' || c == '-' || c == '_') {
      if (!word.empty() && word != "NVIDIA") words.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  if (words.empty()) return {"", ""};
  std::string variant;
  for (std::size_t i = 1; i < words.size(); ++i) {
    if (is_memory_word(words[i])) continue;
    std::string w = words[i].starts_with("SXM") ? "SXM" : words[i];
    variant += (variant.empty() ? "" : " ") + w;
  }
  if (variant == "SXM" && words[0] != "H100") variant.clear();
  return {words[0], variant};
}

}  // namespace

std::string row_precision(std::string_view amp, bool tf32) {
  if (amp == "fp16" || amp == "bf16") return std::string(amp);
  return tf32 ? "tf32" : "fp32";
}

double peak_flops_per_s(std::string_view device_name, std::string_view precision) {
  const auto [model, variant] = model_and_variant(device_name);
  for (const Peak& p : kPeaks) {
    if (model != p.model || variant != p.variant) continue;
    const double tera = precision == "fp32"   ? p.fp32
                        : precision == "tf32" ? p.tf32
                        : precision == "bf16" ? p.bf16
                        : precision == "fp16" ? p.fp16
                                              : std::numeric_limits<double>::quiet_NaN();
    return tera * 1e12;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace ddpbench
