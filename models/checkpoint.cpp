#include "models/checkpoint.hpp"

#include <fstream>
#include <iterator>
#include <map>
#include <string_view>

#include <ATen/core/Dict.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/serialize.h>

#include "harness/base/atomic_file.hpp"
#include "harness/base/input_error.hpp"

namespace ddpbench {

std::vector<std::pair<std::string, at::Tensor>> state_dict(const torch::nn::Module& module) {
  // Module by module, each one's parameters then its buffers: Python's state_dict() order.
  std::vector<std::pair<std::string, at::Tensor>> entries;
  for (const auto& item : module.named_modules(/*name_prefix=*/"", /*include_self=*/true)) {
    const std::string prefix = item.key().empty() ? "" : item.key() + ".";
    for (const auto& p : item.value()->named_parameters(/*recurse=*/false)) entries.emplace_back(prefix + p.key(), p.value());
    for (const auto& b : item.value()->named_buffers(/*recurse=*/false)) entries.emplace_back(prefix + b.key(), b.value());
  }
  return entries;
}

void save_checkpoint(const torch::nn::Module& module, const std::filesystem::path& path) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, tensor] : state_dict(module)) dict.insert(name, tensor.detach().to(at::kCPU).contiguous());
  // torch::pickle_save would tag the dict with its TorchScript type through
  // torch.jit._pickle.restore_type_tag, a global that torch.load(weights_only=True), the
  // default since PyTorch 2.6, refuses. The same zip archive without the tag loads there.
  std::vector<char> pickled;
  torch::jit::Pickler pickler([&](const char* bytes, size_t n) { pickled.insert(pickled.end(), bytes, bytes + n); },
                              nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(c10::IValue(dict));
  pickler.stop();
  std::string archive;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t n) {
    archive.append(static_cast<const char*>(bytes), n);
    return n;
  });
  torch::jit::writeArchiveAndTensors("data", pickled.data(), pickled.size(), pickler.tensorData(), writer);
  writer.writeRecord(kCheckpointMarkerRecord, kCheckpointMarkerText.data(), kCheckpointMarkerText.size());
  writer.writeEndOfFile();
  write_file_atomically(path, archive);
}

bool is_checkpoint_file(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return false;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path.string());
    return reader.hasRecord(kCheckpointMarkerRecord);
  } catch (const std::exception&) {
    return false;  // no zip, or not PyTorch's
  }
}

void load_checkpoint(torch::nn::Module& module, const std::filesystem::path& path) {
  const std::string where = "--init-from '" + path.string() + "': ";
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(where + "cannot open the file");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());

  // LibTorch's unpickler turns a collections.OrderedDict (what state_dict() returns) into
  // None, so from Python the weights must be saved as a plain dict.
  const std::string plain_dict_hint = "; from Python, save a plain dict: torch.save(dict(model.state_dict()), path)";
  c10::IValue value;
  try {
    value = torch::pickle_load(bytes);
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    throw InputError(where + "not a PyTorch file of named tensors (" + what + ")" + plain_dict_hint);
  }
  if (!value.isGenericDict()) {
    throw InputError(where + "holds a " + value.tagKind() + ", not a dict of named tensors" + plain_dict_hint);
  }

  std::map<std::string, at::Tensor> saved;
  for (const auto& item : value.toGenericDict()) {
    if (!item.key().isString() || !item.value().isTensor()) {
      throw InputError(where + "holds a dict entry that is not a name and a tensor");
    }
    saved.emplace(item.key().toStringRef(), item.value().toTensor());
  }

  std::string problems;
  const auto entries = state_dict(module);
  for (const auto& [name, tensor] : entries) {
    auto it = saved.find(name);
    if (it == saved.end()) {
      problems += " missing '" + name + "';";
    } else if (it->second.sizes() != tensor.sizes()) {
      problems += " '" + name + "' has shape " + c10::str(it->second.sizes()) + ", the model " +
                  c10::str(tensor.sizes()) + ";";
    }
  }
  if (saved.size() != entries.size()) {
    for (const auto& [name, tensor] : saved) {
      bool known = false;
      for (const auto& entry : entries) known = known || entry.first == name;
      if (!known) problems += " unexpected '" + name + "';";
    }
  }
  if (!problems.empty()) {
    problems.pop_back();
    throw InputError(where + "does not match the model:" + problems);
  }
  torch::NoGradGuard no_grad;
  for (const auto& [name, tensor] : entries) tensor.copy_(saved.at(name));
}

}  // namespace ddpbench
