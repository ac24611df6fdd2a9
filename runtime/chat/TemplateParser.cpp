// Lexing and parsing of chat templates (see TemplateParser.h).
#include "runtime/chat/TemplateParser.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstdlib>

namespace weft::chat::detail {
namespace {

struct Token {
  enum Kind { Name, Number, String, Op, End } kind;
  std::string text;
  Json value; // Number, String
};

// Tokens of one tag's contents.
bool lexExpr(std::string_view s, std::vector<Token> &out, std::string &error) {
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_'))
        ++j;
      out.push_back({Token::Name, std::string(s.substr(i, j - i)), {}});
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      bool real = false;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_'))
        ++j;
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
        real = true;
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j])))
          ++j;
      }
      std::string text(s.substr(i, j - i));
      text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
      Token t{Token::Number, text, {}};
      if (real) {
        t.value = std::strtod(text.c_str(), nullptr); // past the range: inf, as Python
      } else {
        int64_t v = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc() || end != text.data() + text.size()) {
          error = "the integer " + text + " does not fit 64 bits";
          return false;
        }
        t.value = v;
      }
      out.push_back(std::move(t));
      i = j;
      continue;
    }
    if (c == '\'' || c == '"') {
      std::string v;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != c; ++j) {
        if (s[j] == '\\' && j + 1 < s.size()) {
          char e = s[++j];
          switch (e) {
          case 'n': v += '\n'; break;
          case 't': v += '\t'; break;
          case 'r': v += '\r'; break;
          case '0': v += '\0'; break;
          default: v += e; break; // \\ \' \" and anything else
          }
        } else {
          v += s[j];
        }
      }
      if (j >= s.size()) {
        error = "unterminated string";
        return false;
      }
      out.push_back({Token::String, "", v});
      i = j + 1;
      continue;
    }
    static const char *ops[] = {"**", "//", "==", "!=", "<=", ">=", "(", ")", "[", "]", "{",
                                "}", ",", ":", ".", "|", "~", "+", "-", "*", "/", "%", "<",
                                ">", "="};
    bool matched = false;
    for (const char *op : ops) {
      size_t n = std::char_traits<char>::length(op);
      if (s.substr(i, n) == op) {
        out.push_back({Token::Op, op, {}});
        i += n;
        matched = true;
        break;
      }
    }
    if (!matched) {
      error = std::string("unexpected character '") + c + "'";
      return false;
    }
  }
  out.push_back({Token::End, "", {}});
  return true;
}

class ExprParser {
public:
  ExprParser(std::vector<Token> tokens, int line) : t_(std::move(tokens)), line_(line) {}

  bool atEnd() const { return t_[p_].kind == Token::End; }
  bool isName(const char *n) const { return t_[p_].kind == Token::Name && t_[p_].text == n; }
  bool isOp(const char *o) const { return t_[p_].kind == Token::Op && t_[p_].text == o; }
  const Token &peek() const { return t_[p_]; }
  Token next() { return t_[p_].kind == Token::End ? t_[p_] : t_[p_++]; }
  void expectOp(const char *o) {
    if (!isOp(o))
      fail(std::string("expected '") + o + "'");
    ++p_;
  }
  std::string expectName() {
    if (peek().kind != Token::Name)
      fail("expected a name");
    return next().text;
  }
  [[noreturn]] void fail(const std::string &what) const {
    std::string near = t_[p_].kind == Token::End ? "the end of the tag" : "'" + t_[p_].text + "'";
    throw RenderError{"line " + std::to_string(line_) + ": " + what + " near " + near};
  }

  ExprP make(Expr::Kind k) {
    auto e = std::make_shared<Expr>();
    e->kind = k;
    e->line = line_;
    return e;
  }
  // A node whose operands are all in place: its height, checked.
  ExprP seal(ExprP e) {
    int h = 0;
    for (const ExprP &a : e->args)
      if (a)
        h = std::max(h, a->height);
    for (const auto &kw : e->kwargs)
      h = std::max(h, kw.second->height);
    e->height = h + 1;
    if (e->height > kMaxExprHeight)
      fail("expression nested too deeply (more than " + std::to_string(kMaxExprHeight) +
           " operations inside one another)");
    return e;
  }
  ExprP node(Expr::Kind k, std::vector<ExprP> args, std::string name = {}) {
    ExprP e = make(k);
    e->args = std::move(args);
    e->name = std::move(name);
    return seal(std::move(e));
  }
  // Parser recursion: one level more than `d`.
  void nest(int d) const {
    if (d > kMaxExprNesting)
      fail("expression nested too deeply (more than " + std::to_string(kMaxExprNesting) +
           " levels)");
  }

  // expression := or ["if" or ["else" expression]]
  ExprP expression(int depth = 0) {
    nest(depth);
    ExprP e = orExpr(depth);
    if (isName("if")) {
      ++p_;
      ExprP cond = orExpr(depth);
      ExprP otherwise;
      if (isName("else")) {
        ++p_;
        otherwise = expression(depth + 1);
      } else {
        otherwise = make(Expr::Literal);
        otherwise->name = "undefined";
      }
      return node(Expr::Ternary, {cond, e, otherwise});
    }
    return e;
  }
  ExprP orExpr(int d) {
    ExprP l = andExpr(d);
    while (isName("or")) {
      ++p_;
      ExprP r = andExpr(d);
      l = node(Expr::Or, {l, r});
    }
    return l;
  }
  ExprP andExpr(int d) {
    ExprP l = notExpr(d);
    while (isName("and")) {
      ++p_;
      ExprP r = notExpr(d);
      l = node(Expr::And, {l, r});
    }
    return l;
  }
  ExprP notExpr(int d) {
    if (isName("not")) {
      ++p_;
      nest(d + 1);
      return node(Expr::Not, {notExpr(d + 1)});
    }
    return compare(d);
  }
  ExprP compare(int d) {
    ExprP l = concat(d);
    while (true) {
      std::string op;
      if (isOp("==") || isOp("!=") || isOp("<") || isOp(">") || isOp("<=") || isOp(">=")) {
        op = next().text;
      } else if (isName("in")) {
        ++p_;
        op = "in";
      } else if (isName("not") && t_[p_ + 1].kind == Token::Name && t_[p_ + 1].text == "in") {
        p_ += 2;
        op = "not in";
      } else if (isName("is")) {
        ++p_;
        ExprP e = make(Expr::Test);
        if (isName("not")) {
          ++p_;
          e->negated = true;
        }
        e->name = expectName();
        e->args = {l};
        // A test argument: "is divisibleby(3)", "is equalto 3", "is sameas x".
        if (isOp("(")) {
          ++p_;
          while (!isOp(")")) {
            e->args.push_back(expression(d + 1));
            if (!isOp(")"))
              expectOp(",");
          }
          ++p_;
        } else if (!atEnd() && (peek().kind == Token::Number || peek().kind == Token::String ||
                                (peek().kind == Token::Name && !isName("and") && !isName("or") &&
                                 !isName("else") && !isName("if") && !isName("in")))) {
          nest(d + 1);
          e->args.push_back(concat(d + 1));
        }
        l = seal(e);
        continue;
      } else {
        return l;
      }
      ExprP r = concat(d);
      l = node(Expr::Binary, {l, r}, op);
    }
  }
  ExprP concat(int d) {
    ExprP l = additive(d);
    while (isOp("~")) {
      ++p_;
      ExprP r = additive(d);
      l = node(Expr::Binary, {l, r}, "~");
    }
    return l;
  }
  ExprP additive(int d) {
    ExprP l = multiplicative(d);
    while (isOp("+") || isOp("-")) {
      std::string op = next().text;
      ExprP r = multiplicative(d);
      l = node(Expr::Binary, {l, r}, op);
    }
    return l;
  }
  ExprP multiplicative(int d) {
    ExprP l = unary(d);
    while (isOp("*") || isOp("/") || isOp("//") || isOp("%")) {
      std::string op = next().text;
      ExprP r = unary(d);
      l = node(Expr::Binary, {l, r}, op);
    }
    return l;
  }
  ExprP unary(int d) {
    if (isOp("-")) {
      ++p_;
      nest(d + 1);
      return node(Expr::Neg, {unary(d + 1)});
    }
    if (isOp("+")) {
      ++p_;
      nest(d + 1);
      return unary(d + 1);
    }
    return postfix(d);
  }
  void callArgs(ExprP call, int d) {
    // After "(": positional and keyword arguments up to ")".
    while (!isOp(")")) {
      if (peek().kind == Token::Name && t_[p_ + 1].kind == Token::Op && t_[p_ + 1].text == "=") {
        std::string key = next().text;
        ++p_;
        call->kwargs.push_back({key, expression(d + 1)});
      } else {
        call->args.push_back(expression(d + 1));
      }
      if (!isOp(")"))
        expectOp(",");
    }
    ++p_;
  }
  ExprP postfix(int d) {
    ExprP e = primary(d);
    while (true) {
      if (isOp(".")) {
        ++p_;
        std::string name = expectName();
        e = node(Expr::Attr, {e}, name);
      } else if (isOp("[")) {
        ++p_;
        ExprP lo, hi, step;
        bool slice = false;
        if (!isOp(":"))
          lo = expression(d + 1);
        if (isOp(":")) {
          slice = true;
          ++p_;
          if (!isOp("]") && !isOp(":"))
            hi = expression(d + 1);
          if (isOp(":")) {
            ++p_;
            if (!isOp("]"))
              step = expression(d + 1);
          }
        }
        expectOp("]");
        e = node(slice ? Expr::Slice : Expr::Index, {e, lo, hi, step});
      } else if (isOp("(")) {
        ++p_;
        ExprP c = make(Expr::Call);
        c->args = {e};
        callArgs(c, d);
        e = seal(c);
      } else if (isOp("|")) {
        ++p_;
        ExprP f = make(Expr::Filter);
        f->name = expectName();
        f->args = {e};
        if (isOp("(")) {
          ++p_;
          callArgs(f, d);
        }
        e = seal(f);
      } else {
        return e;
      }
    }
  }
  ExprP primary(int d) {
    const Token &t = peek();
    if (t.kind == Token::Number || t.kind == Token::String) {
      ExprP e = make(Expr::Literal);
      e->literal = next().value;
      return e;
    }
    if (t.kind == Token::Name) {
      std::string n = next().text;
      ExprP e = make(Expr::Literal);
      if (n == "true" || n == "True")
        e->literal = true;
      else if (n == "false" || n == "False")
        e->literal = false;
      else if (n == "none" || n == "None")
        e->literal = nullptr;
      else {
        e->kind = Expr::Name;
        e->name = n;
      }
      return e;
    }
    if (isOp("(")) {
      ++p_;
      ExprP first = expression(d + 1);
      if (isOp(",")) { // a tuple: a list for our purposes
        ExprP l = make(Expr::List);
        l->args.push_back(first);
        while (isOp(",")) {
          ++p_;
          if (isOp(")"))
            break;
          l->args.push_back(expression(d + 1));
        }
        expectOp(")");
        return seal(l);
      }
      expectOp(")");
      return first;
    }
    if (isOp("[")) {
      ++p_;
      ExprP l = make(Expr::List);
      while (!isOp("]")) {
        l->args.push_back(expression(d + 1));
        if (!isOp("]"))
          expectOp(",");
      }
      ++p_;
      return seal(l);
    }
    if (isOp("{")) {
      ++p_;
      ExprP m = make(Expr::Dict);
      while (!isOp("}")) {
        m->args.push_back(expression(d + 1));
        expectOp(":");
        m->args.push_back(expression(d + 1));
        if (!isOp("}"))
          expectOp(",");
      }
      ++p_;
      return seal(m);
    }
    fail("expected a value");
  }

private:
  std::vector<Token> t_;
  size_t p_ = 0;
  int line_;
};

struct Tag {
  enum Kind { Text, Output, Statement } kind;
  std::string content;
  int line;
};

// Splits the source into text, {{ }} and {% %} pieces, with Jinja's
// whitespace control as transformers sets it up: trim_blocks (a newline
// right after a block or comment tag goes), lstrip_blocks (spaces and tabs
// before one on its line go), and the "-" markers (all whitespace on that
// side goes).
std::vector<Tag> lexTemplate(std::string_view s, const std::string &name) {
  std::vector<Tag> out;
  size_t i = 0;
  int line = 1;
  bool trimNextNewline = false, stripNextWhitespace = false;
  // Lines are counted once over the source as tags come (they come in
  // order), and the last newline seen is kept for lstrip_blocks: the lexer
  // stays linear in the source, however many tags share a line.
  size_t countedTo = 0;
  int countedLines = 1;
  size_t lastNewline = std::string_view::npos;
  auto lineOf = [&](size_t upTo) {
    for (; countedTo < upTo; ++countedTo)
      if (s[countedTo] == '\n') {
        ++countedLines;
        lastNewline = countedTo;
      }
    return countedLines;
  };
  while (i <= s.size()) {
    size_t open = s.find('{', i);
    while (open != std::string_view::npos && open + 1 < s.size() && s[open + 1] != '{' &&
           s[open + 1] != '%' && s[open + 1] != '#')
      open = s.find('{', open + 1);
    if (open + 1 >= s.size())
      open = std::string_view::npos;
    std::string text(s.substr(i, open == std::string_view::npos ? std::string_view::npos : open - i));
    if (stripNextWhitespace) {
      size_t k = 0;
      while (k < text.size() && std::isspace(static_cast<unsigned char>(text[k])))
        ++k;
      text.erase(0, k);
    } else if (trimNextNewline) {
      if (text.rfind("\r\n", 0) == 0)
        text.erase(0, 2);
      else if (!text.empty() && text[0] == '\n')
        text.erase(0, 1);
    }
    trimNextNewline = stripNextWhitespace = false;
    if (open == std::string_view::npos) {
      if (!text.empty())
        out.push_back({Tag::Text, text, line});
      break;
    }
    char kind = s[open + 1];
    char closeChar = kind == '{' ? '}' : kind == '%' ? '%' : '#';
    size_t innerStart = open + 2;
    bool leftDash = innerStart < s.size() && s[innerStart] == '-';
    bool leftPlus = innerStart < s.size() && s[innerStart] == '+';
    if (leftDash || leftPlus)
      ++innerStart;
    // The end of the tag, outside string literals.
    size_t j = innerStart;
    char quote = 0;
    size_t close = std::string_view::npos;
    for (; j + 1 < s.size(); ++j) {
      char c = s[j];
      if (quote) {
        if (c == '\\')
          ++j;
        else if (c == quote)
          quote = 0;
        continue;
      }
      if ((c == '\'' || c == '"') && kind != '#') {
        quote = c;
        continue;
      }
      if (c == closeChar && s[j + 1] == '}') {
        close = j;
        break;
      }
    }
    int tagLine = lineOf(open);
    if (close == std::string_view::npos)
      throw RenderError{name + ": line " + std::to_string(tagLine) + ": unclosed tag"};
    bool rightDash = close > innerStart && s[close - 1] == '-';
    bool rightPlus = close > innerStart && s[close - 1] == '+';
    size_t innerEnd = rightDash || rightPlus ? close - 1 : close;
    bool block = kind == '%' || kind == '#';
    if (leftDash) {
      size_t k = text.size();
      while (k > 0 && std::isspace(static_cast<unsigned char>(text[k - 1])))
        --k;
      text.resize(k);
    } else if (block && !leftPlus) {
      // lstrip_blocks: blanks between the start of the tag's line (in the
      // source) and the tag go, if nothing else is on that line before it.
      // (lineOf(open) above counted up to the tag.) A line that starts
      // before the text does holds the previous tag: not blanks.
      size_t lineStart = lastNewline == std::string_view::npos ? 0 : lastNewline + 1;
      bool blanks = lineStart >= i;
      for (size_t k = lineStart; blanks && k < open; ++k)
        if (s[k] != ' ' && s[k] != '\t')
          blanks = false;
      if (blanks && open - lineStart <= text.size())
        text.resize(text.size() - (open - lineStart));
    }
    if (!text.empty())
      out.push_back({Tag::Text, text, line});
    line = tagLine;
    if (kind != '#')
      out.push_back({kind == '{' ? Tag::Output : Tag::Statement,
                     std::string(s.substr(innerStart, innerEnd - innerStart)), tagLine});
    stripNextWhitespace = rightDash;
    trimNextNewline = block && !rightDash && !rightPlus;
    i = close + 2;
  }
  return out;
}

class TemplateParser {
public:
  TemplateParser(std::vector<Tag> tags, std::string name)
      : tags_(std::move(tags)), name_(std::move(name)) {}

  NodeP parseAll() {
    NodeP root = block({});
    if (pos_ < tags_.size())
      fail(tags_[pos_].line, "unexpected '" + firstWord(tags_[pos_].content) + "'");
    return root;
  }

private:
  static std::string firstWord(const std::string &s) {
    size_t a = s.find_first_not_of(" \t\r\n");
    if (a == std::string::npos)
      return "";
    size_t b = s.find_first_of(" \t\r\n(", a);
    return s.substr(a, b == std::string::npos ? std::string::npos : b - a);
  }
  [[noreturn]] void fail(int line, const std::string &what) const {
    throw RenderError{name_ + ": line " + std::to_string(line) + ": " + what};
  }
  std::vector<Token> tokens(const Tag &t, size_t skip) {
    std::vector<Token> out;
    std::string error;
    std::string content = t.content;
    if (!lexExpr(std::string_view(content).substr(skip), out, error))
      fail(t.line, error);
    return out;
  }
  ExprP exprOf(const Tag &t, size_t skip) {
    ExprParser p(tokens(t, skip), t.line);
    try {
      ExprP e = p.expression();
      if (!p.atEnd())
        p.fail("unexpected token");
      return e;
    } catch (const RenderError &e) {
      throw RenderError{name_ + ": " + e.message};
    }
  }

  // Statements until one whose first word is in `until` (left unconsumed).
  NodeP block(const std::vector<std::string> &until, int depth = 0) {
    if (depth > 64)
      fail(pos_ < tags_.size() ? tags_[pos_].line : 0, "blocks nested too deeply");
    auto node = std::make_shared<Node>();
    node->kind = Node::Block;
    while (pos_ < tags_.size()) {
      const Tag &t = tags_[pos_];
      if (t.kind == Tag::Text) {
        auto n = std::make_shared<Node>();
        n->kind = Node::Text;
        n->text = t.content;
        node->children.push_back(n);
        ++pos_;
        continue;
      }
      if (t.kind == Tag::Output) {
        auto n = std::make_shared<Node>();
        n->kind = Node::Output;
        n->expr = exprOf(t, 0);
        n->line = t.line;
        node->children.push_back(n);
        ++pos_;
        continue;
      }
      std::string word = firstWord(t.content);
      if (std::find(until.begin(), until.end(), word) != until.end())
        return node;
      size_t skip = t.content.find(word) + word.size();
      if (word == "if") {
        node->children.push_back(ifStatement(depth));
      } else if (word == "for") {
        node->children.push_back(forStatement(depth));
      } else if (word == "set") {
        auto n = std::make_shared<Node>();
        n->kind = Node::Set;
        n->line = t.line;
        std::vector<Token> toks = tokens(t, skip);
        // set NAME[.ATTR] = expression
        size_t eq = 0;
        while (eq < toks.size() && !(toks[eq].kind == Token::Op && toks[eq].text == "="))
          ++eq;
        if (eq == toks.size() || eq == 0)
          fail(t.line, "expected 'set name = value' (block sets are not supported)");
        std::string target;
        for (size_t k = 0; k < eq; ++k)
          target += toks[k].text;
        if (target.find(',') != std::string::npos)
          fail(t.line, "tuple assignment in 'set' is not supported");
        n->targets = {target};
        std::vector<Token> rest(toks.begin() + long(eq) + 1, toks.end());
        ExprParser p(std::move(rest), t.line);
        try {
          n->expr = p.expression();
          if (!p.atEnd())
            p.fail("unexpected token");
        } catch (const RenderError &e) {
          throw RenderError{name_ + ": " + e.message};
        }
        node->children.push_back(n);
        ++pos_;
      } else if (word == "break" || word == "continue") {
        auto n = std::make_shared<Node>();
        n->kind = word == "break" ? Node::Break : Node::Continue;
        node->children.push_back(n);
        ++pos_;
      } else if (word == "generation") {
        // transformers' assistant-mask marker: renders its body.
        ++pos_;
        node->children.push_back(block({"endgeneration"}, depth + 1));
        expect("endgeneration");
      } else {
        fail(t.line, "'" + word + "' is not supported in chat templates");
      }
    }
    if (!until.empty())
      fail(tags_.empty() ? 0 : tags_.back().line, "missing '" + until.back() + "'");
    return node;
  }
  void expect(const std::string &word) {
    if (pos_ >= tags_.size() || tags_[pos_].kind != Tag::Statement ||
        firstWord(tags_[pos_].content) != word)
      fail(pos_ < tags_.size() ? tags_[pos_].line : 0, "expected '" + word + "'");
    ++pos_;
  }
  NodeP ifStatement(int depth) {
    auto n = std::make_shared<Node>();
    n->kind = Node::If;
    n->line = tags_[pos_].line;
    ExprP cond = exprOf(tags_[pos_], tags_[pos_].content.find("if") + 2);
    ++pos_;
    while (true) {
      NodeP body = block({"elif", "else", "endif"}, depth + 1);
      n->branches.push_back({cond, body});
      if (pos_ >= tags_.size())
        fail(n->line, "missing 'endif'");
      std::string w = firstWord(tags_[pos_].content);
      if (w == "elif") {
        cond = exprOf(tags_[pos_], tags_[pos_].content.find("elif") + 4);
        ++pos_;
      } else if (w == "else") {
        ++pos_;
        n->branches.push_back({nullptr, block({"endif"}, depth + 1)});
        expect("endif");
        return n;
      } else {
        ++pos_; // endif
        return n;
      }
    }
  }
  NodeP forStatement(int depth) {
    const Tag &t = tags_[pos_];
    auto n = std::make_shared<Node>();
    n->kind = Node::For;
    n->line = t.line;
    std::vector<Token> toks = tokens(t, t.content.find("for") + 3);
    size_t k = 0;
    while (k < toks.size() && !(toks[k].kind == Token::Name && toks[k].text == "in")) {
      if (toks[k].kind == Token::Name)
        n->targets.push_back(toks[k].text);
      else if (!(toks[k].kind == Token::Op && (toks[k].text == "," || toks[k].text == "(" ||
                                              toks[k].text == ")")))
        fail(t.line, "expected 'for name[, name] in ...'");
      ++k;
    }
    if (k == toks.size() || n->targets.empty())
      fail(t.line, "expected 'for name in ...'");
    std::vector<Token> rest(toks.begin() + long(k) + 1, toks.end());
    ExprParser p(std::move(rest), t.line);
    try {
      // The iterable stops before a trailing "if" (a loop filter), which
      // the conditional expression must not swallow.
      n->expr = p.orExpr(0);
      if (p.isName("if")) {
        p.next();
        n->filter = p.expression();
      }
      if (p.isName("recursive"))
        p.fail("recursive loops are not supported");
      if (!p.atEnd())
        p.fail("unexpected token");
    } catch (const RenderError &e) {
      throw RenderError{name_ + ": " + e.message};
    }
    ++pos_;
    n->body = block({"else", "endfor"}, depth + 1);
    if (pos_ < tags_.size() && firstWord(tags_[pos_].content) == "else") {
      ++pos_;
      n->orElse = block({"endfor"}, depth + 1);
    }
    expect("endfor");
    return n;
  }

  std::vector<Tag> tags_;
  std::string name_;
  size_t pos_ = 0;
};

} // namespace

NodeP parseTemplate(std::string_view source, const std::string &name) {
  // Jinja drops one newline at the very end of a template.
  if (!source.empty() && source.back() == '\n')
    source.remove_suffix(source.size() > 1 && source[source.size() - 2] == '\r' ? 2 : 1);
  TemplateParser p(lexTemplate(source, name), name);
  return p.parseAll();
}

} // namespace weft::chat::detail
