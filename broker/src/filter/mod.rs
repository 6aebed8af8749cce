//! SQL92 property filters (Java's `filter` module, `ExpressionType.SQL92`): a consumer subscribes
//! with an expression over message properties, e.g. `a > 5 AND b IN ('x', 'y')`.
//!
//! [`compile`] parses ([`parse`], the syntax) and builds the expression with the checks Java's
//! parser actions make (`ComparisonExpression.checkLessThanOperand`, BETWEEN bounds, literal
//! ranges...), so what Java refuses at CHECK_CLIENT_CONFIG is refused here too. [`Expr::matches`]
//! evaluates it against a message's properties with Java's semantics: three-valued logic (a missing
//! property is NULL, and NULL is not a match), the same numeric promotions and string conversions
//! (`__compare` with `convertStringExpressions`, which Java's parser always turns on), and an
//! evaluation error (a string that is not a number compared with a number) meaning "no match".

mod broker;
mod cache;
pub mod parse;

pub use broker::{check_subscription, pull_filter, pull_filter_shared, subscription_of_pull};
pub use cache::compile_cached;

use std::cmp::Ordering;

use parse::{CompareOp, Literal, Syntax, TextOp};

/// Java's `ExpressionType.SQL92`.
pub const SQL92: &str = "SQL92";

/// Why an expression does not compile. Its text is what Java answers as the remark: the message of
/// `MQFilterException`, which is its cause's `toString()` (a JavaCC `ParseException` or
/// `TokenMgrError` for the syntax, a `RuntimeException` from the parser's checks). JavaCC's list
/// of expected tokens is left out.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{remark}")]
pub struct FilterError {
    pub remark: String,
    /// Refused by a bound of ours on the expression's size (Java has none), not by Java's rules.
    pub over_limit: bool,
}

impl FilterError {
    fn semantic(detail: impl std::fmt::Display) -> FilterError {
        FilterError { remark: format!("java.lang.RuntimeException: {detail}"), over_limit: false }
    }

    fn syntax(remark: String) -> FilterError {
        FilterError { remark, over_limit: false }
    }

    fn too_large(detail: String) -> FilterError {
        FilterError { remark: format!("the SQL92 expression is too large: {detail}"), over_limit: true }
    }
}

fn refuse<T>(detail: impl std::fmt::Display) -> Result<T, FilterError> {
    Err(FilterError::semantic(detail))
}

/// A value during evaluation (Java's boxed types; NULL is `None`).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Bool(bool),
    Int(i32),
    Long(i64),
    Double(f64),
    Str(String),
}

/// A compiled expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Const(Option<Value>),
    Property(String),
    Negate(Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    /// A property where a boolean is expected (`WHERE flag`).
    BoolCast(Box<Expr>),
    Equal(Box<Expr>, Box<Expr>),
    Compare(CompareOp, Box<Expr>, Box<Expr>),
    /// Looked up by hash (Java's `InExpression` hashes lists of 5 or more), in the written order.
    In {
        property: String,
        list: indexmap::IndexSet<String>,
        not: bool,
    },
    Text {
        op: TextOp,
        not: bool,
        value: Box<Expr>,
        search: String,
    },
}

/// Java's `ExpressionType.isTagType`: no type, empty, or TAG.
pub fn is_tag_type(expression_type: &str) -> bool {
    expression_type.is_empty() || expression_type == "TAG"
}

/// Whether a stored record (a commit-log entry, as a pull returns it) matches: its properties
/// evaluated. A record that does not decode does not match.
pub fn record_matches(expr: &Expr, record: &[u8]) -> bool {
    match store::message::record::decode_record(record, false) {
        Ok(store::message::record::RecordAt::Record(r)) => expr.matches(&store::message::properties::parse(r.properties)),
        _ => false,
    }
}

/// Bounds on what an expression from the network may make us do. The parser recurses per
/// parenthesis and unary operator, building and evaluation per operator: Java's parser would end in
/// a StackOverflowError, which it reports as a bad expression; a Rust stack overflow would abort
/// the broker, so deeper expressions are refused first. Java has no bound on the size: ours keep
/// what one subscription costs to compile and to keep (cached, and held with each parked pull) to
/// a few MiB.
pub const MAX_NESTING: usize = 128;
pub const MAX_OPERATORS: usize = 1024;
/// The whole expression's text, comments and blanks included.
pub const MAX_EXPRESSION_BYTES: usize = 256 * 1024;
/// String literals in all (each element of an IN list is one).
pub const MAX_LITERALS: usize = 10_000;
/// Bytes inside string literals, in all.
pub const MAX_LITERAL_BYTES: usize = 128 * 1024;

/// Counts, outside string literals, what nests (`(`, `+`, `-`, NOT) and what chains (AND, OR);
/// inside them, the literals and their bytes.
fn too_complex(text: &str) -> Option<String> {
    if text.len() > MAX_EXPRESSION_BYTES {
        return Some(format!("{} bytes, more than {MAX_EXPRESSION_BYTES}", text.len()));
    }
    let (mut nesting, mut operators, mut in_string) = (0usize, 0usize, false);
    let (mut literals, mut literal_bytes) = (0usize, 0usize);
    let mut word = String::new();
    let end_word = |word: &mut String, operators: &mut usize, nesting: &mut usize| {
        match word.to_ascii_uppercase().as_str() {
            "AND" | "OR" | "BETWEEN" | "IN" | "IS" => *operators += 1,
            "NOT" => *nesting += 1,
            _ => {}
        }
        word.clear();
    };
    for c in text.chars() {
        if in_string {
            // A quote doubled inside a literal ends it and opens the next: counted as two, which
            // only errs on the side of the bound.
            in_string = c != '\'';
            literal_bytes += c.len_utf8();
            continue;
        }
        if c.is_ascii_alphanumeric() || c == '_' || c == '$' {
            word.push(c);
            continue;
        }
        end_word(&mut word, &mut operators, &mut nesting);
        match c {
            '\'' => {
                in_string = true;
                literals += 1;
            }
            '(' | '+' | '-' => nesting += 1,
            '=' | '<' | '>' => operators += 1,
            _ => {}
        }
    }
    end_word(&mut word, &mut operators, &mut nesting);
    if nesting > MAX_NESTING {
        return Some(format!("the expression nests more than {MAX_NESTING} parentheses and unary operators"));
    }
    if literals > MAX_LITERALS {
        return Some(format!("{literals} string literals (IN elements among them), more than {MAX_LITERALS}"));
    }
    if literal_bytes > MAX_LITERAL_BYTES {
        return Some(format!("{literal_bytes} bytes of string literals, more than {MAX_LITERAL_BYTES}"));
    }
    (operators > MAX_OPERATORS).then(|| format!("the expression has more than {MAX_OPERATORS} operators"))
}

/// Parses and builds `text` as Java's `SelectorParser.parse` does.
pub fn compile(text: &str) -> Result<Expr, FilterError> {
    if let Some(why) = too_complex(text) {
        return Err(FilterError::too_large(why));
    }
    let syntax = parse::parse(text).map_err(FilterError::syntax)?;
    build(syntax)
}

// ---------------------------------------------------------------------------------------------
// building, with Java's checks

impl Expr {
    /// Java's `BooleanExpression`: what may stand where a condition is expected.
    fn is_boolean(&self) -> bool {
        match self {
            Expr::Const(v) => matches!(v, None | Some(Value::Bool(_))),
            Expr::Property(_) | Expr::Negate(_) => false,
            _ => true,
        }
    }
}

fn b(e: Expr) -> Box<Expr> {
    Box::new(e)
}

fn as_boolean(e: Expr) -> Result<Expr, FilterError> {
    match e {
        e if e.is_boolean() => Ok(e),
        Expr::Property(_) => Ok(Expr::BoolCast(b(e))),
        e => refuse(format!("Expression will not result in a boolean value: {e:?}")),
    }
}

/// `checkLessThanOperand`: only numbers and non-boolean expressions can be ordered.
fn orderable(e: Expr) -> Result<Expr, FilterError> {
    match &e {
        Expr::Const(Some(Value::Int(_) | Value::Long(_) | Value::Double(_))) => Ok(e),
        Expr::Const(_) => refuse(format!("Value '{e:?}' cannot be compared.")),
        e if e.is_boolean() => refuse(format!("Value '{e:?}' cannot be compared.")),
        _ => Ok(e),
    }
}

fn compare(op: CompareOp, l: Expr, r: Expr) -> Result<Expr, FilterError> {
    Ok(Expr::Compare(op, b(orderable(l)?), b(orderable(r)?)))
}

/// `createEqual`: NULL cannot be compared, and a boolean literal only with a boolean literal.
fn equal(l: Expr, r: Expr) -> Result<Expr, FilterError> {
    for side in [&l, &r] {
        if *side == Expr::Const(None) {
            return refuse("'NULL' cannot be compared.");
        }
    }
    if let (Expr::Const(Some(lv)), Expr::Const(Some(rv))) = (&l, &r) {
        if matches!(lv, Value::Bool(_)) && !matches!(rv, Value::Bool(_)) {
            return refuse(format!("'{lv:?}' cannot be compared with '{rv:?}'"));
        }
    }
    Ok(Expr::Equal(b(l), b(r)))
}

fn literal(l: Literal) -> Result<Expr, FilterError> {
    let value = match l {
        Literal::Str(s) => Value::Str(s),
        Literal::True => Value::Bool(true),
        Literal::False => Value::Bool(false),
        Literal::Null => return Ok(Expr::Const(None)),
        Literal::Decimal(text) => {
            let digits = text.trim_end_matches(['l', 'L']);
            let Ok(n) = digits.parse::<i64>() else { return refuse(format!("{text} is out of the range of a long")) };
            i32::try_from(n).map_or(Value::Long(n), Value::Int)
        }
        Literal::Float(text) => {
            let Ok(d) = text.parse::<f64>() else { return refuse(format!("{text} is not a number")) };
            if d.is_infinite() {
                return refuse(format!("{text} is greater than {}", f64::MAX));
            }
            // As Java's `createFloat`, which compares with Double.MIN_VALUE, the smallest positive
            // double: so `0.0` is refused.
            if d < f64::from_bits(1) {
                return refuse(format!("{text} is less than 4.9E-324"));
            }
            Value::Double(d)
        }
    };
    Ok(Expr::Const(Some(value)))
}

fn build(s: Syntax) -> Result<Expr, FilterError> {
    let top = build_expr(s)?;
    as_boolean(top)
}

fn build_expr(s: Syntax) -> Result<Expr, FilterError> {
    Ok(match s {
        Syntax::Or(l, r) => Expr::Or(b(as_boolean(build_expr(*l)?)?), b(as_boolean(build_expr(*r)?)?)),
        Syntax::And(l, r) => Expr::And(b(as_boolean(build_expr(*l)?)?), b(as_boolean(build_expr(*r)?)?)),
        Syntax::Equal(l, r) => equal(build_expr(*l)?, build_expr(*r)?)?,
        Syntax::NotEqual(l, r) => Expr::Not(b(equal(build_expr(*l)?, build_expr(*r)?)?)),
        Syntax::IsNull(v, not) => {
            let is_null = Expr::Equal(b(build_expr(*v)?), b(Expr::Const(None)));
            if not {
                Expr::Not(b(is_null))
            } else {
                is_null
            }
        }
        Syntax::Compare(op, l, r) => compare(op, build_expr(*l)?, build_expr(*r)?)?,
        Syntax::Text { op, not, value, search } => Expr::Text { op, not, value: b(build_expr(*value)?), search },
        Syntax::Between { not, value, low, high } => between(not, build_expr(*value)?, build_expr(*low)?, build_expr(*high)?)?,
        Syntax::In { not, value, list } => match build_expr(*value)? {
            Expr::Property(property) => Expr::In { property, list: list.into_iter().collect(), not },
            other => return refuse(format!("Expected a property for In expression, got: {other:?}")),
        },
        Syntax::Negate(e) => Expr::Negate(b(build_expr(*e)?)),
        Syntax::Not(e) => Expr::Not(b(as_boolean(build_expr(*e)?)?)),
        Syntax::Literal(l) => literal(l)?,
        Syntax::Property(p) => Expr::Property(p),
    })
}

/// `createBetween` / `createNotBetween`: constant bounds must be present and in order.
fn between(not: bool, value: Expr, low: Expr, high: Expr) -> Result<Expr, FilterError> {
    use CompareOp::*;
    if not {
        return Ok(Expr::Or(b(compare(Less, value.clone(), low)?), b(compare(Greater, value, high)?)));
    }
    if let (Expr::Const(lv), Expr::Const(hv)) = (&low, &high) {
        let (Some(lv), Some(hv)) = (lv, hv) else { return refuse("Illegal values of between, values can not be null!") };
        if java_compare(hv, lv).map_err(FilterError::semantic)? == Ordering::Less {
            return refuse(format!("Illegal values of between, left value({lv:?}) must less than or equal to right value({hv:?})"));
        }
    }
    Ok(Expr::And(b(compare(GreaterOrEqual, value.clone(), low)?), b(compare(LessOrEqual, value, high)?)))
}

// ---------------------------------------------------------------------------------------------
// evaluation

/// A property lookup (the message's properties).
pub trait Properties {
    fn property(&self, name: &str) -> Option<&str>;
}

impl<S: std::hash::BuildHasher> Properties for std::collections::HashMap<String, String, S> {
    fn property(&self, name: &str) -> Option<&str> {
        self.get(name).map(String::as_str)
    }
}

impl Properties for indexmap::IndexMap<String, String> {
    fn property(&self, name: &str) -> Option<&str> {
        self.get(name).map(String::as_str)
    }
}

/// An evaluation that Java would end with an exception (the message then does not match).
type Eval = Result<Option<Value>, String>;

impl Expr {
    /// Whether a message with these properties matches: TRUE only (NULL and errors do not).
    pub fn matches(&self, props: &impl Properties) -> bool {
        matches!(self.evaluate(props), Ok(Some(Value::Bool(true))))
    }

    pub fn evaluate(&self, props: &impl Properties) -> Eval {
        let truth = |b: bool| Ok(Some(Value::Bool(b)));
        match self {
            Expr::Const(v) => Ok(v.clone()),
            Expr::Property(name) => Ok(props.property(name).map(|v| Value::Str(v.to_owned()))),
            Expr::Negate(e) => Ok(match e.evaluate(props)? {
                Some(Value::Int(n)) => Some(Value::Int(n.wrapping_neg())),
                Some(Value::Long(n)) => Some(Value::Long(n.wrapping_neg())),
                Some(Value::Double(d)) => Some(Value::Double(-d)),
                _ => None,
            }),
            Expr::Or(l, r) => {
                let lv = as_bool(l.evaluate(props)?)?;
                if lv == Some(true) {
                    return truth(true);
                }
                let rv = as_bool(r.evaluate(props)?)?;
                match (lv, rv) {
                    (_, Some(true)) => truth(true),
                    (None, _) | (_, None) => Ok(None),
                    _ => truth(false),
                }
            }
            Expr::And(l, r) => {
                let lv = as_bool(l.evaluate(props)?)?;
                if lv == Some(false) {
                    return truth(false);
                }
                let rv = as_bool(r.evaluate(props)?)?;
                match (lv, rv) {
                    (_, Some(false)) => truth(false),
                    (None, _) | (_, None) => Ok(None),
                    _ => truth(true),
                }
            }
            Expr::Not(e) => Ok(as_bool(e.evaluate(props)?)?.map(|v| Value::Bool(!v))),
            Expr::BoolCast(e) => Ok(e.evaluate(props)?.map(|v| Value::Bool(v == Value::Bool(true)))),
            Expr::Equal(l, r) => match (l.evaluate(props)?, r.evaluate(props)?) {
                (None, None) => truth(true),
                (None, Some(_)) => Ok(None),
                (Some(_), None) => truth(false),
                (Some(lv), Some(rv)) if java_equals(&lv, &rv) => truth(true),
                (Some(lv), Some(rv)) => truth(java_compare(&lv, &rv)? == Ordering::Equal),
            },
            Expr::Compare(op, l, r) => {
                let Some(lv) = l.evaluate(props)? else { return Ok(None) };
                let Some(rv) = r.evaluate(props)? else { return Ok(None) };
                let ordering = match (&lv, &rv) {
                    // Java refuses to order strings, unless both read as numbers.
                    (Value::Str(a), Value::Str(b)) => match (java_double(a), java_double(b)) {
                        (Some(a), Some(b)) => java_double_cmp(a, b),
                        _ => return Err(format!("It's illegal to compare string by '>=', '>', '<', '<='. lv={a}, rv={b}")),
                    },
                    _ => java_compare(&lv, &rv)?,
                };
                truth(match op {
                    CompareOp::Greater => ordering == Ordering::Greater,
                    CompareOp::GreaterOrEqual => ordering != Ordering::Less,
                    CompareOp::Less => ordering == Ordering::Less,
                    CompareOp::LessOrEqual => ordering != Ordering::Greater,
                })
            }
            Expr::In { property, list, not } => match props.property(property) {
                None => Ok(None),
                Some(v) => truth(list.contains(v) ^ not),
            },
            Expr::Text { op, not, value, search } => {
                if search.is_empty() {
                    return truth(false);
                }
                let Some(Value::Str(v)) = value.evaluate(props)? else { return truth(false) };
                let found = match op {
                    TextOp::Contains => v.contains(search.as_str()),
                    TextOp::StartsWith => v.starts_with(search.as_str()),
                    TextOp::EndsWith => v.ends_with(search.as_str()),
                };
                truth(found ^ not)
            }
        }
    }
}

fn as_bool(v: Option<Value>) -> Result<Option<bool>, String> {
    match v {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(b)),
        Some(other) => Err(format!("{other:?} is not a boolean")),
    }
}

/// Java's `equals` of two boxed values: same type and value (Double by bits).
fn java_equals(l: &Value, r: &Value) -> bool {
    match (l, r) {
        (Value::Double(a), Value::Double(b)) => a.to_bits() == b.to_bits(),
        _ => l == r,
    }
}

/// Java's `Double.compare`: NaN above everything, -0.0 below 0.0.
fn java_double_cmp(a: f64, b: f64) -> Ordering {
    a.total_cmp(&b)
}

/// Java's `Double.valueOf(String)`, near enough: surrounding blanks, an optional `d`/`f` suffix,
/// `NaN` and `Infinity` spelt as Java spells them.
fn java_double(s: &str) -> Option<f64> {
    let t = s.trim_matches(|c: char| c <= ' ');
    let t = t.strip_suffix(['d', 'D', 'f', 'F']).filter(|r| r.ends_with(|c: char| c.is_ascii_digit() || c == '.')).unwrap_or(t);
    let unsigned = t.trim_start_matches(['+', '-']);
    if unsigned == "NaN" || unsigned == "Infinity" {
        return t.replace("Infinity", "inf").parse().ok();
    }
    if t.chars().any(|c| c.is_ascii_alphabetic() && c != 'e' && c != 'E') {
        return None;
    }
    t.parse().ok()
}

/// Java's `ComparisonExpression.__compare` with string conversion on: a number and a string
/// compare as numbers (the string parsed as the number's type), mismatched types as "less",
/// and a boolean against a string fails (a ClassCastException in Java).
fn java_compare(l: &Value, r: &Value) -> Result<Ordering, String> {
    use Value::*;
    let bad = |s: &str| format!("For input string: \"{s}\"");
    Ok(match (l, r) {
        (Bool(a), Bool(b)) => a.cmp(b),
        (Int(a), Int(b)) => a.cmp(b),
        (Long(a), Long(b)) => a.cmp(b),
        (Double(a), Double(b)) => java_double_cmp(*a, *b),
        (Str(a), Str(b)) => a.encode_utf16().cmp(b.encode_utf16()),
        (Bool(_), Str(_)) => return Err("java.lang.ClassCastException: Boolean cannot be cast to String".into()),
        (Bool(_), _) => Ordering::Less,
        (Int(a), Long(b)) => i64::from(*a).cmp(b),
        (Long(a), Int(b)) => a.cmp(&i64::from(*b)),
        (Int(a), Double(b)) => java_double_cmp(f64::from(*a), *b),
        (Long(a), Double(b)) => java_double_cmp(*a as f64, *b),
        (Double(a), Int(b)) => java_double_cmp(*a, f64::from(*b)),
        (Double(a), Long(b)) => java_double_cmp(*a, *b as f64),
        (Int(a), Str(s)) => a.cmp(&s.parse::<i32>().map_err(|_| bad(s))?),
        (Long(a), Str(s)) => a.cmp(&s.parse::<i64>().map_err(|_| bad(s))?),
        (Double(a), Str(s)) => java_double_cmp(*a, java_double(s).ok_or_else(|| bad(s))?),
        (Int(_) | Long(_) | Double(_), Bool(_)) => Ordering::Less,
        (Str(s), Bool(b)) => s.eq_ignore_ascii_case("true").cmp(b),
        (Str(s), Int(b)) => s.parse::<i32>().map_err(|_| bad(s))?.cmp(b),
        (Str(s), Long(b)) => s.parse::<i64>().map_err(|_| bad(s))?.cmp(b),
        (Str(s), Double(b)) => java_double_cmp(java_double(s).ok_or_else(|| bad(s))?, *b),
    })
}

#[cfg(test)]
mod tests;
