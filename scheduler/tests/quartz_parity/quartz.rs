//! Quartz itself: `QuartzFires.java` compiled with `javac` into the test's target folder and
//! run once on every case, against Debian's `libquartz2-java` (Quartz 2.3.2). Its jar is the
//! whole classpath: `CronExpression` needs nothing else at run time (no slf4j, no Maven).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::cases::Case;

/// Where Debian's `libquartz2-java` puts Quartz; `KADENCE_QUARTZ_JAR` names another.
const DEBIAN_JAR: &str = "/usr/share/java/quartz2.jar";

/// Quartz's answer to one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The next fires, ms (fewer than asked when the expression runs out).
    Fires(Vec<i64>),
    /// Quartz refused the expression.
    Refused(String),
    /// Quartz did not answer within two seconds.
    Hang,
}

/// Compiles the program and answers every case, in order. Panics, saying what to install,
/// when Java or Quartz is missing: the test must not pass without Quartz.
pub fn answers(cases: &[Case]) -> Vec<Answer> {
    let jar = std::env::var("KADENCE_QUARTZ_JAR").unwrap_or_else(|_| DEBIAN_JAR.to_owned());
    assert!(
        Path::new(&jar).is_file(),
        "Quartz's jar {jar} is missing: install Debian's libquartz2-java \
         (apt-get install libquartz2-java; infra/test.sh does when it is missing), or name \
         another Quartz 2.3.2 jar in KADENCE_QUARTZ_JAR"
    );
    let classes = compile(&jar);
    let classpath = format!("{}:{jar}", classes.display());
    let mut child = Command::new("java")
        .args(["-cp", &classpath, "QuartzFires"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("java could not start ({error}): install a JDK (17)"));
    let mut requests = String::new();
    for case in cases {
        requests.push_str(&format!(
            "{}\t{}\t{}\t{}\n",
            case.expression, case.zone, case.after_ms, case.count
        ));
    }
    let mut stdin = child.stdin.take().expect("java's stdin");
    let writer = std::thread::spawn(move || stdin.write_all(requests.as_bytes()));
    let output = child.wait_with_output().expect("java's answers");
    writer
        .join()
        .expect("the writer")
        .expect("requests written");
    assert!(
        output.status.success(),
        "QuartzFires failed: {}",
        output.status
    );
    let answers: Vec<Answer> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(parse_answer)
        .collect();
    assert_eq!(answers.len(), cases.len(), "one answer per case");
    answers
}

fn parse_answer(line: &str) -> Answer {
    match line.split_once('\t') {
        Some(("OK", fires)) => Answer::Fires(
            fires
                .split(',')
                .filter(|fire| !fire.is_empty())
                .map(|fire| fire.parse().expect("a fire in ms"))
                .collect(),
        ),
        Some(("ERR", message)) => Answer::Refused(message.to_owned()),
        None if line == "OK" => Answer::Fires(Vec::new()),
        None if line == "HANG" => Answer::Hang,
        _ => panic!("QuartzFires answered {line:?}"),
    }
}

/// `javac`s the program into the test's own target folder.
fn compile(jar: &str) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/quartz_parity/QuartzFires.java");
    let classes = Path::new(env!("CARGO_TARGET_TMPDIR")).join("quartz-parity");
    std::fs::create_dir_all(&classes).expect("the classes folder");
    let status = Command::new("javac")
        .args(["-nowarn", "-cp", jar, "-d"])
        .arg(&classes)
        .arg(&source)
        .status()
        .unwrap_or_else(|error| panic!("javac could not start ({error}): install a JDK (17)"));
    assert!(status.success(), "javac failed on {}", source.display());
    classes
}
