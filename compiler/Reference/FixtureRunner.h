// Helpers for tests that check a module's numbers against a Hugging Face
// fixture: run a prompt through the interpreter and compare logits.
#ifndef WEFT_COMPILER_REFERENCE_FIXTURERUNNER_H_
#define WEFT_COMPILER_REFERENCE_FIXTURERUNNER_H_

#include "compiler/Reference/Interpreter.h"

#include "mlir/IR/BuiltinOps.h"

namespace weft::reference {

// test/fixtures/<name>/reference.json: what transformers computed in f32.
struct FixtureReference {
  std::vector<int32_t> promptIds;
  int64_t vocabSize = 0;
  std::vector<float> logits; // [promptIds.size() x vocabSize], row-major
  std::vector<int32_t> greedyContinuation;
};

llvm::Expected<FixtureReference> readFixtureReference(llvm::StringRef dir);

// max_i |actual_i - expected_i| / max_i |expected_i|: an error relative to
// the scale of the whole tensor, so logits near zero do not blow it up.
// Infinite when the sizes differ or `actual` holds a NaN.
double maxRelativeError(llvm::ArrayRef<float> actual,
                        llvm::ArrayRef<float> expected);

// Runs `fn`, whose first four arguments are (ids, positions, slots, cache),
// on `ids` at positions firstPosition, firstPosition + 1, ... of `slot`.
// Further arguments must be per-token vectors; they get zeros (for the
// sampling graph that is temperature 0: greedy). Returns all results.
llvm::Expected<std::vector<Tensor>> runTokens(Interpreter &interpreter,
                                              mlir::func::FuncOp fn,
                                              llvm::ArrayRef<int32_t> ids,
                                              int32_t firstPosition,
                                              int32_t slot = 0);

// Runs `prompt` (positions 0.., slot 0) through @funcName of `module` with a
// fresh cache and returns its first result, the [T x V] logits, flattened.
// The function may have static token dimensions if they match the prompt.
llvm::Expected<std::vector<float>>
runPromptLogits(mlir::ModuleOp module, const WeightStore &weights,
                llvm::ArrayRef<int32_t> prompt, llvm::StringRef funcName = "forward");

// Greedy generation with a fresh cache: the prompt through @prefillFunc,
// then `steps` tokens, each the argmax of the last logits row; every token
// after the first goes through @decodeFunc one at a time. Returns the
// `steps` generated tokens.
llvm::Expected<std::vector<int32_t>>
runGreedy(mlir::ModuleOp module, const WeightStore &weights,
          llvm::ArrayRef<int32_t> prompt, int steps,
          llvm::StringRef prefillFunc = "forward",
          llvm::StringRef decodeFunc = "forward");

} // namespace weft::reference

#endif // WEFT_COMPILER_REFERENCE_FIXTURERUNNER_H_
