#include "harness/base/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/base/input_error.hpp"

namespace ddpbench {
namespace {

std::string errno_text() { return std::strerror(errno); }

std::filesystem::path folder_of(const std::filesystem::path& path) {
  auto parent = path.parent_path();
  return parent.empty() ? std::filesystem::path(".") : parent;
}

// The template of the temporary name a write of `path` goes through, for mkstemp: ".NAME.XXXXXX"
// beside it. The writability probe makes one of the same name, so that a name the file system
// takes, but not its temporary's, is refused before the work (it failed after it, exit 1).
std::string temporary_template(const std::filesystem::path& path) {
  // Appended piecewise: GCC 12 warns falsely (-Wrestrict) on chained operator+ here.
  std::string name = folder_of(path).string();
  name.append("/.").append(path.filename().string()).append(".XXXXXX");
  return name;
}

// Read, not set and restored: umask(2) alone cannot read it without changing it for a moment,
// under every other thread's files.
mode_t process_umask() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Umask:", 0) == 0) return static_cast<mode_t>(std::stoul(line.substr(6), nullptr, 8));
  }
  return 022;
}

// The mode the file it replaces had, else a new file's under the umask: mkstemp's 0600 would
// narrow a shared result; a fixed 0644 widened a user's 0600 file and ignored `umask 077`.
mode_t mode_for(const std::filesystem::path& path) {
  struct stat there {};
  if (::stat(path.c_str(), &there) == 0 && S_ISREG(there.st_mode)) return there.st_mode & 07777;
  return 0666 & ~process_umask();
}

}  // namespace

void write_file_atomically(const std::filesystem::path& path, std::string_view content) {
  const auto folder = folder_of(path);
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) throw std::runtime_error("cannot create folder '" + folder.string() + "': " + ec.message());

  std::string tmp_template = temporary_template(path);
  const int fd = mkstemp(tmp_template.data());
  if (fd < 0) throw std::runtime_error("cannot write '" + path.string() + "': " + errno_text());
  const std::string tmp = tmp_template;
  auto fail = [&](const std::string& what) {
    const std::string message = "cannot write '" + path.string() + "': " + what + ": " + errno_text();
    ::close(fd);
    ::unlink(tmp.c_str());
    throw std::runtime_error(message);
  };
  const char* data = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write");
    }
    data += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fchmod(fd, mode_for(path)) != 0) fail("chmod");
  if (::fsync(fd) != 0) fail("fsync");
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write '" + path.string() + "': close: " + errno_text());
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string message = "cannot write '" + path.string() + "': rename: " + errno_text();
    ::unlink(tmp.c_str());
    throw std::runtime_error(message);
  }
}

std::vector<std::filesystem::path> missing_folders(const std::filesystem::path& folder) {
  // Walked from the root as the kernel walks it, each part where it lands: `m/../yours` makes `m`,
  // never `yours` (taken by its spelling, a user's empty folder was removed as one made here); a
  // link is there whatever it leads to (a link leading nowhere was removed as a folder made here).
  namespace fs = std::filesystem;
  std::vector<fs::path> missing;
  std::error_code ec;
  const fs::path absolute = fs::absolute(folder, ec);
  if (ec) return missing;
  fs::path at = absolute.root_path();
  for (const fs::path& part : absolute.relative_path()) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      at = at.parent_path();
      continue;
    }
    const fs::path next = at / part;
    if (!fs::exists(fs::symlink_status(next, ec))) {
      missing.push_back(next);
      at = next;
      continue;
    }
    const fs::path real = fs::canonical(next, ec);
    if (ec) break;  // a link that leads nowhere: nothing past it is made here
    at = real;
  }
  std::reverse(missing.begin(), missing.end());
  return missing;
}

void require_writable(const std::filesystem::path& path, std::string_view what) {
  const std::string prefix = std::string(what) + ": cannot write '" + path.string() + "': ";
  if (path.empty()) throw InputError(std::string(what) + ": empty path");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError(prefix + "it is a folder");
  // The folder is made now and probed with a real file, as the write will be made: access()
  // says yes to root on read-only or pseudo file systems (/proc) where a write fails.
  const auto folder = folder_of(path);
  const std::vector<std::filesystem::path> created = missing_folders(folder);
  auto undo = [&] {
    for (const auto& f : created) std::filesystem::remove(f, ec);
  };
  std::filesystem::create_directories(folder, ec);
  if (ec) {
    const std::string message = prefix + "cannot create folder '" + folder.string() + "' (" + ec.message() + ")";
    undo();
    throw InputError(message);
  }
  if (!std::filesystem::is_directory(folder, ec)) {
    undo();
    throw InputError(prefix + "'" + folder.string() + "' is not a folder");
  }
  std::string probe = temporary_template(path);  // the very name the write will go through
  const int fd = mkstemp(probe.data());
  const bool wrote = fd >= 0 && ::write(fd, "probe", 5) == 5;
  const std::string error = errno_text();
  if (fd >= 0) {
    ::close(fd);
    ::unlink(probe.c_str());
  }
  if (!wrote) {
    undo();
    throw InputError(prefix + "folder '" + folder.string() + "' is not writable (" + error + ")");
  }
  if (std::filesystem::exists(path, ec) && ::access(path.c_str(), W_OK) != 0) {
    throw InputError(prefix + errno_text());
  }
}

void require_all_writable(const std::vector<std::pair<std::filesystem::path, std::string>>& outputs) {
  std::vector<std::filesystem::path> made;  // deepest first within each output
  std::error_code ec;
  try {
    for (const auto& [path, what] : outputs) {
      const std::vector<std::filesystem::path> missing = missing_folders(folder_of(path));
      require_writable(path, what);
      made.insert(made.end(), missing.begin(), missing.end());
    }
  } catch (...) {
    for (const auto& f : made) std::filesystem::remove(f, ec);  // empty folders only: never a file in one
    throw;
  }
}

}  // namespace ddpbench
