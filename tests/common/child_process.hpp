// Runs a program in a child process with exactly the given environment and
// collects its stdout and stderr together, for the tests that observe strata
// from outside (checking mode, heap profiles).
#pragma once

#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace strata_test {

struct ChildOutcome {
  int status = 0;
  pid_t pid = 0;
  std::string output;  // stdout and stderr together
  bool exited_ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
  bool aborted() const { return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT; }
};

// argv[0] is the program's path; `cwd`, when given, is the child's directory.
inline ChildOutcome run_child(std::vector<std::string> argv, std::vector<std::string> env,
                              const std::string& cwd = "") {
  int pipefd[2];
  EXPECT_EQ(pipe(pipefd), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipefd[1], 1);
    dup2(pipefd[1], 2);
    close(pipefd[0]);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    std::vector<char*> args, envp;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(pipefd[1]);
  ChildOutcome out;
  out.pid = pid;
  char buffer[4096];
  ssize_t n;
  while ((n = read(pipefd[0], buffer, sizeof buffer)) > 0) out.output.append(buffer, static_cast<std::size_t>(n));
  close(pipefd[0]);
  waitpid(pid, &out.status, 0);
  return out;
}

}  // namespace strata_test
