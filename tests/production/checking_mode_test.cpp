// Checking mode and configuration, observed from outside: each case runs a
// child process and checks its stderr and how it ended.
#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "../common/child_process.hpp"

namespace {

using Outcome = strata_test::ChildOutcome;

Outcome run(const char* program, std::vector<std::string> args, std::vector<std::string> env) {
  args.insert(args.begin(), program);
  return strata_test::run_child(std::move(args), std::move(env));
}

Outcome misuse(const char* what) { return run(MISUSE_PROGRAM, {what}, {"STRATA_CHECK=1"}); }

void expect_report(const char* what, const char* message) {
  Outcome o = misuse(what);
  EXPECT_TRUE(o.aborted()) << what << ": status " << o.status << "\n" << o.output;
  EXPECT_NE(o.output.find(message), std::string::npos) << what << " printed:\n" << o.output;
  EXPECT_NE(o.output.find("address 0x"), std::string::npos) << o.output;
  EXPECT_EQ(o.output.find("no misuse detected"), std::string::npos);
}

}  // namespace

TEST(CheckingMode, CleanProgramRunsClean) {
  Outcome o = misuse("none");
  EXPECT_TRUE(o.exited_ok()) << o.output;
  EXPECT_NE(o.output.find("no misuse detected"), std::string::npos);
}

TEST(CheckingMode, DoubleFree) { expect_report("double-free", "double free"); }
TEST(CheckingMode, DoubleFreeOfALargeBlock) { expect_report("double-free-large", "double free"); }
TEST(CheckingMode, DoubleFreeAcrossThreads) { expect_report("double-free-remote", "double free"); }
TEST(CheckingMode, FreeOfAPointerStrataNeverReturned) {
  expect_report("foreign", "free of a pointer strata never returned");
}
TEST(CheckingMode, FreeOfAnInteriorPointer) { expect_report("interior", "interior pointer"); }
TEST(CheckingMode, WritePastTheEnd) { expect_report("overflow", "write past the end"); }
// A one-byte overrun must meet a canary byte, never the trailer: the
// trailer's bytes depend on a per-process secret, and an overrun writing
// the very byte it holds would pass unseen (1 run in 256 before).
TEST(CheckingMode, ACanaryByteFollowsEverySize) {
  Outcome o = misuse("canary-after-every-size");
  EXPECT_TRUE(o.exited_ok()) << o.output;
  EXPECT_NE(o.output.find("no misuse detected"), std::string::npos) << o.output;
}
TEST(CheckingMode, WritePastTheEndIntoTheCanary) { expect_report("overflow-far", "canary"); }
TEST(CheckingMode, WriteAfterFree) { expect_report("use-after-free", "write after free"); }
TEST(CheckingMode, ReportNamesTheSizeClass) {
  Outcome o = misuse("double-free");
  EXPECT_NE(o.output.find("size class"), std::string::npos) << o.output;
}

// The default mode (no STRATA_CHECK) catches double and invalid frees too,
// as glibc does: in the free fast path (a busy thread's own blocks, through
// the free mark), when a remote free reaches the owner or the central
// cache, and on the slow path for pointers whose page map entry does not
// match.
void expect_default_report(const char* what, const char* message) {
  Outcome o = run(MISUSE_PROGRAM, {what}, {});
  EXPECT_TRUE(o.aborted()) << what << ": status " << o.status << "\n" << o.output;
  EXPECT_NE(o.output.find(message), std::string::npos) << what << " printed:\n" << o.output;
  EXPECT_NE(o.output.find("address 0x"), std::string::npos) << o.output;
  EXPECT_EQ(o.output.find("no misuse detected"), std::string::npos) << what;
}

TEST(DefaultMode, CleanProgramRunsClean) {
  for (const char* what : {"none", "busy-none"}) {
    Outcome o = run(MISUSE_PROGRAM, {what}, {});
    EXPECT_TRUE(o.exited_ok()) << what << ": " << o.output;
  }
}
TEST(DefaultMode, DoubleFreeOfAYoungThreadsBlock) { expect_default_report("double-free", "double free"); }
TEST(DefaultMode, DoubleFreeOfABusyThreadsBlock) { expect_default_report("busy-double-free", "double free"); }
TEST(DefaultMode, DoubleFreeOfALargeBlock) { expect_default_report("double-free-large", "double free"); }
TEST(DefaultMode, DoubleFreeAcrossThreads) {
  expect_default_report("double-free-remote", "double free");
  expect_default_report("busy-double-free-remote", "double free");
}
TEST(DefaultMode, FreeOfAPointerStrataNeverReturned) {
  expect_default_report("foreign", "free of a pointer strata never returned");
}
// An interior pointer into a block of the calling thread's own span passes
// the fast path's ownership test; only checking mode catches that one
// (docs/reliability.md). Into any other span, the slow path catches it.
TEST(DefaultMode, FreeOfAnInteriorPointer) {
  expect_default_report("interior", "interior pointer");
  // Both threads busy: the free takes the remote free's short route.
  expect_default_report("busy-interior-remote", "interior pointer");
}
TEST(DefaultMode, ReportNamesTheSizeClass) {
  Outcome o = run(MISUSE_PROGRAM, {"busy-double-free"}, {});
  EXPECT_NE(o.output.find("size class"), std::string::npos) << o.output;
}

TEST(Configuration, DefaultsWithoutEnvironment) {
  Outcome o = run(CONFIG_PROGRAM, {}, {});
  EXPECT_TRUE(o.exited_ok()) << o.output;
  EXPECT_NE(o.output.find("thread_cache_bytes=4194304 decay_ms=1000 background=0 huge=0 check=0"),
            std::string::npos) << o.output;
  EXPECT_NE(o.output.find("profile_sample=2097152\n"), std::string::npos) << o.output;  // 2 MiB, tcmalloc's
}

TEST(Configuration, WellFormedValuesAreTaken) {
  Outcome o = run(CONFIG_PROGRAM, {},
                  {"STRATA_THREAD_CACHE_BYTES=8M", "STRATA_DECAY_MS=250", "STRATA_HUGE_PAGES=on",
                   "STRATA_VERBOSE=yes", "STRATA_PROFILE_SAMPLE=512K"});
  EXPECT_TRUE(o.exited_ok()) << o.output;
  EXPECT_NE(o.output.find("thread_cache_bytes=8388608 decay_ms=250 background=0 huge=1 check=0 verbose=1 "
                          "profile_sample=524288"),
            std::string::npos) << o.output;
}

TEST(Configuration, MalformedValuesWarnAndKeepTheDefault) {
  Outcome o = run(CONFIG_PROGRAM, {},
                  {"STRATA_THREAD_CACHE_BYTES=12Q", "STRATA_DECAY_MS=-5", "STRATA_CHECK=maybe",
                   "STRATA_HUGE_PAGES=", "STRATA_THREAD_CACHE_BYTES2=1"});
  EXPECT_TRUE(o.exited_ok()) << o.output;
  EXPECT_NE(o.output.find("thread_cache_bytes=4194304 decay_ms=1000 background=0 huge=0 check=0"),
            std::string::npos) << o.output;
  EXPECT_NE(o.output.find("ignoring malformed STRATA_THREAD_CACHE_BYTES=12Q"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("ignoring malformed STRATA_DECAY_MS=-5"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("ignoring malformed STRATA_CHECK=maybe"), std::string::npos) << o.output;
}

TEST(Configuration, ShowStatsPrintsTheTableAtExit) {
  Outcome o = run(CONFIG_PROGRAM, {}, {"STRATA_SHOW_STATS=1"});
  EXPECT_TRUE(o.exited_ok()) << o.output;
  EXPECT_NE(o.output.find("strata statistics"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("\"mapped_bytes\":"), std::string::npos) << o.output;
}
