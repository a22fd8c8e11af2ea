#pragma once
// A file read whole, or bad input that names it.
#include <filesystem>
#include <string>
#include <string_view>

namespace ddpbench {

/// The whole content of `path`; throws InputError("<cannot_read> '<path>'") when it cannot be
/// opened or read, e.g. read_text_file(p, "--calibrate: cannot read"), and, unread, where it is
/// a folder, a FIFO, a socket or a device.
std::string read_text_file(const std::filesystem::path& path, std::string_view cannot_read);

}  // namespace ddpbench
