#pragma once
// Files that are either wholly written or not there: write beside, fsync, rename.
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ddpbench {

/// Writes `content` to `path` through a temporary file in the same folder and a rename,
/// creating missing parent folders; throws std::runtime_error naming the path on failure.
void write_file_atomically(const std::filesystem::path& path, std::string_view content);

/// Throws InputError naming `what` when `path` could not be written later: its folder cannot
/// be created, or a real file cannot be written there, or it names a folder. Makes the
/// folder (keeps it when the probe succeeds, removes what it made when it fails); leaves no
/// file behind.
void require_writable(const std::filesystem::path& path, std::string_view what);

/// `folder` and each folder above it that does not exist, deepest first (empty where it exists).
std::vector<std::filesystem::path> missing_folders(const std::filesystem::path& folder);

/// require_writable of each (path, what) in turn; where one throws, the folders the ones before it
/// made are removed too: a command refused for its third output leaves no folder for its first.
void require_all_writable(const std::vector<std::pair<std::filesystem::path, std::string>>& outputs);

}  // namespace ddpbench
