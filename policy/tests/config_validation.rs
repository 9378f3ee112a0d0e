//! Bad system files are refused with an error naming the field and value.

use camdnn_policy::{SpecError, System};

const GOOD: &str = include_str!("fixtures/tiny.toml");

fn err(text: &str) -> String {
    match System::from_toml(text) {
        Ok(_) => panic!("accepted a bad file:\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn edit(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "fixture lacks {from:?}");
    GOOD.replacen(from, to, 1)
}

#[test]
fn the_fixture_itself_is_valid() {
    let s = System::from_toml(GOOD).unwrap();
    assert_eq!((s.num_models(), s.num_processors(), s.max_batch), (3, 2, 3));
    let b = s.model_by_name("b").unwrap();
    assert!(!s.supports(b, s.proc_by_name("cpu").unwrap()));
    assert_eq!(s.route("truck"), Some(b));
    // a on the gpu: t_e/k = 4, 3, 2.5 -> preferred [3, 2, 1].
    let a = s.model_by_name("a").unwrap();
    assert_eq!(
        s.preferred_batches(a, s.proc_by_name("gpu").unwrap()),
        &[3, 2, 1]
    );
    // The detector outranks its classifiers.
    // Up + down rank is equal along the critical path (detector -> a) and lower off it (b).
    let d = s.model_by_name("detector").unwrap();
    assert_eq!(s.priority(d), s.priority(a));
    assert!(s.priority(b) < s.priority(a));
}

#[test]
fn unknown_fields_are_refused() {
    let e = err(&edit(
        "max_resident = 2",
        "max_resident = 2\ncolour = \"red\"",
    ));
    assert!(e.contains("colour"), "{e}");
    let e = err(&edit("load_ms = 6.0", "load_ms = 6.0\nlatency = 1"));
    assert!(e.contains("latency"), "{e}");
}

#[test]
fn negative_and_non_finite_times_name_the_entry() {
    let e = err(&edit(
        "exec_ms = [8.0, 14.0, 21.0]",
        "exec_ms = [8.0, -14.0, 21.0]",
    ));
    assert!(
        e.contains("profile.a.cpu.exec_ms[1]") && e.contains("-14"),
        "{e}"
    );
    let e = err(&edit(
        "exec_ms = [8.0, 14.0, 21.0]",
        "exec_ms = [8.0, nan, 21.0]",
    ));
    assert!(e.contains("profile.a.cpu.exec_ms[1]"), "{e}");
    let e = err(&edit("load_ms = 6.0", "load_ms = -1.0"));
    assert!(
        e.contains("profile.a.cpu.load_ms") && e.contains("-1"),
        "{e}"
    );
}

#[test]
fn batch_lists_must_fit_max_batch() {
    let e = err(&edit(
        "exec_ms = [8.0, 14.0, 21.0]",
        "exec_ms = [8.0, 14.0, 21.0, 28.0]",
    ));
    assert!(
        e.contains("profile.a.cpu.exec_ms") && e.contains("4 entries"),
        "{e}"
    );
    let e = err(&edit("exec_ms = [8.0, 14.0, 21.0]", "exec_ms = []"));
    assert!(e.contains("0 entries"), "{e}");
    let e = err(&edit("max_batch = 3", "max_batch = 0"));
    assert!(e.contains("max_batch"), "{e}");
}

#[test]
fn references_must_exist() {
    let e = err(&edit("[profile.b.gpu]", "[profile.b.npu]"));
    assert!(
        e.contains("profile.b.npu") && e.contains("unknown processor"),
        "{e}"
    );
    let e = err(&edit("[profile.b.gpu]", "[profile.c.gpu]"));
    assert!(e.contains("unknown model \"c\""), "{e}");
    let e = err(&edit(
        "parent = \"detector\"\nclasses = [\"person\"]",
        "parent = \"detektor\"\nclasses = [\"person\"]",
    ));
    assert!(
        e.contains("model.a.parent") && e.contains("detektor"),
        "{e}"
    );
}

#[test]
fn graph_shape_is_checked() {
    let e = err(&edit("name = \"a\"", "name = \"b\""));
    assert!(e.contains("duplicate model name \"b\""), "{e}");
    let e = err(&edit("name = \"gpu\"", "name = \"cpu\""));
    assert!(e.contains("duplicate processor"), "{e}");
    let e = err(&edit(
        "[[model]]\nname = \"detector\"",
        "[[model]]\nname = \"detector\"\nparent = \"a\"",
    ));
    assert!(
        matches!(
            System::from_toml(&edit(
                "[[model]]\nname = \"detector\"",
                "[[model]]\nname = \"detector\"\nparent = \"a\""
            )),
            Err(SpecError::NoRoot)
        ),
        "{e}"
    );
    let e = err(&edit(
        "classes = [\"car\", \"truck\"]",
        "classes = [\"car\", \"person\"]",
    ));
    assert!(
        e.contains("\"person\"") && e.contains("\"a\"") && e.contains("\"b\""),
        "{e}"
    );
    let no_profile = edit(
        "[profile.b.gpu]\nexec_ms = [5.0, 9.0]\nload_ms = 10.0\n",
        "",
    );
    let e = err(&no_profile);
    assert!(
        e.contains("\"b\"") && e.contains("nothing can run it"),
        "{e}"
    );
}

#[test]
fn processor_fields_are_checked() {
    let e = err(&edit("kind = \"gpu\"", "kind = \"tpu\""));
    assert!(e.contains("tpu"), "{e}");
    let e = err(&edit("max_resident = 2", "max_resident = 0"));
    assert!(e.contains("processor.cpu.max_resident"), "{e}");
    let e = err(&edit(
        "max_resident = 2",
        "max_resident = 2\nmemory_budget_mb = 100.0",
    ));
    assert!(
        e.contains("profile.a.cpu.size_mb") && e.contains("memory_budget_mb"),
        "{e}"
    );
}

#[test]
fn syntax_errors_carry_a_position() {
    let e = err("max_batch = \n");
    assert!(e.contains("line 1"), "{e}");
}
