// Evaluation of chat template trees (see TemplateEvaluator.h).
#include "runtime/chat/TemplateEvaluator.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <map>
#include <optional>

namespace weft::chat::detail {
namespace {

bool truthy(const Value &v) {
  if (v.undefined)
    return false;
  const Json &j = v.j;
  switch (j.type()) {
  case Json::value_t::null: return false;
  case Json::value_t::boolean: return j.get<bool>();
  case Json::value_t::number_integer: return j.get<int64_t>() != 0;
  case Json::value_t::number_unsigned: return j.get<uint64_t>() != 0;
  case Json::value_t::number_float: return j.get<double>() != 0;
  case Json::value_t::string: return !j.get_ref<const std::string &>().empty();
  case Json::value_t::array: return !j.empty();
  case Json::value_t::object: return v.isNamespace || !j.empty();
  default: return true;
  }
}

// Python's repr of a float: the shortest digits that read back as d, in
// fixed notation when the decimal point falls within 4 places before the
// first digit to 16 after it (`0.0001`, `1000000000000000.0`), otherwise as
// `d.ddde±XX` (`1e-05`, `1e+16`, `4.099276460824345e+18`).
std::string pyFloat(double d) {
  if (std::isnan(d))
    return "nan";
  if (std::isinf(d))
    return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string s(buf, r.ptr); // "-1.2345e+05", "0e+00"
  const bool neg = !s.empty() && s[0] == '-';
  if (neg)
    s.erase(0, 1);
  const size_t e = s.find('e');
  std::string digits = s.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp = std::atoi(s.c_str() + e + 1);
  const int point = exp + 1; // digits before the decimal point
  const int n = int(digits.size());
  std::string out;
  if (point > -4 && point <= 16) {
    if (point <= 0)
      out = "0." + std::string(size_t(-point), '0') + digits;
    else if (point >= n)
      out = digits + std::string(size_t(point - n), '0') + ".0";
    else
      out = digits.substr(0, size_t(point)) + "." + digits.substr(size_t(point));
  } else {
    out = digits.substr(0, 1);
    if (n > 1)
      out += "." + digits.substr(1);
    std::string ex = std::to_string(exp < 0 ? -exp : exp);
    if (ex.size() < 2)
      ex.insert(0, "0");
    out += std::string("e") + (exp < 0 ? "-" : "+") + ex;
  }
  return neg ? "-" + out : out;
}

std::string pyRepr(const Json &j);

std::string pyStr(const Value &v) {
  if (v.undefined)
    return "";
  const Json &j = v.j;
  switch (j.type()) {
  case Json::value_t::null: return "None";
  case Json::value_t::boolean: return j.get<bool>() ? "True" : "False";
  case Json::value_t::number_integer: return std::to_string(j.get<int64_t>());
  case Json::value_t::number_unsigned: return std::to_string(j.get<uint64_t>());
  case Json::value_t::number_float: return pyFloat(j.get<double>());
  case Json::value_t::string: return j.get<std::string>();
  default: return pyRepr(j);
  }
}

std::string pyRepr(const Json &j) {
  if (j.is_string()) {
    const std::string &s = j.get_ref<const std::string &>();
    char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
    std::string out(1, q);
    for (char c : s) {
      if (c == q || c == '\\')
        out += '\\', out += c;
      else if (c == '\n')
        out += "\\n";
      else if (c == '\t')
        out += "\\t";
      else if (c == '\r')
        out += "\\r";
      else
        out += c;
    }
    return out + q;
  }
  if (j.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < j.size(); ++i)
      out += (i ? ", " : "") + pyRepr(j[i]);
    return out + "]";
  }
  if (j.is_object()) {
    std::string out = "{";
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      out += (first ? "" : ", ") + pyRepr(Json(it.key())) + ": " + pyRepr(it.value());
      first = false;
    }
    return out + "}";
  }
  return pyStr(Value(j));
}

// Thrown by jsonDumps when its text passes the render's output limit.
struct JsonTooLong {};

// Python's json.dumps(x, ensure_ascii=False[, indent=n]), at most maxBytes.
void jsonDumps(const Json &j, int indent, int level, std::string &out, size_t maxBytes) {
  if (out.size() > maxBytes)
    throw JsonTooLong{};
  auto newline = [&](int l) {
    out += '\n';
    if (size_t(indent) * size_t(l) > maxBytes - std::min(maxBytes, out.size()))
      throw JsonTooLong{};
    out.append(size_t(indent) * size_t(l), ' ');
  };
  switch (j.type()) {
  case Json::value_t::null: out += "null"; return;
  case Json::value_t::boolean: out += j.get<bool>() ? "true" : "false"; return;
  case Json::value_t::number_integer: out += std::to_string(j.get<int64_t>()); return;
  case Json::value_t::number_unsigned: out += std::to_string(j.get<uint64_t>()); return;
  case Json::value_t::number_float: {
    double d = j.get<double>();
    out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : pyFloat(d);
    return;
  }
  case Json::value_t::string: {
    out += '"';
    for (unsigned char c : j.get_ref<const std::string &>()) {
      switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
      }
    }
    out += '"';
    return;
  }
  case Json::value_t::array: {
    if (j.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < j.size(); ++i) {
      if (i)
        out += indent >= 0 ? "," : ", ";
      if (indent >= 0)
        newline(level + 1);
      jsonDumps(j[i], indent, level + 1, out, maxBytes);
    }
    if (indent >= 0)
      newline(level);
    out += ']';
    return;
  }
  case Json::value_t::object: {
    if (j.empty()) {
      out += "{}";
      return;
    }
    out += '{';
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!first)
        out += indent >= 0 ? "," : ", ";
      first = false;
      if (indent >= 0)
        newline(level + 1);
      jsonDumps(Json(it.key()), indent, level + 1, out, maxBytes);
      out += ": ";
      jsonDumps(it.value(), indent, level + 1, out, maxBytes);
    }
    if (indent >= 0)
      newline(level);
    out += '}';
    return;
  }
  default: out += "null";
  }
}

bool isNumber(const Json &j) { return j.is_number(); }

// Python strings count and slice code points, not bytes.
std::vector<std::string> codePoints(const std::string &s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    n = std::min(n, s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}
double num(const Json &j) { return j.get<double>(); }

// The bytes of the strings (keys included) in j, counted up to past `cap`.
size_t textBytes(const Json &j, size_t cap) {
  if (j.is_string())
    return j.get_ref<const std::string &>().size();
  size_t n = 0;
  if (j.is_array())
    for (const Json &x : j) {
      n += textBytes(x, cap);
      if (n > cap)
        break;
    }
  else if (j.is_object())
    for (auto it = j.begin(); it != j.end() && n <= cap; ++it)
      n += it.key().size() + textBytes(it.value(), cap);
  return n;
}

class Evaluator {
public:
  Evaluator(const RenderLimits &limits, const std::string &name) : limits_(limits), name_(name) {}

  std::vector<std::map<std::string, Value>> scopes;

  [[noreturn]] void fail(int line, const std::string &what) const {
    throw RenderError{name_ + ": line " + std::to_string(line) + ": " + what};
  }
  // An integer operand as int64. Python's integers have no bound, a
  // template here has 64 bits: past them is a render error naming the
  // line, never a wrapped value.
  static bool fits64(const Json &j) {
    return !j.is_number_unsigned() || j.get<uint64_t>() <= uint64_t(INT64_MAX);
  }
  int64_t integer(const Json &j, int line) const {
    if (!fits64(j))
      fail(line, "the integer " + std::to_string(j.get<uint64_t>()) + " does not fit 64 bits");
    return j.get<int64_t>();
  }
  [[noreturn]] void overflow(int line, const std::string &op) const {
    fail(line, "integer overflow in '" + op + "': the result does not fit 64 bits");
  }
  void step(int line, uint64_t units = 1) {
    steps_ += units;
    if (steps_ > limits_.maxSteps)
      fail(line, "the template takes too long (more than " + std::to_string(limits_.maxSteps) +
                     " steps)");
  }
  // What making a value cost beyond its step, in steps: values are copied
  // whole (a list's elements, a string's bytes, 32 to a step), so a loop
  // that grows a list or a string pays for every copy and the step limit
  // bounds the time, not only the number of operations.
  static uint64_t copySteps(const Json &j) {
    if (j.is_string())
      return j.get_ref<const std::string &>().size() / 32;
    if (!j.is_array() && !j.is_object())
      return 0;
    uint64_t n = j.size(); // and one level down: messages are objects of strings
    for (const Json &e : j)
      if (e.is_array() || e.is_object())
        n += e.size();
    return n;
  }
  // A loop iteration: its scope, the item and the `loop` object (with the
  // previous and next items), about as much work as 24 expressions.
  static constexpr uint64_t kLoopIterationSteps = 24;

  Value *lookup(const std::string &n) {
    for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
      auto f = it->find(n);
      if (f != it->end())
        return &f->second;
    }
    return nullptr;
  }

  Value attribute(const Value &obj, const std::string &key) {
    if (obj.j.is_object()) {
      auto it = obj.j.find(key);
      if (it != obj.j.end())
        return Value(*it);
    }
    return Value::undef();
  }

  Value index(const Value &obj, const Value &key, int line) {
    if (obj.undefined)
      return Value::undef();
    if (obj.j.is_object() && key.j.is_string()) {
      auto it = obj.j.find(key.j.get<std::string>());
      return it == obj.j.end() ? Value::undef() : Value(*it);
    }
    if ((obj.j.is_array() || obj.j.is_string()) && key.j.is_number_integer()) {
      if (!fits64(key.j))
        return Value::undef(); // past any sequence's end
      int64_t i = key.j.get<int64_t>();
      std::vector<std::string> cps;
      if (obj.j.is_string())
        cps = codePoints(obj.j.get_ref<const std::string &>());
      int64_t n = obj.j.is_array() ? int64_t(obj.j.size()) : int64_t(cps.size());
      if (i < 0)
        i += n;
      if (i < 0 || i >= n)
        return Value::undef();
      if (obj.j.is_array())
        return Value(obj.j[size_t(i)]);
      return Value(Json(cps[size_t(i)]));
    }
    (void)line;
    return Value::undef();
  }

  // An expression's value: no string longer than the output may be, no
  // list longer than kMaxListElements, so that a template doubling a value
  // in a loop stops with an error, not out of memory.
  static constexpr size_t kMaxListElements = size_t(1) << 20; // range() makes at most 1e6
  Value eval(const ExprP &e, int depth = 0) {
    Value v = evalExpr(e, depth);
    if (v.j.is_string() && v.j.get_ref<const std::string &>().size() > limits_.maxOutputBytes)
      fail(e->line, "a string grows beyond the output limit of " +
                        std::to_string(limits_.maxOutputBytes) + " bytes");
    if (v.j.is_array() && v.j.size() > kMaxListElements)
      fail(e->line, "a list grows beyond " + std::to_string(kMaxListElements) + " elements");
    step(e->line, copySteps(v.j));
    return v;
  }

  Value evalExpr(const ExprP &e, int depth) {
    if (depth > limits_.maxDepth)
      fail(e->line, "expression nested too deeply");
    step(e->line);
    switch (e->kind) {
    case Expr::Literal:
      if (e->name == "undefined")
        return Value::undef();
      return Value(e->literal);
    case Expr::Name: {
      Value *v = lookup(e->name);
      return v ? *v : Value::undef();
    }
    case Expr::Attr:
      return attribute(eval(e->args[0], depth + 1), e->name);
    case Expr::Index:
      return index(eval(e->args[0], depth + 1), eval(e->args[1], depth + 1), e->line);
    case Expr::Slice:
      return slice(e, depth);
    case Expr::Call:
      return call(e, depth);
    case Expr::Filter:
      return filter(e, depth);
    case Expr::Test: {
      bool r = test(e, depth);
      return Value(Json(e->negated ? !r : r));
    }
    case Expr::Not:
      return Value(Json(!truthy(eval(e->args[0], depth + 1))));
    case Expr::Neg: {
      Value v = eval(e->args[0], depth + 1);
      if (v.j.is_number_integer()) {
        int64_t i = integer(v.j, e->line);
        if (i == INT64_MIN)
          overflow(e->line, "-");
        return Value(Json(-i));
      }
      if (v.j.is_number())
        return Value(Json(-v.j.get<double>()));
      fail(e->line, "unary minus on a non-number");
    }
    case Expr::And: {
      Value l = eval(e->args[0], depth + 1);
      return truthy(l) ? eval(e->args[1], depth + 1) : l;
    }
    case Expr::Or: {
      Value l = eval(e->args[0], depth + 1);
      return truthy(l) ? l : eval(e->args[1], depth + 1);
    }
    case Expr::Ternary:
      return truthy(eval(e->args[0], depth + 1)) ? eval(e->args[1], depth + 1)
                                                 : eval(e->args[2], depth + 1);
    case Expr::List: {
      Json a = Json::array();
      for (const ExprP &x : e->args)
        a.push_back(eval(x, depth + 1).j);
      return Value(a);
    }
    case Expr::Dict: {
      Json o = Json::object();
      for (size_t i = 0; i + 1 < e->args.size(); i += 2) {
        Value k = eval(e->args[i], depth + 1);
        o[pyStr(k)] = eval(e->args[i + 1], depth + 1).j;
      }
      return Value(o);
    }
    case Expr::Binary:
      return binary(e, depth);
    }
    fail(e->line, "unknown expression");
  }

  Value slice(const ExprP &e, int depth) {
    Value obj = eval(e->args[0], depth + 1);
    auto opt = [&](const ExprP &x) -> std::optional<int64_t> {
      if (!x)
        return std::nullopt;
      Value v = eval(x, depth + 1);
      if (v.j.is_null() || v.undefined)
        return std::nullopt;
      if (!v.j.is_number_integer())
        fail(e->line, "slice bounds must be integers");
      return integer(v.j, e->line);
    };
    std::optional<int64_t> lo = opt(e->args[1]), hi = opt(e->args[2]), st = opt(e->args[3]);
    int64_t step = st.value_or(1);
    if (step == 0)
      fail(e->line, "slice step cannot be zero");
    bool isStr = obj.j.is_string();
    if (!isStr && !obj.j.is_array())
      return Value::undef();
    std::vector<std::string> cps;
    if (isStr)
      cps = codePoints(obj.j.get_ref<const std::string &>());
    int64_t n = isStr ? int64_t(cps.size()) : int64_t(obj.j.size());
    auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
      if (!v)
        return dflt;
      int64_t x = *v < 0 ? *v + n : *v;
      if (step > 0)
        return std::clamp<int64_t>(x, 0, n);
      return std::clamp<int64_t>(x, -1, n - 1);
    };
    int64_t a = clamp(lo, step > 0 ? 0 : n - 1), b = clamp(hi, step > 0 ? n : -1);
    Json out = isStr ? Json(std::string()) : Json::array();
    for (int64_t i = a; step > 0 ? i < b : i > b;) {
      if (isStr)
        out.get_ref<std::string &>() += cps[size_t(i)];
      else
        out.push_back(obj.j[size_t(i)]);
      if (__builtin_add_overflow(i, step, &i))
        break; // past either end of the sequence
    }
    return Value(out);
  }

  std::vector<Value> args(const ExprP &e, size_t from, int depth) {
    std::vector<Value> out;
    for (size_t i = from; i < e->args.size(); ++i)
      out.push_back(eval(e->args[i], depth + 1));
    return out;
  }
  Value kwarg(const ExprP &e, const std::string &key, int depth) {
    for (auto &[k, v] : e->kwargs)
      if (k == key)
        return eval(v, depth + 1);
    return Value::undef();
  }

  Value call(const ExprP &e, int depth) {
    const ExprP &callee = e->args[0];
    std::vector<Value> a = args(e, 1, depth);
    if (callee->kind == Expr::Name) {
      const std::string &n = callee->name;
      if (n == "raise_exception")
        throw RenderError{a.empty() ? "raise_exception() in the template" : pyStr(a[0])};
      if (n == "namespace") {
        Value ns(Json::object());
        ns.isNamespace = true;
        for (auto &[k, v] : e->kwargs)
          ns.j[k] = eval(v, depth + 1).j;
        return ns;
      }
      if (n == "dict") {
        Json o = Json::object();
        for (auto &[k, v] : e->kwargs)
          o[k] = eval(v, depth + 1).j;
        return Value(o);
      }
      if (n == "range") {
        int64_t lo = 0, hi = 0, st = 1;
        for (const Value &v : a)
          if (!v.j.is_number_integer())
            fail(e->line, "range() takes integers");
        if (a.size() == 1)
          hi = integer(a[0].j, e->line);
        else if (a.size() >= 2)
          lo = integer(a[0].j, e->line), hi = integer(a[1].j, e->line);
        if (a.size() == 3)
          st = integer(a[2].j, e->line);
        // The element count in 128 bits: hi - lo and |st| can pass 64.
        const __int128 span = __int128(hi) - __int128(lo), step128 = st;
        if (st == 0 || (span < 0 ? -span : span) / (step128 < 0 ? -step128 : step128) > 1000000)
          fail(e->line, "range() too large or with step 0");
        Json out = Json::array();
        for (int64_t i = lo; st > 0 ? i < hi : i > hi;) {
          out.push_back(i);
          if (__builtin_add_overflow(i, st, &i))
            break;
        }
        return Value(out);
      }
      if (n == "strftime_now") {
        std::time_t now = std::time(nullptr);
        std::tm tm{};
        localtime_r(&now, &tm);
        char buf[256];
        std::string fmt = a.empty() ? "%Y-%m-%d" : pyStr(a[0]);
        size_t len = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
        return Value(Json(std::string(buf, len)));
      }
      fail(e->line, "unknown function '" + n + "'");
    }
    if (callee->kind == Expr::Attr)
      return method(e, eval(callee->args[0], depth + 1), callee->name, a, depth);
    fail(e->line, "this value cannot be called");
  }

  Value method(const ExprP &e, const Value &obj, const std::string &m, const std::vector<Value> &a,
               int depth) {
    (void)depth;
    if (obj.j.is_object() && !obj.undefined) {
      if (m == "items") {
        Json out = Json::array();
        for (auto it = obj.j.begin(); it != obj.j.end(); ++it)
          out.push_back(Json::array({it.key(), it.value()}));
        return Value(out);
      }
      if (m == "keys" || m == "values") {
        Json out = Json::array();
        for (auto it = obj.j.begin(); it != obj.j.end(); ++it)
          out.push_back(m == "keys" ? Json(it.key()) : it.value());
        return Value(out);
      }
      if (m == "get") {
        if (a.empty())
          fail(e->line, "get() needs a key");
        Value v = attribute(obj, pyStr(a[0]));
        return v.undefined ? (a.size() > 1 ? a[1] : Value(Json(nullptr))) : v;
      }
    }
    if (obj.j.is_string() && !obj.undefined) {
      std::string s = obj.j.get<std::string>();
      auto chars = [&](size_t i) { return a.size() > i && a[i].j.is_string() ? a[i].j.get<std::string>() : std::string(" \t\n\r\x0b\x0c"); };
      if (m == "strip" || m == "lstrip" || m == "rstrip") {
        std::string set = chars(0);
        size_t b = 0, en = s.size();
        if (m != "rstrip")
          while (b < en && set.find(s[b]) != std::string::npos)
            ++b;
        if (m != "lstrip")
          while (en > b && set.find(s[en - 1]) != std::string::npos)
            --en;
        return Value(Json(s.substr(b, en - b)));
      }
      if (m == "startswith" || m == "endswith") {
        if (a.empty() || !a[0].j.is_string())
          fail(e->line, m + "() needs a string");
        std::string p = a[0].j.get<std::string>();
        bool r = m == "startswith" ? s.rfind(p, 0) == 0
                                   : s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
        return Value(Json(r));
      }
      if (m == "upper" || m == "lower") {
        for (char &c : s)
          c = char(m == "upper" ? std::toupper(static_cast<unsigned char>(c))
                                : std::tolower(static_cast<unsigned char>(c)));
        return Value(Json(s));
      }
      if (m == "replace") {
        if (a.size() < 2)
          fail(e->line, "replace() needs two strings");
        std::string from = pyStr(a[0]), to = pyStr(a[1]), out;
        if (from.empty())
          return Value(Json(s));
        size_t start = 0, at;
        while ((at = s.find(from, start)) != std::string::npos) {
          out.append(s, start, at - start);
          out += to;
          start = at + from.size();
          if (out.size() > limits_.maxOutputBytes) // before it can ask for terabytes
            fail(e->line, "replace()'s result grows beyond the output limit of " +
                              std::to_string(limits_.maxOutputBytes) + " bytes");
        }
        out.append(s, start, std::string::npos);
        return Value(Json(out));
      }
      if (m == "split") {
        Json out = Json::array();
        if (a.empty() || a[0].j.is_null()) {
          size_t i = 0;
          while (i < s.size()) {
            while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])))
              ++i;
            size_t j = i;
            while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j])))
              ++j;
            if (j > i)
              out.push_back(s.substr(i, j - i));
            i = j;
          }
        } else {
          std::string sep = pyStr(a[0]);
          if (sep.empty())
            fail(e->line, "split() with an empty separator");
          size_t start = 0, at;
          while ((at = s.find(sep, start)) != std::string::npos) {
            out.push_back(s.substr(start, at - start));
            start = at + sep.size();
          }
          out.push_back(s.substr(start));
        }
        return Value(out);
      }
      if (m == "find") {
        size_t at = a.empty() ? std::string::npos : s.find(pyStr(a[0]));
        return Value(Json(at == std::string::npos ? int64_t(-1) : int64_t(at)));
      }
      if (m == "title" || m == "capitalize") {
        bool startWord = true;
        for (size_t i = 0; i < s.size(); ++i) {
          unsigned char c = static_cast<unsigned char>(s[i]);
          if (m == "capitalize")
            s[i] = char(i == 0 ? std::toupper(c) : std::tolower(c));
          else {
            s[i] = char(startWord ? std::toupper(c) : std::tolower(c));
            startWord = !std::isalpha(c);
          }
        }
        return Value(Json(s));
      }
    }
    fail(e->line, "no method '" + m + "' on this value");
  }

  Value filter(const ExprP &e, int depth) {
    Value v = eval(e->args[0], depth + 1);
    std::vector<Value> a = args(e, 1, depth);
    const std::string &f = e->name;
    if (f == "trim") {
      std::string s = pyStr(v);
      size_t b = s.find_first_not_of(" \t\n\r\x0b\x0c");
      if (b == std::string::npos)
        return Value(Json(std::string()));
      size_t en = s.find_last_not_of(" \t\n\r\x0b\x0c");
      return Value(Json(s.substr(b, en - b + 1)));
    }
    if (f == "length" || f == "count") {
      if (v.j.is_string())
        return Value(Json(int64_t(codePoints(v.j.get_ref<const std::string &>()).size())));
      if (v.j.is_array() || v.j.is_object())
        return Value(Json(int64_t(v.j.size())));
      if (v.undefined)
        return Value(Json(int64_t(0)));
      fail(e->line, "length of a value without one");
    }
    if (f == "upper" || f == "lower" || f == "title" || f == "capitalize") {
      std::vector<Value> none;
      return method(e, Value(Json(pyStr(v))), f, none, depth);
    }
    if (f == "tojson") {
      Value indent = kwarg(e, "indent", depth);
      if (indent.undefined && !a.empty())
        indent = a[0];
      int width = -1; // compact
      if (indent.j.is_number_integer()) {
        const int64_t n = integer(indent.j, e->line);
        if (n > 1000)
          fail(e->line, "tojson indent " + std::to_string(n) + " is over 1000");
        width = int(std::max<int64_t>(n, 0));
      }
      std::string out;
      try {
        jsonDumps(v.undefined ? Json(nullptr) : v.j, width, 0, out, limits_.maxOutputBytes);
      } catch (const JsonTooLong &) {
        fail(e->line, "tojson's text grows beyond " + std::to_string(limits_.maxOutputBytes) +
                          " bytes");
      }
      return Value(Json(out));
    }
    if (f == "string")
      return Value(Json(pyStr(v)));
    if (f == "int") {
      if (v.j.is_number_integer())
        return Value(Json(integer(v.j, e->line)));
      if (v.j.is_number()) {
        const double d = v.j.get<double>();
        if (std::isnan(d))
          return Value(Json(int64_t(0))); // Python's ValueError: Jinja's default
        if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0))
          fail(e->line, "int of " + pyFloat(d) + " does not fit 64 bits");
        return Value(Json(int64_t(d)));
      }
      try {
        return Value(Json(int64_t(std::stoll(pyStr(v)))));
      } catch (...) {
        return Value(Json(int64_t(0)));
      }
    }
    if (f == "float") {
      if (v.j.is_number())
        return Value(Json(v.j.get<double>()));
      try {
        return Value(Json(std::stod(pyStr(v))));
      } catch (...) {
        return Value(Json(0.0));
      }
    }
    if (f == "first" || f == "last") {
      if (v.j.is_array() && !v.j.empty())
        return Value(f == "first" ? v.j.front() : v.j.back());
      if (v.j.is_string() && !v.j.get_ref<const std::string &>().empty()) {
        std::vector<std::string> cps = codePoints(v.j.get_ref<const std::string &>());
        return Value(Json(f == "first" ? cps.front() : cps.back()));
      }
      return Value::undef();
    }
    if (f == "join") {
      std::string sep = a.empty() ? "" : pyStr(a[0]), out;
      Value attr = kwarg(e, "attribute", depth);
      if (v.j.is_array())
        for (size_t i = 0; i < v.j.size(); ++i) {
          Value item(v.j[i]);
          if (!attr.undefined)
            item = attribute(item, pyStr(attr));
          out += (i ? sep : "") + pyStr(item);
        }
      return Value(Json(out));
    }
    if (f == "default" || f == "d") {
      bool boolean = a.size() > 1 && truthy(a[1]);
      if (v.undefined || (boolean && !truthy(v)))
        return a.empty() ? Value(Json(std::string())) : a[0];
      return v;
    }
    if (f == "replace") {
      std::vector<Value> two(a.begin(), a.begin() + long(std::min<size_t>(2, a.size())));
      return method(e, Value(Json(pyStr(v))), "replace", two, depth);
    }
    if (f == "list") {
      if (v.j.is_array())
        return v;
      Json out = Json::array();
      if (v.j.is_string())
        for (const std::string &c : codePoints(v.j.get<std::string>()))
          out.push_back(c);
      else if (v.j.is_object())
        for (auto it = v.j.begin(); it != v.j.end(); ++it)
          out.push_back(it.key());
      return Value(out);
    }
    if (f == "items")
      return method(e, v, "items", {}, depth);
    if (f == "reverse") {
      if (v.j.is_string()) {
        std::vector<std::string> cps = codePoints(v.j.get<std::string>());
        std::string s;
        for (auto it = cps.rbegin(); it != cps.rend(); ++it)
          s += *it;
        return Value(Json(s));
      }
      Json out = v.j.is_array() ? v.j : Json::array();
      std::reverse(out.begin(), out.end());
      return Value(out);
    }
    if (f == "safe" || f == "e" || f == "escape")
      return f == "safe" ? v : Value(Json(pyStr(v)));
    if (f == "selectattr" || f == "rejectattr" || f == "map") {
      Json out = Json::array();
      if (!v.j.is_array())
        return Value(out);
      if (f == "map") {
        Value attr = kwarg(e, "attribute", depth);
        if (attr.undefined)
          fail(e->line, "map() needs attribute=");
        for (const Json &item : v.j)
          out.push_back(attribute(Value(item), pyStr(attr)).j);
        return Value(out);
      }
      if (a.empty())
        fail(e->line, f + "() needs an attribute name");
      std::string attr = pyStr(a[0]);
      for (const Json &item : v.j) {
        Value x = attribute(Value(item), attr);
        bool keep;
        if (a.size() == 1)
          keep = truthy(x);
        else
          keep = namedTest(pyStr(a[1]), x, std::vector<Value>(a.begin() + 2, a.end()), e->line);
        if (keep == (f == "selectattr"))
          out.push_back(item);
      }
      return Value(out);
    }
    fail(e->line, "unknown filter '" + f + "'");
  }

  bool namedTest(const std::string &t, const Value &v, const std::vector<Value> &a, int line) {
    const Json &j = v.j;
    if (t == "defined") return !v.undefined;
    if (t == "undefined") return v.undefined;
    if (t == "none") return !v.undefined && j.is_null();
    if (t == "string") return !v.undefined && j.is_string();
    if (t == "number") return !v.undefined && j.is_number();
    if (t == "integer") return !v.undefined && j.is_number_integer();
    if (t == "float") return !v.undefined && j.is_number_float();
    if (t == "boolean") return !v.undefined && j.is_boolean();
    if (t == "true") return !v.undefined && j.is_boolean() && j.get<bool>();
    if (t == "false") return !v.undefined && j.is_boolean() && !j.get<bool>();
    if (t == "mapping") return !v.undefined && j.is_object();
    if (t == "iterable" || t == "sequence")
      return !v.undefined && (j.is_array() || j.is_string() || j.is_object());
    if (t == "odd" || t == "even") {
      if (!j.is_number_integer())
        fail(line, "'" + t + "' of a non-integer");
      return (j.get<int64_t>() % 2 != 0) == (t == "odd");
    }
    if (t == "divisibleby") {
      if (!j.is_number_integer() || a.empty() || !a[0].j.is_number_integer() ||
          a[0].j.get<int64_t>() == 0)
        fail(line, "'divisibleby' needs integers");
      const int64_t by = integer(a[0].j, line);
      return by == -1 || integer(j, line) % by == 0; // INT64_MIN % -1 would trap
    }
    if (t == "equalto" || t == "eq" || t == "==" || t == "sameas")
      return !a.empty() && equal(v, a[0]);
    if (t == "in")
      return !a.empty() && contains(a[0], v, line);
    if (t == "lower" || t == "upper") {
      if (!j.is_string())
        return false;
      for (char c : j.get<std::string>())
        if (std::isalpha(static_cast<unsigned char>(c)) &&
            (t == "lower" ? std::isupper(static_cast<unsigned char>(c))
                          : std::islower(static_cast<unsigned char>(c))))
          return false;
      return true;
    }
    fail(line, "unknown test '" + t + "'");
  }

  bool test(const ExprP &e, int depth) {
    Value v = eval(e->args[0], depth + 1);
    std::vector<Value> a = args(e, 1, depth);
    return namedTest(e->name, v, a, e->line);
  }

  static bool equal(const Value &a, const Value &b) {
    if (a.undefined || b.undefined)
      return a.undefined && b.undefined;
    if (a.j.is_number() && b.j.is_number())
      return a.j.get<double>() == b.j.get<double>();
    return a.j == b.j;
  }
  bool contains(const Value &container, const Value &item, int line) {
    const Json &c = container.j;
    if (c.is_string()) {
      if (!item.j.is_string())
        fail(line, "'in <string>' needs a string on the left");
      return c.get_ref<const std::string &>().find(item.j.get<std::string>()) != std::string::npos;
    }
    if (c.is_array()) {
      for (const Json &x : c)
        if (equal(Value(x), item))
          return true;
      return false;
    }
    if (c.is_object())
      return item.j.is_string() && c.contains(item.j.get<std::string>());
    if (container.undefined)
      return false;
    fail(line, "'in' needs a string, a list or a mapping on the right");
  }

  Value binary(const ExprP &e, int depth) {
    const std::string &op = e->name;
    Value l = eval(e->args[0], depth + 1), r = eval(e->args[1], depth + 1);
    if (op == "~")
      return Value(Json(pyStr(l) + pyStr(r)));
    if (op == "==")
      return Value(Json(equal(l, r)));
    if (op == "!=")
      return Value(Json(!equal(l, r)));
    if (op == "in")
      return Value(Json(contains(r, l, e->line)));
    if (op == "not in")
      return Value(Json(!contains(r, l, e->line)));
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int c;
      if (l.j.is_number() && r.j.is_number()) {
        double a = num(l.j), b = num(r.j);
        c = a < b ? -1 : a > b ? 1 : 0;
      } else if (l.j.is_string() && r.j.is_string()) {
        c = l.j.get_ref<const std::string &>().compare(r.j.get_ref<const std::string &>());
      } else {
        fail(e->line, "cannot compare these values with '" + op + "'");
      }
      bool res = op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0;
      return Value(Json(res));
    }
    if (op == "+") {
      if (l.j.is_string() && r.j.is_string())
        return Value(Json(l.j.get<std::string>() + r.j.get<std::string>()));
      if (l.j.is_array() && r.j.is_array()) {
        // Lists grow only here: their strings count against four times the
        // output limit, so a list of long strings doubled in a loop stops
        // before memory does.
        const size_t cap = 4 * limits_.maxOutputBytes;
        if (textBytes(l.j, cap) + textBytes(r.j, cap) > cap)
          fail(e->line, "a list's strings grow beyond " + std::to_string(cap) + " bytes");
        Json out = l.j;
        for (const Json &x : r.j)
          out.push_back(x);
        return Value(out);
      }
    }
    if (!l.j.is_number() || !r.j.is_number() || l.undefined || r.undefined)
      fail(e->line, "'" + op + "' needs numbers (or two strings or two lists for '+')");
    bool ints = l.j.is_number_integer() && r.j.is_number_integer();
    if (ints && op != "/") {
      int64_t a = integer(l.j, e->line), b = integer(r.j, e->line), v = 0;
      if ((op == "//" || op == "%") && b == 0)
        fail(e->line, "division by zero");
      if (op == "+" || op == "-" || op == "*") {
        bool over = op == "+"   ? __builtin_add_overflow(a, b, &v)
                    : op == "-" ? __builtin_sub_overflow(a, b, &v)
                                : __builtin_mul_overflow(a, b, &v);
        if (over)
          overflow(e->line, op);
        return Value(Json(v));
      }
      if (a == INT64_MIN && b == -1) {
        if (op == "%")
          return Value(Json(int64_t(0)));
        overflow(e->line, op);
      }
      int64_t q = a / b;
      if ((a % b != 0) && ((a < 0) != (b < 0)))
        --q; // Python floors
      if (op == "//") return Value(Json(q));
      if (op == "%") return Value(Json(a - q * b));
    }
    double a = num(l.j), b = num(r.j);
    if ((op == "/" || op == "//" || op == "%") && b == 0)
      fail(e->line, "division by zero");
    if (op == "+") return Value(Json(a + b));
    if (op == "-") return Value(Json(a - b));
    if (op == "*") return Value(Json(a * b));
    if (op == "/") return Value(Json(a / b));
    if (op == "//") return Value(Json(std::floor(a / b)));
    if (op == "%") return Value(Json(a - std::floor(a / b) * b));
    fail(e->line, "unknown operator '" + op + "'");
  }

  enum class Flow { Normal, Break, Continue };

  Flow run(const NodeP &n, std::string &out, int depth = 0) {
    if (depth > limits_.maxDepth)
      fail(n->line, "blocks nested too deeply");
    step(n->line);
    switch (n->kind) {
    case Node::Block:
      for (const NodeP &c : n->children) {
        Flow f = run(c, out, depth + 1);
        if (f != Flow::Normal)
          return f;
      }
      return Flow::Normal;
    case Node::Text:
      out += n->text;
      break;
    case Node::Output:
      out += pyStr(eval(n->expr));
      break;
    case Node::If:
      for (auto &[cond, body] : n->branches)
        if (!cond || truthy(eval(cond)))
          return run(body, out, depth + 1);
      break;
    case Node::Set: {
      Value v = eval(n->expr);
      const std::string &target = n->targets[0];
      size_t dot = target.find('.');
      if (dot == std::string::npos) {
        scopes.back()[target] = v;
      } else {
        Value *ns = lookup(target.substr(0, dot));
        if (!ns || !ns->isNamespace)
          fail(n->line, "'set " + target + "': only namespace() objects take attributes");
        ns->j[target.substr(dot + 1)] = v.j;
      }
      break;
    }
    case Node::Break:
      return Flow::Break;
    case Node::Continue:
      return Flow::Continue;
    case Node::For: {
      Value seq = eval(n->expr);
      std::vector<Json> items;
      if (seq.j.is_array())
        items.assign(seq.j.begin(), seq.j.end());
      else if (seq.j.is_object())
        for (auto it = seq.j.begin(); it != seq.j.end(); ++it)
          items.push_back(it.key());
      else if (seq.j.is_string())
        for (const std::string &c : codePoints(seq.j.get<std::string>()))
          items.push_back(c);
      else if (!seq.undefined && !seq.j.is_null())
        fail(n->line, "cannot loop over this value");
      auto bind = [&](std::map<std::string, Value> &scope, const Json &item) {
        if (n->targets.size() == 1) {
          scope[n->targets[0]] = Value(item);
        } else {
          if (!item.is_array() || item.size() != n->targets.size())
            fail(n->line, "cannot unpack the loop item into " +
                              std::to_string(n->targets.size()) + " names");
          for (size_t k = 0; k < n->targets.size(); ++k)
            scope[n->targets[k]] = Value(item[k]);
        }
      };
      if (n->filter) { // "for x in xs if cond": the loop variables count kept items
        std::vector<Json> kept;
        for (const Json &item : items) {
          scopes.emplace_back();
          bind(scopes.back(), item);
          bool keep = truthy(eval(n->filter));
          scopes.pop_back();
          if (keep)
            kept.push_back(item);
        }
        items.swap(kept);
      }
      if (items.empty()) {
        if (n->orElse)
          return run(n->orElse, out, depth + 1) == Flow::Normal ? Flow::Normal : Flow::Normal;
        break;
      }
      for (size_t i = 0; i < items.size(); ++i) {
        step(n->line, kLoopIterationSteps + 3 * copySteps(items[i]));
        scopes.emplace_back();
        bind(scopes.back(), items[i]);
        Json loop = {{"index", int64_t(i + 1)},
                     {"index0", int64_t(i)},
                     {"revindex", int64_t(items.size() - i)},
                     {"revindex0", int64_t(items.size() - i - 1)},
                     {"first", i == 0},
                     {"last", i + 1 == items.size()},
                     {"length", int64_t(items.size())}};
        loop["previtem"] = i > 0 ? items[i - 1] : Json(nullptr);
        loop["nextitem"] = i + 1 < items.size() ? items[i + 1] : Json(nullptr);
        scopes.back()["loop"] = Value(loop);
        Flow f = run(n->body, out, depth + 1);
        // Assignments inside a loop body stay there (Jinja's scoping);
        // namespace attributes were written through to their owner.
        scopes.pop_back();
        if (out.size() > limits_.maxOutputBytes)
          fail(n->line, "the output grows beyond " + std::to_string(limits_.maxOutputBytes) +
                            " bytes");
        if (f == Flow::Break)
          break;
      }
      break;
    }
    }
    if (out.size() > limits_.maxOutputBytes)
      fail(n->line, "the output grows beyond " + std::to_string(limits_.maxOutputBytes) +
                        " bytes");
    return Flow::Normal;
  }

private:
  const RenderLimits &limits_;
  const std::string &name_;
  uint64_t steps_ = 0;
};

} // namespace

std::string renderTemplate(const NodeP &root, const Json &context, const RenderLimits &limits,
                           const std::string &name) {
  Evaluator ev(limits, name);
  ev.scopes.emplace_back();
  for (auto it = context.begin(); it != context.end(); ++it)
    ev.scopes.back()[it.key()] = Value(it.value());
  std::string out;
  ev.run(root, out);
  return out;
}

} // namespace weft::chat::detail
