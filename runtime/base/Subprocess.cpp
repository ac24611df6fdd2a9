// Shell-free process starting (see Subprocess.h).
#include "runtime/base/Subprocess.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace weft {
namespace {

constexpr size_t kMaxArgumentText = 64 * 1024;
constexpr size_t kMaxArguments = 4096;

bool isBlank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Frees posix_spawn's attribute objects on every path out.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  bool haveActions = false, haveAttributes = false;
  ~SpawnSetup() {
    if (haveActions)
      posix_spawn_file_actions_destroy(&actions);
    if (haveAttributes)
      posix_spawnattr_destroy(&attributes);
  }
};

} // namespace

StatusOr<std::vector<std::string>> splitArguments(std::string_view text) {
  if (text.size() > kMaxArgumentText)
    return invalidArgument("options of " + std::to_string(text.size()) +
                           " bytes: more than the 65536 accepted");
  std::vector<std::string> out;
  std::string word;
  bool inWord = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (isBlank(c)) {
      if (inWord) {
        if (out.size() == kMaxArguments)
          return invalidArgument("more than 4096 arguments");
        out.push_back(std::move(word));
      }
      word.clear();
      inWord = false;
      continue;
    }
    inWord = true;
    if (c == '\'') {
      size_t end = text.find('\'', i + 1);
      if (end == std::string_view::npos)
        return invalidArgument("the quote ' at offset " + std::to_string(i) + " is not closed");
      word.append(text.substr(i + 1, end - i - 1));
      i = end;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\' && j + 1 < text.size() && (text[j + 1] == '"' || text[j + 1] == '\\'))
          ++j;
        word += text[j];
      }
      if (j >= text.size())
        return invalidArgument("the quote \" at offset " + std::to_string(i) + " is not closed");
      i = j;
    } else if (c == '\\') {
      if (i + 1 >= text.size())
        return invalidArgument("a backslash ends the options (offset " + std::to_string(i) +
                               "): it escapes nothing");
      word += text[++i];
    } else {
      word += c;
    }
  }
  if (inWord) {
    if (out.size() == kMaxArguments)
      return invalidArgument("more than 4096 arguments");
    out.push_back(std::move(word));
  }
  return out;
}

StatusOr<int> runProgram(const std::vector<std::string> &argv, ChildOutput output) {
  if (argv.empty() || argv[0].empty())
    return invalidArgument("no program to run");
  for (const std::string &a : argv)
    if (a.find('\0') != std::string::npos)
      return invalidArgument(argv[0] + ": an argument holds a NUL byte");
  std::vector<char *> args;
  args.reserve(argv.size() + 1);
  for (const std::string &a : argv)
    args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);

  SpawnSetup setup;
  if (int e = posix_spawn_file_actions_init(&setup.actions))
    return internalError(argv[0] + ": posix_spawn_file_actions_init: " + std::strerror(e));
  setup.haveActions = true;
  if (output == ChildOutput::kToStderr) {
    if (int e = posix_spawn_file_actions_adddup2(&setup.actions, STDERR_FILENO, STDOUT_FILENO))
      return internalError(argv[0] + ": posix_spawn_file_actions_adddup2: " + std::strerror(e));
  } else if (output == ChildOutput::kDiscard) {
    if (int e = posix_spawn_file_actions_addopen(&setup.actions, STDOUT_FILENO, "/dev/null",
                                                 O_WRONLY, 0))
      return internalError(argv[0] + ": posix_spawn_file_actions_addopen: " + std::strerror(e));
  }
  if (int e = posix_spawnattr_init(&setup.attributes))
    return internalError(argv[0] + ": posix_spawnattr_init: " + std::strerror(e));
  setup.haveAttributes = true;
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&setup.attributes, &none);
  posix_spawnattr_setsigdefault(&setup.attributes, &all);
  posix_spawnattr_setflags(&setup.attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  pid_t pid = 0;
  if (int e = posix_spawn(&pid, argv[0].c_str(), &setup.actions, &setup.attributes, args.data(),
                          environ))
    return internalError(argv[0] + ": could not start: " + std::strerror(e));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      return internalError(argv[0] + ": waitpid: " + std::strerror(errno));
  }
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return internalError(argv[0] + ": killed by signal " + std::to_string(WTERMSIG(status)) +
                         " (" + strsignal(WTERMSIG(status)) + ")");
  return internalError(argv[0] + ": ended with status " + std::to_string(status));
}

} // namespace weft
