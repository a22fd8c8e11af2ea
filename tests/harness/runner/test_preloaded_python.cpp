#include <stdlib.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "harness/runner/preloaded_python.hpp"
#include "harness/runner/pytorch_rank.hpp"

namespace ddpbench {
namespace {

// While it runs, the server is announced to the rows (its socket, its Python, what it
// imported); once it is stopped nothing of it is left, neither the announcement nor its folder.
TEST(PreloadedPython, AnnouncedWhileItRunsAndNothingLeftAfter) {
  std::filesystem::path socket;
  std::string python_seen;
  {
    const auto preloaded = preload_pytorch();
    ASSERT_TRUE(preloaded->running()) << "the build's Python could not preload torch";
    const char* python = std::getenv(kPreloadedPythonExecutable);
    ASSERT_NE(python, nullptr);
    socket = preloaded_python_socket(python);
    ASSERT_FALSE(socket.empty());
    const auto modules = preloaded_modules(python);
    ASSERT_TRUE(modules.has_value());
    EXPECT_EQ(modules->rfind("torch", 0), 0u) << *modules;
    // Another Python's rows check for themselves and start their own.
    EXPECT_FALSE(preloaded_modules(std::string(python) + "-another").has_value());
    EXPECT_TRUE(preloaded_python_socket(std::string(python) + "-another").empty());
    python_seen = python;
  }
  EXPECT_EQ(std::getenv(kPreloadedPythonSocket), nullptr);
  EXPECT_EQ(std::getenv(kPreloadedPythonExecutable), nullptr);
  EXPECT_FALSE(std::filesystem::exists(socket.parent_path())) << socket.parent_path();
  EXPECT_TRUE(preloaded_python_socket(python_seen).empty());
}

// A server that cannot start is no server: nothing is announced, the ranks start their own.
TEST(PreloadedPython, OneThatCannotStartAnnouncesNothing) {
  PreloadedPython broken("/bin/false", "/nonexistent/reference_rank.py", 30);
  EXPECT_FALSE(broken.running());
  EXPECT_EQ(std::getenv(kPreloadedPythonSocket), nullptr);
  EXPECT_TRUE(preloaded_python_socket("/bin/false").empty());
}

}  // namespace
}  // namespace ddpbench
