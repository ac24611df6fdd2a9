// Reading the fields of one JSON object with one-line errors that name the
// file and the field ("topo.json: field 'devices[1].memory_gb': ..."):
// shared by the config.json and topology parsers.
#ifndef WEFT_COMPILER_SUPPORT_JSONFIELDS_H_
#define WEFT_COMPILER_SUPPORT_JSONFIELDS_H_

#include "compiler/Support/Error.h"

#include <cmath>
#include <optional>
#include <string>

namespace weft {

// Typed access to the fields of one JSON object; every error is one line.
class JsonFields {
public:
  JsonFields(const llvm::json::Object &obj, llvm::StringRef file, std::string prefix = "")
      : obj(obj), file(file), prefix(std::move(prefix)) {}

  std::string path(llvm::StringRef field) const { return prefix + field.str(); }

  llvm::Error error(llvm::StringRef field, const llvm::Twine &msg) const {
    return makeOneLineError(llvm::Twine(file) + ": field '" + prefix + field + "': " +
                     msg);
  }

  // A value that is missing or JSON null counts as absent.
  const llvm::json::Value *get(llvm::StringRef field) const {
    const llvm::json::Value *v = obj.get(field);
    if (!v || v->kind() == llvm::json::Value::Null)
      return nullptr;
    return v;
  }

  llvm::Expected<std::optional<int64_t>> optInt(llvm::StringRef field, int64_t min,
                                          int64_t max) const {
    const llvm::json::Value *v = get(field);
    if (!v)
      return std::optional<int64_t>();
    std::optional<int64_t> i = v->getAsInteger();
    if (!i)
      return error(field, "expected an integer, got " + describeJson(*v));
    if (*i < min || *i > max)
      return error(field, llvm::formatv("expected an integer in [{0}, {1}], got {2}",
                                        min, max, *i));
    return i;
  }

  llvm::Expected<int64_t> reqInt(llvm::StringRef field, int64_t min, int64_t max) const {
    llvm::Expected<std::optional<int64_t>> v = optInt(field, min, max);
    if (!v)
      return v.takeError();
    if (!*v)
      return error(field, "missing (expected an integer)");
    return **v;
  }

  llvm::Expected<std::optional<double>> optPositive(llvm::StringRef field) const {
    const llvm::json::Value *v = get(field);
    if (!v)
      return std::optional<double>();
    std::optional<double> d = v->getAsNumber();
    if (!d)
      return error(field, "expected a number, got " + describeJson(*v));
    if (!std::isfinite(*d) || *d <= 0.0)
      return error(field, "expected a positive number, got " + describeJson(*v));
    return d;
  }

  llvm::Expected<std::optional<bool>> optBool(llvm::StringRef field) const {
    const llvm::json::Value *v = get(field);
    if (!v)
      return std::optional<bool>();
    std::optional<bool> b = v->getAsBoolean();
    if (!b)
      return error(field, "expected true or false, got " + describeJson(*v));
    return b;
  }

  llvm::Expected<std::optional<std::string>> optString(llvm::StringRef field) const {
    const llvm::json::Value *v = get(field);
    if (!v)
      return std::optional<std::string>();
    std::optional<llvm::StringRef> s = v->getAsString();
    if (!s)
      return error(field, "expected a string, got " + describeJson(*v));
    return std::optional<std::string>(s->str());
  }

  // The fields of the object at `field` (null when it is absent), whose
  // errors name it as a prefix ("quantization_config.config_groups.g.").
  llvm::Expected<std::optional<JsonFields>> optObject(llvm::StringRef field) const {
    const llvm::json::Value *v = get(field);
    if (!v)
      return std::optional<JsonFields>();
    const llvm::json::Object *o = v->getAsObject();
    if (!o)
      return error(field, "expected an object, got " + describeJson(*v));
    return std::optional<JsonFields>(JsonFields(*o, file, prefix + field.str() + "."));
  }

  const llvm::json::Object &object() const { return obj; }

protected:
  const llvm::json::Object &obj;
  llvm::StringRef file;
  std::string prefix;
};

} // namespace weft

#endif // WEFT_COMPILER_SUPPORT_JSONFIELDS_H_
