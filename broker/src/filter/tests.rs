use std::collections::HashMap;

use super::*;

fn props(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn matches(expr: &str, pairs: &[(&str, &str)]) -> bool {
    compile(expr).unwrap_or_else(|e| panic!("{expr:?}: {e}")).matches(&props(pairs))
}

#[test]
fn numeric_comparisons_read_the_property_as_the_literals_type() {
    let m = [("a", "3"), ("b", "4.5"), ("big", "5000000000")];
    assert!(matches("a = 3", &m));
    assert!(matches("a > 2 AND a < 4 AND a >= 3 AND a <= 3", &m));
    assert!(matches("b > 4.0", &m));
    // Java parses the property as the literal's type: "4.5" is no int, so the evaluation fails.
    assert!(!matches("b > 4", &m));
    assert!(matches("big > 4999999999", &m), "a long");
    assert!(matches("a <> 4", &m));
    assert!(matches("a = -(-3)", &m));
    assert!(!matches("a > 3", &m));
}

#[test]
fn a_missing_property_is_null_and_null_never_matches() {
    assert!(!matches("a = 1", &[]));
    assert!(!matches("a > 1", &[]));
    assert!(!matches("NOT (a > 1)", &[]), "NOT NULL is NULL");
    assert!(matches("a > 1 OR b = 'x'", &[("b", "x")]), "NULL OR TRUE is TRUE");
    assert!(!matches("a > 1 AND b = 'x'", &[("b", "x")]), "NULL AND TRUE is NULL");
    assert!(matches("a IS NULL", &[]));
    assert!(matches("a IS NOT NULL", &[("a", "")]));
    assert!(!matches("a IN ('x')", &[]));
    assert!(!matches("a NOT IN ('x')", &[]));
}

#[test]
fn strings_compare_by_equality_in_and_text_operators() {
    let m = [("tag", "TagA"), ("region", "cn-north")];
    assert!(matches("tag = 'TagA'", &m));
    assert!(matches("tag IN ('TagB', 'TagA')", &m));
    assert!(matches("tag NOT IN ('TagB')", &m));
    assert!(matches("region STARTSWITH 'cn' AND region ENDSWITH 'north' AND region CONTAINS '-'", &m));
    assert!(matches("region NOT CONTAINS 'us'", &m));
    assert!(!matches("region CONTAINS ''", &m), "an empty search never matches, as in Java");
    assert!(!matches("nothing NOT CONTAINS 'x'", &m), "a missing property is FALSE for text operators");
}

#[test]
fn ordering_two_strings_works_only_when_both_read_as_numbers() {
    assert!(matches("a > b", &[("a", "10"), ("b", "9.5")]));
    assert!(!matches("a > b", &[("a", "x"), ("b", "y")]));
}

#[test]
fn a_property_that_is_not_a_number_makes_the_whole_expression_fail() {
    // Java's NumberFormatException ends the evaluation: even the OR's other side cannot save it.
    assert!(!matches("a = 1 OR b = 'x'", &[("a", "one"), ("b", "x")]));
    assert!(matches("b = 'x' OR a = 1", &[("a", "one"), ("b", "x")]), "unless the OR is decided first");
}

#[test]
fn between_includes_its_bounds() {
    assert!(matches("a BETWEEN 1 AND 3", &[("a", "1")]));
    assert!(matches("a BETWEEN 1 AND 3", &[("a", "3")]));
    assert!(!matches("a NOT BETWEEN 1 AND 3", &[("a", "2")]));
    assert!(matches("a NOT BETWEEN 1 AND 3", &[("a", "4")]));
}

#[test]
fn java_refuses_these_at_compile_time() {
    for bad in [
        "a and between 2 and 10",
        "a between 10 and 0",
        "a between NULL and 1",
        "a > 'x'",
        "a > TRUE",
        "a = NULL",
        "TRUE = 1",
        "1",
        "'x' IN ('x')",
        "a > 100000000000000000000000",
        "a > 0.0",
        "a = 1 OR",
        "(a = 1",
    ] {
        let e = compile(bad).err().unwrap_or_else(|| panic!("{bad:?} compiled"));
        assert!(e.to_string().starts_with("java.lang.RuntimeException: ") || e.to_string().starts_with("org.apache.rocketmq.filter.parser."), "{e}");
    }
}

#[test]
fn a_bare_property_is_cast_to_boolean_and_so_never_true() {
    // Properties are strings, and Java's boolean cast of a string is FALSE.
    assert!(!matches("flag", &[("flag", "true")]));
    assert!(matches("NOT flag", &[("flag", "true")]));
}

#[test]
fn integer_and_long_literals_are_told_apart_as_java_does() {
    assert_eq!(compile("a = 2147483647").unwrap(), Expr::Equal(b(Expr::Property("a".into())), b(Expr::Const(Some(Value::Int(i32::MAX))))));
    assert_eq!(compile("a = 2147483648").unwrap(), Expr::Equal(b(Expr::Property("a".into())), b(Expr::Const(Some(Value::Long(1 << 31))))));
    assert_eq!(compile("a = 7L").unwrap(), Expr::Equal(b(Expr::Property("a".into())), b(Expr::Const(Some(Value::Int(7))))));
}

#[test]
fn a_syntax_error_is_worded_as_javacc_words_it() {
    let e = compile("a >= AND").unwrap_err();
    assert_eq!(e.remark, "org.apache.rocketmq.filter.parser.ParseException: Encountered \" \"AND\" \"AND \"\" at line 1, column 6.");
    let e = compile("a = 1 OR").unwrap_err();
    assert_eq!(e.remark, "org.apache.rocketmq.filter.parser.ParseException: Encountered \"<EOF>\" at line 1, column 9.");
    let e = compile("a in (x)").unwrap_err();
    assert_eq!(e.remark, "org.apache.rocketmq.filter.parser.ParseException: Encountered \" <ID> \"x \"\" at line 1, column 7.");
    let e = compile("a between 10 and 0").unwrap_err();
    assert!(e.remark.starts_with("java.lang.RuntimeException: Illegal values of between"), "{e}");
    let e = compile("a = 1 #").unwrap_err();
    assert!(e.remark.starts_with("org.apache.rocketmq.filter.parser.TokenMgrError: Lexical error at line 1, column 7."), "{e}");
}

#[test]
fn garbage_is_an_error_or_an_expression_never_a_panic() {
    let inputs = [
        "é",
        "a = 'é'",
        "'unterminated",
        "/* open",
        "--",
        "-- c",
        "1e",
        "1e+",
        ".",
        "..",
        "0x10",
        "a = 007",
        "a > 1e309",
        "a = -9223372036854775808",
        "a = 9223372036854775808",
        "((((((a = 1",
        "a in ('x',)",
        "a between 1",
        "NOT",
        "a is not",
        "a = 1 -- trailing",
        "\u{0}",
        "a\u{3000}= 1",
    ];
    for input in inputs {
        let _ = compile(input).map(|e| e.matches(&props(&[("a", "1")])));
    }
    assert!(matches("a = 'é'", &[("a", "é")]));
}

#[test]
fn an_expression_too_deep_for_the_stack_is_refused_not_a_crash() {
    let deep = format!("{}a = 1{}", "(".repeat(100_000), ")".repeat(100_000));
    assert!(compile(&deep).is_err());
    assert!(compile(&format!("{}1 = a", "- ".repeat(100_000))).is_err());
    assert!(compile(&format!("{}a", "NOT ".repeat(100_000))).is_err());
    let long = vec!["a = 1"; 100_000].join(" OR ");
    assert!(compile(&long).is_err());
    let fine = format!("{}a = 1{}", "(".repeat(MAX_NESTING), ")".repeat(MAX_NESTING));
    assert!(matches(&fine, &[("a", "1")]));
    let parens = "(".repeat(136);
    assert!(matches(&format!("a = '{parens}'"), &[("a", parens.as_str())]), "parentheses in a string do not count");
}
