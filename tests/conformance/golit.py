"""A pragmatic parser of the Go that Volcano's table-driven scheduler tests are written in.

It reads what those tests hold: a file's functions, the ``name := expr`` statements in a test
function's body, and expressions made of composite literals, calls, selectors, index
expressions and unary ``&``/``-``. Everything else in a body (loops, ``if``, closures) is kept
as tokens (:class:`Block`) so a caller can look inside it. It is not a Go compiler: it only has
to read these test tables faithfully, and it fails loudly (:class:`GoSyntaxError`) on what it
does not know instead of guessing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


class GoSyntaxError(ValueError):
    """Source the parser does not read."""


@dataclass(frozen=True)
class Tok:
    kind: str  # "ident", "int", "float", "string", "char", "op", ";"
    text: str
    line: int


_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r]+)
  | (?P<nl>\n)
  | (?P<lcomment>//[^\n]*)
  | (?P<bcomment>/\*.*?\*/)
  | (?P<raw>`[^`]*`)
  | (?P<string>"(?:\\.|[^"\\\n])*")
  | (?P<char>'(?:\\.|[^'\\\n])+')
  | (?P<float>\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | (?P<int>0[xX][0-9a-fA-F_]+|\d[\d_]*)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\.\.\.|:=|<-|&&|\|\||==|!=|<=|>=|\+\+|--|[-+*/%&|^<>=!(){}\[\],;:.~])
    """,
    re.S | re.X,
)

# After these, a newline ends the statement (Go's automatic semicolon rule).
_ENDS_LINE = {")", "]", "}", "++", "--"}
_KEYWORDS_ENDING = {"break", "continue", "fallthrough", "return"}


def tokenize(src: str) -> list[Tok]:
    """Go tokens, with the semicolons Go inserts at line ends."""
    out: list[Tok] = []
    pos, line = 0, 1
    while pos < len(src):
        m = _TOKEN.match(src, pos)
        if m is None:
            raise GoSyntaxError(f"line {line}: cannot read {src[pos : pos + 20]!r}")
        kind = m.lastgroup or ""
        text = m.group()
        pos = m.end()
        newlines = text.count("\n")
        if kind in ("nl", "bcomment") and newlines:
            if out and _needs_semicolon(out[-1]):
                out.append(Tok(";", ";", line))
        elif kind == "raw":
            out.append(Tok("string", text, line))
        elif kind not in ("ws", "lcomment", "nl", "bcomment"):
            out.append(
                Tok("op" if kind == "op" and text != ";" else (";" if text == ";" else kind), text, line)
            )
        line += newlines
    if out and _needs_semicolon(out[-1]):
        out.append(Tok(";", ";", line))
    return out


def _needs_semicolon(t: Tok) -> bool:
    if t.kind in ("int", "float", "string", "char"):
        return True
    if t.kind == "ident":
        return True if t.text not in _GO_KEYWORDS else t.text in _KEYWORDS_ENDING
    return t.kind == "op" and t.text in _ENDS_LINE


_GO_KEYWORDS = {
    "break", "case", "chan", "const", "continue", "default", "defer", "else", "fallthrough", "for",
    "func", "go", "goto", "if", "import", "interface", "map", "package", "range", "return",
    "select", "struct", "switch", "type", "var",
}  # fmt: skip


# --- the expression tree -------------------------------------------------------------------


@dataclass(frozen=True)
class Ident:
    name: str  # "foo" or a qualified "pkg.Name"


@dataclass(frozen=True)
class Lit:
    value: Any  # int, float, str


@dataclass(frozen=True)
class TypeExpr:
    text: str  # the type as written: "[]*v1.Pod", "map[string]int32", "struct{...}"
    fields: tuple[tuple[str, str], ...] = ()  # a struct type's (name, type); embedded: (type, type)


@dataclass(frozen=True)
class Composite:
    type: TypeExpr | None  # None: elided inside an outer literal
    elements: tuple[tuple[Any, Any], ...]  # (key or None, value)


@dataclass(frozen=True)
class Call:
    func: Any
    args: tuple[Any, ...]
    ellipsis: bool = False
    type_args: tuple[TypeExpr, ...] = ()


@dataclass(frozen=True)
class Selector:
    base: Any
    name: str


@dataclass(frozen=True)
class Index:
    base: Any
    index: Any


@dataclass(frozen=True)
class Unary:
    op: str
    operand: Any


@dataclass(frozen=True)
class Binary:
    op: str
    left: Any
    right: Any


@dataclass(frozen=True)
class Tuple:
    """``a, b`` on the right of an assignment."""

    items: tuple[Any, ...]


@dataclass(frozen=True)
class Block:
    """Tokens the parser keeps unread: a func literal, a statement it does not model."""

    tokens: tuple[Tok, ...]


@dataclass
class Statement:
    """``names := value`` / ``names = value`` (value None for other statements, kept as tokens)."""

    names: tuple[str, ...]
    value: Any
    tokens: tuple[Tok, ...] = ()
    line: int = 0
    index: Any = None  # ``name[index] = value``: a map entry set


@dataclass
class Func:
    name: str
    body: list[Statement] = field(default_factory=list)
    params: tuple[str, ...] = ()


_BINARY_PREC = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3,
                "+": 4, "-": 4, "|": 4, "^": 4, "*": 5, "/": 5, "%": 5, "&": 5}  # fmt: skip


class Parser:
    """Recursive descent over the tokens of one file."""

    def __init__(self, toks: list[Tok]) -> None:
        self.toks = toks
        self.i = 0

    # -- helpers
    def peek(self, k: int = 0) -> Tok:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else Tok("eof", "", -1)

    def at(self, text: str, k: int = 0) -> bool:
        t = self.peek(k)
        return t.text == text and t.kind in ("op", ";", "ident")

    def take(self, text: str | None = None) -> Tok:
        t = self.peek()
        if text is not None and t.text != text:
            raise GoSyntaxError(f"line {t.line}: expected {text!r}, found {t.text!r}")
        self.i += 1
        return t

    def skip_semis(self) -> None:
        while self.peek().kind == ";":
            self.i += 1

    def balanced(self, open_: str, close: str) -> tuple[Tok, ...]:
        """The tokens from ``open_`` to its matching ``close`` (both included)."""
        start = self.i
        self.take(open_)
        depth = 1
        while depth:
            t = self.take()
            if t.kind == "eof":
                raise GoSyntaxError(f"unbalanced {open_!r} from line {self.toks[start].line}")
            if t.kind == "op" and t.text == open_:
                depth += 1
            elif t.kind == "op" and t.text == close:
                depth -= 1
        return tuple(self.toks[start : self.i])

    # -- file level
    def functions(self) -> list[Func]:
        """Every top-level ``func Name(...) {...}`` with its body's statements; the file's
        ``var`` declarations come first, as a function named ``""``."""
        out: list[Func] = []
        top = Func("")
        depth = 0
        while self.peek().kind != "eof":
            t = self.peek()
            if depth == 0 and t.text == "var" and t.kind == "ident":
                self.take()
                if self.at("("):
                    block = self.balanced("(", ")")
                    top.body.extend(Parser([*block[1:-1], Tok(";", ";", t.line)]).statements())
                else:
                    top.body.append(self.statement())
                continue
            if depth == 0 and t.text == "func" and t.kind == "ident" and self.peek(1).kind == "ident":
                self.take()
                name = self.take().text
                if self.at("["):
                    self.balanced("[", "]")
                params = param_names(self.balanced("(", ")")[1:-1])
                while not self.at("{"):  # the result types
                    self.take()
                body = self.balanced("{", "}")
                stmts = Parser([*body[1:-1], Tok(";", ";", body[-1].line)]).statements()
                out.append(Func(name, stmts, params))
                continue
            if t.kind == "op" and t.text in "({[":
                depth += 1
            elif t.kind == "op" and t.text in ")}]":
                depth -= 1
            self.take()
        return [top, *out]

    def statements(self) -> list[Statement]:
        out: list[Statement] = []
        while True:
            self.skip_semis()
            if self.peek().kind == "eof":
                return out
            out.append(self.statement())

    def statement(self) -> Statement:
        start = self.i
        line = self.peek().line
        names: list[str] = []
        j = 0
        while self.peek(j).kind == "ident" and self.peek(j).text not in _GO_KEYWORDS:
            name = self.peek(j).text
            while self.at(".", j + 1) and self.peek(j + 2).kind == "ident":  # x.Spec.Parent = ...
                j += 2
                name += "." + self.peek(j).text
            names.append(name)
            if self.at(",", j + 1):
                j += 2
                continue
            break
        if len(names) == 1 and self.at("[", j + 1):  # n1.Labels["kubernetes.io/hostname"] = "node1"
            self.i += j + 1
            try:
                self.take("[")
                index = self.expr()
                self.take("]")
                if self.at("=") and self.peek().kind == "op":
                    self.take()
                    value = self.expr()
                    if self.peek().kind == ";" or self.peek().kind == "eof":
                        return Statement(tuple(names), value, tuple(self.toks[start : self.i]), line, index)
            except GoSyntaxError:
                pass
            self.i = start
        if names and self.peek(j + 1).text in (":=", "=") and self.peek(j + 1).kind == "op":
            self.i += j + 2
            try:
                value = self.expr()
                if self.at(","):  # a, b := x, y
                    items = [value]
                    while self.at(","):
                        self.take()
                        items.append(self.expr())
                    value = Tuple(tuple(items))
            except GoSyntaxError:
                self.i = start
                return Statement((), None, self.raw_statement(), line)
            if self.peek().kind == ";" or self.peek().kind == "eof":
                return Statement(tuple(names), value, tuple(self.toks[start : self.i]), line)
            self.i = start
        return Statement((), None, self.raw_statement(), line)

    def raw_statement(self) -> tuple[Tok, ...]:
        """The tokens up to the end of the statement, braces balanced (``for``, ``if`` ...)."""
        start = self.i
        depth = 0
        while True:
            t = self.peek()
            if t.kind == "eof":
                break
            if t.kind == "op" and t.text in "({[":
                depth += 1
            elif t.kind == "op" and t.text in ")}]":
                depth -= 1
            elif t.kind == ";" and depth == 0:
                break
            self.take()
        return tuple(self.toks[start : self.i])

    # -- expressions
    def expr(self, prec: int = 0) -> Any:
        left = self.unary()
        while True:
            t = self.peek()
            p = _BINARY_PREC.get(t.text) if t.kind == "op" else None
            if p is None or p <= prec:
                return left
            self.take()
            left = Binary(t.text, left, self.expr(p))

    def unary(self) -> Any:
        t = self.peek()
        if t.kind == "op" and t.text in ("&", "-", "+", "!", "*", "^"):
            self.take()
            return Unary(t.text, self.unary())
        return self.postfix(self.primary())

    def primary(self) -> Any:
        t = self.peek()
        if t.kind == "int":
            self.take()
            return Lit(int(t.text.replace("_", ""), 0))
        if t.kind == "float":
            self.take()
            return Lit(float(t.text))
        if t.kind == "string":
            self.take()
            return Lit(_go_string(t.text))
        if t.kind == "char":
            self.take()
            return Lit(_go_string('"' + t.text[1:-1] + '"'))
        if t.kind == "op" and t.text == "(":
            self.take()
            e = self.expr()
            self.take(")")
            return e
        if t.kind == "op" and t.text == "[":
            return self.composite_or_type(self.type_expr())
        if t.kind == "op" and t.text == "{":  # an elided composite literal
            return Composite(None, self.elements())
        if t.kind == "ident" and t.text in ("map", "struct"):
            return self.composite_or_type(self.type_expr())
        if t.kind == "ident" and t.text == "func":
            start = self.i
            self.take()
            self.balanced("(", ")")
            while not self.at("{"):
                if self.at("("):
                    self.balanced("(", ")")
                else:
                    self.take()
            self.balanced("{", "}")
            return Block(tuple(self.toks[start : self.i]))
        if t.kind == "ident":
            self.take()
            name = t.text
            while self.at(".") and self.peek(1).kind == "ident":
                self.take()
                name += "." + self.take().text
            return Ident(name)
        raise GoSyntaxError(f"line {t.line}: unexpected {t.text!r}")

    def postfix(self, e: Any) -> Any:
        while True:
            if self.at("."):
                self.take()
                if self.at("("):  # a type assertion x.(T)
                    self.balanced("(", ")")
                    continue
                e = Selector(e, self.take().text)
            elif self.at("("):
                e = self.call(e, ())
            elif self.at("["):
                self.take()
                if self.at("]"):
                    raise GoSyntaxError(f"line {self.peek().line}: empty index")
                idx = self.expr()
                if self.at(","):  # generic instantiation with several type arguments
                    raise GoSyntaxError(f"line {self.peek().line}: generic types")
                self.take("]")
                if self.at("(") and isinstance(idx, Ident):  # sets.New[string](...)
                    e = self.call(e, (TypeExpr(idx.name),))
                else:
                    e = Index(e, idx)
            elif self.at("{") and _may_be_type(e):
                e = Composite(TypeExpr(_type_text(e)), self.elements())
            else:
                return e

    def call(self, func: Any, type_args: tuple[TypeExpr, ...]) -> Call:
        self.take("(")
        args: list[Any] = []
        ellipsis = False
        while not self.at(")"):
            self.skip_semis()
            if self.at(")"):
                break
            args.append(self.expr())
            if self.at("..."):
                self.take()
                ellipsis = True
            if self.at(","):
                self.take()
            self.skip_semis()
        self.take(")")
        return Call(func, tuple(args), ellipsis, type_args)

    def elements(self) -> tuple[tuple[Any, Any], ...]:
        self.take("{")
        out: list[tuple[Any, Any]] = []
        while True:
            self.skip_semis()
            if self.at("}"):
                self.take()
                return tuple(out)
            first = self.expr()
            if self.at(":"):
                self.take()
                self.skip_semis()
                out.append((first, self.expr()))
            else:
                out.append((None, first))
            self.skip_semis()
            if self.at(","):
                self.take()
            elif not self.at("}"):
                self.skip_semis()
                if not self.at("}"):
                    raise GoSyntaxError(
                        f"line {self.peek().line}: expected ',' or '}}', found {self.peek().text!r}"
                    )

    def composite_or_type(self, ty: TypeExpr) -> Any:
        if self.at("{"):
            return Composite(ty, self.elements())
        if self.at("("):  # a conversion: []byte(x)
            return self.call(ty, ())
        return ty

    def type_expr(self) -> TypeExpr:
        """A type as text; a struct type keeps its fields."""
        t = self.peek()
        if self.at("["):
            self.take()
            size = ""
            while not self.at("]"):
                size += self.take().text
            self.take("]")
            return TypeExpr(f"[{size}]" + self.type_expr().text)
        if self.at("*"):
            self.take()
            inner = self.type_expr()
            return TypeExpr("*" + inner.text, inner.fields)
        if t.text == "map":
            self.take()
            self.take("[")
            key = self.type_expr()
            self.take("]")
            return TypeExpr(f"map[{key.text}]{self.type_expr().text}")
        if t.text == "struct":
            self.take()
            body = self.balanced("{", "}")
            return TypeExpr("struct{...}", _struct_fields(body[1:-1]))
        if t.text == "func":
            self.take()
            self.balanced("(", ")")
            if self.at("("):
                self.balanced("(", ")")
            elif self.peek().kind == "ident" or self.at("*") or self.at("["):
                self.type_expr()
            return TypeExpr("func")
        if t.text == "interface":
            self.take()
            self.balanced("{", "}")
            return TypeExpr("interface{}")
        if t.kind == "ident":
            self.take()
            name = t.text
            while self.at(".") and self.peek(1).kind == "ident":
                self.take()
                name += "." + self.take().text
            if self.at("["):  # a generic type: sets.Set[string]
                args = self.balanced("[", "]")
                name += "".join(a.text for a in args)
            return TypeExpr(name)
        raise GoSyntaxError(f"line {t.line}: cannot read a type at {t.text!r}")


def param_names(toks: tuple[Tok, ...]) -> tuple[str, ...]:
    """``a, b string, c int`` -> ("a", "b", "c"): the first identifier of each comma part."""
    out: list[str] = []
    depth = 0
    part: list[Tok] = []
    for t in (*toks, Tok("op", ",", 0)):
        if t.kind == "op" and t.text in "([{":
            depth += 1
        elif t.kind == "op" and t.text in ")]}":
            depth -= 1
        if t.kind == "op" and t.text == "," and depth == 0:
            if part and part[0].kind == "ident":
                out.append(part[0].text)
            part = []
        else:
            part.append(t)
    return tuple(out)


def _struct_fields(toks: tuple[Tok, ...]) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    line: list[Tok] = []
    for t in (*toks, Tok(";", ";", 0)):
        if t.kind == ";":
            if line:
                texts = [x.text for x in line]
                if (
                    len(texts) == 1
                    or (texts[0] == "*" and "." in "".join(texts))
                    or (len(texts) == 3 and texts[1] == ".")
                ):
                    ty = "".join(texts)
                    out.append((ty.lstrip("*").split(".")[-1], ty))
                else:
                    out.append((texts[0], "".join(texts[1:])))
            line = []
        else:
            line.append(t)
    return tuple(out)


def _may_be_type(e: Any) -> bool:
    return isinstance(e, Ident | TypeExpr) or (isinstance(e, Index) and isinstance(e.base, Ident))


def _type_text(e: Any) -> str:
    if isinstance(e, Ident):
        return e.name
    if isinstance(e, TypeExpr):
        return e.text
    return f"{_type_text(e.base)}[...]"


_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "r": "\r", "0": "\0"}


def _go_string(text: str) -> str:
    if text.startswith("`"):
        return text[1:-1]
    body = text[1:-1]
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)


def parse_functions(src: str) -> list[Func]:
    """The top-level functions of a Go file with their parsed bodies."""
    return Parser(tokenize(src)).functions()
