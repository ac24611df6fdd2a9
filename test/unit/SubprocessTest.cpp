// Starting weft-compile without a shell: the splitting rule of
// weft-serve's --compile-args, and arguments that reach the child byte for
// byte, whatever shell syntax they hold.
#include "runtime/base/Subprocess.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <filesystem>

namespace weft {
namespace {

std::vector<std::string> split(const std::string &text) {
  StatusOr<std::vector<std::string>> out = splitArguments(text);
  EXPECT_TRUE(out.isOk()) << text << ": " << out.status().message();
  return out.isOk() ? *out : std::vector<std::string>{};
}

std::string splitError(const std::string &text) {
  StatusOr<std::vector<std::string>> out = splitArguments(text);
  EXPECT_FALSE(out.isOk()) << text;
  return out.isOk() ? "" : out.status().message();
}

using Args = std::vector<std::string>;

TEST(SubprocessTest, SplitsAtBlanksWithQuotesAndEscapes) {
  EXPECT_EQ(split("--max-batch 64  --context\t8192\n"),
            (Args{"--max-batch", "64", "--context", "8192"}));
  EXPECT_EQ(split(""), Args{});
  EXPECT_EQ(split("   "), Args{});
  EXPECT_EQ(split("--name='a b' \"c d\" e\\ f"), (Args{"--name=a b", "c d", "e f"}));
  EXPECT_EQ(split("'' \"\""), (Args{"", ""}));
  EXPECT_EQ(split("'it''s' \"say \\\"hi\\\" \\\\ \\n\""), (Args{"its", "say \"hi\" \\ \\n"}));
  EXPECT_EQ(split("'a\\b'"), Args{"a\\b"});
}

TEST(SubprocessTest, ShellSyntaxIsPlainText) {
  EXPECT_EQ(split("; rm -rf x && $(touch y) `id` | cat > z < w ~ * $HOME"),
            (Args{";", "rm", "-rf", "x", "&&", "$(touch", "y)", "`id`", "|", "cat", ">", "z", "<",
                  "w", "~", "*", "$HOME"}));
}

TEST(SubprocessTest, RefusesUnclosedQuotesAndTrailingBackslash) {
  EXPECT_NE(splitError("--a 'b").find("the quote ' at offset 4 is not closed"), std::string::npos);
  EXPECT_NE(splitError("\"b\\\"").find("the quote \" at offset 0 is not closed"),
            std::string::npos);
  EXPECT_NE(splitError("a\\").find("a backslash ends the options (offset 1)"), std::string::npos);
  EXPECT_NE(splitError(std::string(70000, 'a')).find("more than the 65536"), std::string::npos);
  std::string manyWords;
  for (int i = 0; i < 5000; ++i)
    manyWords += "a ";
  EXPECT_NE(splitError(manyWords).find("more than 4096 arguments"), std::string::npos);
}

TEST(SubprocessTest, ArgumentsReachTheChildByteForByte) {
  std::string log = testing::TempDir() + "/subprocess_args.txt";
  std::string marker = testing::TempDir() + "/subprocess_pwned";
  std::filesystem::remove(marker);
  // The script is the test's own; the arguments are hostile and only
  // ever positional parameters.
  Args hostile = {"; touch " + marker,
                  "$(touch " + marker + ")",
                  "`touch " + marker + "`",
                  "a'b\"c",
                  "| touch " + marker,
                  "> " + marker,
                  "",
                  "new\nline"};
  Args argv = {"/bin/sh", "-c", "for a in \"$@\"; do printf '[%s]\\n' \"$a\"; done > \"$0\"", log};
  argv.insert(argv.end(), hostile.begin(), hostile.end());
  StatusOr<int> rc = runProgram(argv, ChildOutput::kDiscard);
  ASSERT_TRUE(rc.isOk()) << rc.status().message();
  EXPECT_EQ(*rc, 0);
  std::ifstream in(log);
  std::stringstream got;
  got << in.rdbuf();
  std::string want;
  for (const std::string &a : hostile)
    want += "[" + a + "]\n";
  EXPECT_EQ(got.str(), want);
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST(SubprocessTest, ExitCodesSignalsAndMissingPrograms) {
  StatusOr<int> rc = runProgram({"/bin/sh", "-c", "exit 7"}, ChildOutput::kInherit);
  ASSERT_TRUE(rc.isOk());
  EXPECT_EQ(*rc, 7);
  rc = runProgram({"/bin/sh", "-c", "kill -9 $$"}, ChildOutput::kToStderr);
  ASSERT_FALSE(rc.isOk());
  EXPECT_NE(rc.status().message().find("/bin/sh: killed by signal 9"), std::string::npos)
      << rc.status().message();
  rc = runProgram({"/nonexistent/weft-compile", "--help"}, ChildOutput::kInherit);
  ASSERT_FALSE(rc.isOk());
  EXPECT_NE(rc.status().message().find("/nonexistent/weft-compile: could not start"),
            std::string::npos)
      << rc.status().message();
  // PATH is not searched: a bare name is a path in the current directory.
  rc = runProgram({"sh", "-c", "exit 0"}, ChildOutput::kInherit);
  EXPECT_FALSE(rc.isOk());
  EXPECT_FALSE(runProgram({}, ChildOutput::kInherit).isOk());
  EXPECT_FALSE(runProgram({"/bin/sh", std::string("a\0b", 3)}, ChildOutput::kInherit).isOk());
}

} // namespace
} // namespace weft
