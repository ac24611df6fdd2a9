// Starting another program without a shell: an argument vector handed to
// posix_spawn, so no byte of a path, a flag or a user's text is ever read as
// shell syntax (`;`, `$(...)`, quotes, redirections are plain characters).
#ifndef WEFT_RUNTIME_BASE_SUBPROCESS_H_
#define WEFT_RUNTIME_BASE_SUBPROCESS_H_

#include "runtime/base/Status.h"

#include <string>
#include <string_view>
#include <vector>

namespace weft {

// Splits one string of options into arguments by this rule, and no other:
//  - blanks (space, tab, newline, carriage return) separate arguments;
//  - '...' quotes everything up to the next ' literally;
//  - "..." quotes up to the next unescaped ", where \" and \\ stand for
//    " and \ (any other backslash is kept as it is);
//  - outside quotes, a backslash takes the next character literally;
//  - quoted and unquoted parts next to each other join into one argument,
//    and '' or "" alone is an empty argument.
// Nothing else is special: no variables, globs, ~, ;, |, &, <, > or
// command substitution. An unterminated quote or a trailing backslash is an
// error naming its offset; so is text of over 64 KiB or 4,096 arguments.
StatusOr<std::vector<std::string>> splitArguments(std::string_view text);

// Where the child's standard output goes (its standard error is ours).
enum class ChildOutput { kInherit, kToStderr, kDiscard };

// Runs the program at argv[0] (a path: PATH is not searched) with `argv`,
// our environment and standard input, and waits for it. The child starts
// with default signal dispositions and no signals blocked. Returns its exit
// code (0-255); a child killed by a signal, or one that could not start, is
// an error naming the program.
StatusOr<int> runProgram(const std::vector<std::string> &argv, ChildOutput output);

} // namespace weft

#endif // WEFT_RUNTIME_BASE_SUBPROCESS_H_
