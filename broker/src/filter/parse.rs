//! The syntax of Java's SQL92 message selector (`SelectorParser.jj` of 5.3.3, a superset of
//! 4.9.7's: it adds CONTAINS, STARTSWITH and ENDSWITH), with winnow. This pass only recognises the
//! grammar; [`super::build`] then applies the checks Java's parser actions make.
//!
//! Where the JavaCC grammar commits (after an operator or keyword), the parsers here `cut_err`, so
//! `a = 1 OR` is an error rather than `a = 1` and a leftover. Like Java's, the grammar has no end
//! of input rule: what follows a complete expression is ignored as long as the next token lexes.

use winnow::ascii::multispace1;
use winnow::combinator::{alt, cut_err, delimited, not, opt, preceded, repeat, separated, terminated};
use winnow::error::{ContextError, ErrMode};
use winnow::prelude::*;
use winnow::token::{none_of, one_of, take_until, take_while};
use winnow::ModalResult;

/// An expression as written.
#[derive(Clone, Debug, PartialEq)]
pub enum Syntax {
    Or(Box<Syntax>, Box<Syntax>),
    And(Box<Syntax>, Box<Syntax>),
    Equal(Box<Syntax>, Box<Syntax>),
    NotEqual(Box<Syntax>, Box<Syntax>),
    IsNull(Box<Syntax>, bool),
    Compare(CompareOp, Box<Syntax>, Box<Syntax>),
    Text { op: TextOp, not: bool, value: Box<Syntax>, search: String },
    Between { not: bool, value: Box<Syntax>, low: Box<Syntax>, high: Box<Syntax> },
    In { not: bool, value: Box<Syntax>, list: Vec<String> },
    Negate(Box<Syntax>),
    Not(Box<Syntax>),
    Literal(Literal),
    Property(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOp {
    Greater,
    GreaterOrEqual,
    Less,
    LessOrEqual,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextOp {
    Contains,
    StartsWith,
    EndsWith,
}

/// A literal's text, converted (and range-checked) when the expression is built.
#[derive(Clone, Debug, PartialEq)]
pub enum Literal {
    Str(String),
    Decimal(String),
    Float(String),
    True,
    False,
    Null,
}

/// The reserved words; an identifier may not be one of them (case-insensitive).
const KEYWORDS: [&str; 12] = ["NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS", "CONTAINS", "STARTSWITH", "ENDSWITH"];

/// Parses `text`; the error is worded as Java's (`ParseException` / `TokenMgrError`).
pub fn parse(text: &str) -> Result<Syntax, String> {
    let mut input = text;
    let expr = preceded(skip, or_expr).parse_next(&mut input).map_err(|_| unexpected(text, input))?;
    // Java reads one token past the expression (its loops peek); one that does not lex fails.
    let rest = input.trim_start();
    if !rest.is_empty() && token(&mut &*rest).is_err() {
        let (line, column) = position(text, text.len() - rest.len());
        let c = rest.chars().next().unwrap_or(' ');
        return Err(format!(
            "org.apache.rocketmq.filter.parser.TokenMgrError: Lexical error at line {line}, column {column}.  Encountered: \"{c}\" ({}), after : \"\"",
            u32::from(c)
        ));
    }
    Ok(expr)
}

/// Java's 1-based line and column of a byte offset.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// JavaCC's `ParseException` message, first line: the token found, as `" <kind> "<image> ""`.
fn unexpected(text: &str, rest: &str) -> String {
    let rest = rest.trim_start();
    let (line, column) = position(text, text.len() - rest.len());
    let found = match token_at(rest) {
        None => "<EOF>".to_owned(),
        Some((kind, image)) => format!(" {kind} \"{image} \""),
    };
    format!("org.apache.rocketmq.filter.parser.ParseException: Encountered \"{found}\" at line {line}, column {column}.")
}

/// What `f` consumes at the start of `p`.
fn taken<'s>(p: &'s str, mut f: impl FnMut(&mut &'s str) -> ModalResult<()>) -> Option<&'s str> {
    let mut rest = p;
    f(&mut rest).ok().map(|()| &p[..p.len() - rest.len()])
}

/// The token at the start of `rest`: JavaCC's token image (`"AND"`, `<ID>`, `"="`...) and its text.
fn token_at(rest: &str) -> Option<(String, &str)> {
    if rest.is_empty() {
        return None;
    }
    if let Some(w) = taken(rest, |i| word.void().parse_next(i)) {
        let kind = KEYWORDS.iter().find(|k| w.eq_ignore_ascii_case(k)).map_or_else(|| "<ID>".to_owned(), |k| format!("\"{k}\""));
        return Some((kind, w));
    }
    if let Some(t) = taken(rest, |i| delimited('\'', repeat::<_, _, (), _, _>(0.., alt(("''".void(), none_of('\'').void()))), '\'').parse_next(i)) {
        return Some(("<STRING_LITERAL>".into(), t));
    }
    if let Ok(n) = number(&mut &*rest) {
        let kind = if matches!(n, Literal::Float(_)) { "<FLOATING_POINT_LITERAL>" } else { "<DECIMAL_LITERAL>" };
        let image = match n {
            Literal::Float(t) | Literal::Decimal(t) => t,
            _ => String::new(),
        };
        return Some((kind.into(), &rest[..image.len()]));
    }
    let symbol = [">=", "<=", "<>", "=", ">", "<", "(", ")", ",", "+", "-"].into_iter().find(|s| rest.starts_with(s))?;
    Some((format!("\"{symbol}\""), symbol))
}

// ---------------------------------------------------------------------------------------------
// tokens

/// Whitespace and comments (`-- ...` to the end of the line, `/* ... */`).
fn skip(i: &mut &str) -> ModalResult<()> {
    let line_comment = ("--", take_while(0.., |c| c != '\n' && c != '\r'), alt(("\r\n", "\n", "\r"))).void();
    let block_comment = ("/*", take_until(0.., "*/"), "*/").void();
    repeat(0.., alt((multispace1.void(), line_comment, block_comment))).parse_next(i)
}

/// `p`, then whitespace.
fn lexeme<'s, O>(mut p: impl Parser<&'s str, O, ErrMode<ContextError>>) -> impl Parser<&'s str, O, ErrMode<ContextError>> {
    move |i: &mut &'s str| {
        let out = p.parse_next(i)?;
        skip(i)?;
        Ok(out)
    }
}

/// A word: Java's ID pattern, which keywords share.
fn word<'s>(i: &mut &'s str) -> ModalResult<&'s str> {
    (take_while(1, |c: char| c.is_ascii_alphabetic() || c == '_' || c == '$'), take_while(0.., |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$'))
        .take()
        .parse_next(i)
}

fn keyword<'s>(kw: &'static str) -> impl Parser<&'s str, &'s str, ErrMode<ContextError>> {
    lexeme(word.verify(move |w: &str| w.eq_ignore_ascii_case(kw)))
}

fn identifier(i: &mut &str) -> ModalResult<String> {
    lexeme(word.verify(|w: &str| !KEYWORDS.iter().any(|k| w.eq_ignore_ascii_case(k)))).map(str::to_owned).parse_next(i)
}

/// An operator, as the longest token: `<` is not the start of `<>` or `<=`, nor `>` of `>=`.
fn symbol<'s>(s: &'static str) -> impl Parser<&'s str, &'s str, ErrMode<ContextError>> {
    let longer: &'static [char] = match s {
        "<" => &['>', '='],
        ">" => &['='],
        _ => &[],
    };
    lexeme(terminated(s, not(one_of(longer))))
}

/// `'...'` with `''` for a quote.
fn string_literal(i: &mut &str) -> ModalResult<String> {
    lexeme(delimited('\'', repeat(0.., alt(("''".value('\''), none_of('\'')))), '\'')).parse_next(i)
}

/// A number, by JavaCC's longest match: DECIMAL_LITERAL (`0` or `[1-9][0-9]*`, then an optional
/// `l`/`L`) or FLOATING_POINT_LITERAL (`5.`, `5.5`, `.5`, `5E10`, each with an optional exponent);
/// a tie goes to the decimal.
fn number(i: &mut &str) -> ModalResult<Literal> {
    let s = *i;
    let b = s.as_bytes();
    let digits = |from: usize| b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let exponent = |from: usize| {
        if from < b.len() && (b[from] == b'e' || b[from] == b'E') {
            let sign = usize::from(from + 1 < b.len() && (b[from + 1] == b'+' || b[from + 1] == b'-'));
            let n = digits(from + 1 + sign);
            if n > 0 {
                return 1 + sign + n;
            }
        }
        0
    };
    let int_len = digits(0);
    let decimal = match b.first() {
        Some(b'0') => 1,
        Some(b'1'..=b'9') => int_len + usize::from(matches!(b.get(int_len), Some(b'l' | b'L'))),
        _ => 0,
    };
    let float = if int_len > 0 && b.get(int_len) == Some(&b'.') {
        let frac = digits(int_len + 1);
        int_len + 1 + frac + exponent(int_len + 1 + frac)
    } else if int_len == 0 && b.first() == Some(&b'.') && digits(1) > 0 {
        1 + digits(1) + exponent(1 + digits(1))
    } else if int_len > 0 {
        match exponent(int_len) {
            0 => 0,
            e => int_len + e,
        }
    } else {
        0
    };
    let literal = if decimal == 0 && float == 0 {
        return Err(ErrMode::Backtrack(ContextError::new()));
    } else if decimal >= float {
        Literal::Decimal(s[..decimal].to_owned())
    } else {
        Literal::Float(s[..float].to_owned())
    };
    *i = &s[decimal.max(float)..];
    skip(i)?;
    Ok(literal)
}

/// Any one token (for the look past the end).
fn token(i: &mut &str) -> ModalResult<()> {
    if i.starts_with(['=', '>', '<', '(', ')', ',', '+', '-']) {
        return Ok(());
    }
    alt((word.void(), string_literal.void(), number.void())).parse_next(i)
}

// ---------------------------------------------------------------------------------------------
// grammar

fn boxed(s: Syntax) -> Box<Syntax> {
    Box::new(s)
}

fn or_expr(i: &mut &str) -> ModalResult<Syntax> {
    let mut left = and_expr(i)?;
    while let Some(right) = opt(preceded(keyword("OR"), cut_err(and_expr))).parse_next(i)? {
        left = Syntax::Or(boxed(left), boxed(right));
    }
    Ok(left)
}

fn and_expr(i: &mut &str) -> ModalResult<Syntax> {
    let mut left = equality_expr(i)?;
    while let Some(right) = opt(preceded(keyword("AND"), cut_err(equality_expr))).parse_next(i)? {
        left = Syntax::And(boxed(left), boxed(right));
    }
    Ok(left)
}

enum EqualityTail {
    Equal(Syntax),
    NotEqual(Syntax),
    IsNull(bool),
}

fn equality_expr(i: &mut &str) -> ModalResult<Syntax> {
    let mut left = comparison_expr(i)?;
    loop {
        let tail = opt(alt((
            preceded(symbol("="), cut_err(comparison_expr)).map(EqualityTail::Equal),
            preceded(symbol("<>"), cut_err(comparison_expr)).map(EqualityTail::NotEqual),
            preceded(keyword("IS"), cut_err(alt((keyword("NULL").value(false), (keyword("NOT"), keyword("NULL")).value(true))))).map(EqualityTail::IsNull),
        )))
        .parse_next(i)?;
        left = match tail {
            None => return Ok(left),
            Some(EqualityTail::Equal(r)) => Syntax::Equal(boxed(left), boxed(r)),
            Some(EqualityTail::NotEqual(r)) => Syntax::NotEqual(boxed(left), boxed(r)),
            Some(EqualityTail::IsNull(not)) => Syntax::IsNull(boxed(left), not),
        };
    }
}

enum ComparisonTail {
    Compare(CompareOp, Syntax),
    Text(TextOp, bool, String),
    Between(bool, Syntax, Syntax),
    In(bool, Vec<String>),
}

fn comparison_expr(i: &mut &str) -> ModalResult<Syntax> {
    let mut left = unary_expr(i)?;
    loop {
        let Some(tail) = opt(comparison_tail).parse_next(i)? else { return Ok(left) };
        let value = boxed(left);
        left = match tail {
            ComparisonTail::Compare(op, r) => Syntax::Compare(op, value, boxed(r)),
            ComparisonTail::Text(op, not, search) => Syntax::Text { op, not, value, search },
            ComparisonTail::Between(not, low, high) => Syntax::Between { not, value, low: boxed(low), high: boxed(high) },
            ComparisonTail::In(not, list) => Syntax::In { not, value, list },
        };
    }
}

fn comparison_tail(i: &mut &str) -> ModalResult<ComparisonTail> {
    let compare = |s: &'static str, op: CompareOp| preceded(symbol(s), cut_err(unary_expr)).map(move |r| ComparisonTail::Compare(op, r));
    let text = |kw: &'static str, op: TextOp| preceded(keyword(kw), cut_err(string_literal)).map(move |s| (op, s));
    let texts = || alt((text("CONTAINS", TextOp::Contains), text("STARTSWITH", TextOp::StartsWith), text("ENDSWITH", TextOp::EndsWith)));
    let between = || preceded(keyword("BETWEEN"), cut_err((unary_expr, keyword("AND"), unary_expr))).map(|(low, _, high)| (low, high));
    let in_list = || preceded(keyword("IN"), cut_err(delimited(symbol("("), separated(1.., string_literal, symbol(",")), symbol(")"))));
    alt((
        compare(">=", CompareOp::GreaterOrEqual),
        compare(">", CompareOp::Greater),
        compare("<=", CompareOp::LessOrEqual),
        compare("<", CompareOp::Less),
        texts().map(|(op, s)| ComparisonTail::Text(op, false, s)),
        between().map(|(low, high)| ComparisonTail::Between(false, low, high)),
        in_list().map(|list| ComparisonTail::In(false, list)),
        // NOT counts only when one of these follows (Java's LOOKAHEAD(2)); otherwise the loop ends.
        preceded(
            keyword("NOT"),
            alt((
                texts().map(|(op, s)| ComparisonTail::Text(op, true, s)),
                between().map(|(low, high)| ComparisonTail::Between(true, low, high)),
                in_list().map(|list| ComparisonTail::In(true, list)),
            )),
        ),
    ))
    .parse_next(i)
}

fn unary_expr(i: &mut &str) -> ModalResult<Syntax> {
    alt((
        preceded(symbol("+"), unary_expr),
        preceded(symbol("-"), unary_expr).map(|e| Syntax::Negate(boxed(e))),
        preceded(keyword("NOT"), unary_expr).map(|e| Syntax::Not(boxed(e))),
        primary_expr,
    ))
    .parse_next(i)
}

fn primary_expr(i: &mut &str) -> ModalResult<Syntax> {
    alt((
        string_literal.map(|s| Syntax::Literal(Literal::Str(s))),
        number.map(Syntax::Literal),
        keyword("TRUE").value(Syntax::Literal(Literal::True)),
        keyword("FALSE").value(Syntax::Literal(Literal::False)),
        keyword("NULL").value(Syntax::Literal(Literal::Null)),
        identifier.map(Syntax::Property),
        preceded(symbol("("), cut_err((or_expr, symbol(")")))).map(|(e, _)| e),
    ))
    .parse_next(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prop(name: &str) -> Box<Syntax> {
        boxed(Syntax::Property(name.into()))
    }

    fn lit(l: Literal) -> Box<Syntax> {
        boxed(Syntax::Literal(l))
    }

    #[test]
    fn and_binds_tighter_than_or_and_keywords_ignore_case() {
        let e = parse("a = 3 or b <> 4 And c > 5").unwrap();
        let left = Syntax::Equal(prop("a"), lit(Literal::Decimal("3".into())));
        let right = Syntax::And(
            boxed(Syntax::NotEqual(prop("b"), lit(Literal::Decimal("4".into())))),
            boxed(Syntax::Compare(CompareOp::Greater, prop("c"), lit(Literal::Decimal("5".into())))),
        );
        assert_eq!(e, Syntax::Or(boxed(left), boxed(right)));
    }

    #[test]
    fn numbers_follow_javacc_longest_match() {
        let n = |s: &str| match parse(&format!("a = {s}")).unwrap() {
            Syntax::Equal(_, r) => *r,
            other => panic!("{other:?}"),
        };
        assert_eq!(n("10L"), Syntax::Literal(Literal::Decimal("10L".into())));
        assert_eq!(n("5."), Syntax::Literal(Literal::Float("5.".into())));
        assert_eq!(n(".5e-3"), Syntax::Literal(Literal::Float(".5e-3".into())));
        assert_eq!(n("5E10"), Syntax::Literal(Literal::Float("5E10".into())));
        assert_eq!(n("'it''s'"), Syntax::Literal(Literal::Str("it's".into())));
    }

    #[test]
    fn between_in_and_text_operators_take_an_optional_not() {
        assert!(matches!(parse("a not between 1 and 2").unwrap(), Syntax::Between { not: true, .. }));
        assert!(matches!(parse("a in ('x', 'y')").unwrap(), Syntax::In { not: false, ref list, .. } if list.len() == 2));
        assert!(matches!(parse("a NOT CONTAINS 'x'").unwrap(), Syntax::Text { op: TextOp::Contains, not: true, .. }));
        assert!(matches!(parse("a is not null").unwrap(), Syntax::IsNull(_, true)));
        assert!(matches!(parse("/* c */ a -- why\n = 'x'").unwrap(), Syntax::Equal(..)));
    }

    #[test]
    fn a_committed_operator_without_its_operand_is_an_error() {
        for bad in ["a and between 2 and 10", "a = 1 OR", "a in ()", "a in (1)", "(a = 1", "a = ", "", "a contains b", "a is 1"] {
            assert!(parse(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn what_follows_a_whole_expression_is_ignored_if_it_lexes_as_java_does() {
        assert!(parse("a = 1 b").is_ok());
        assert!(parse("a = 1 )").is_ok());
        assert!(parse("a = 1 #").is_err());
    }
}
