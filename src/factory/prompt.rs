//! PROVISIONAL (the lead's, replaced by H2's at merge).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Worker,
    Repair,
    Reviewer { review: u32 },
}
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Approve,
    RequestChanges,
}
#[derive(Debug, thiserror::Error)]
#[error("the verdict's first line is not APPROVE or REQUEST_CHANGES")]
pub struct VerdictError;
pub fn worker_prompt(task: &str) -> String {
    format!("--- task ---\n{task}\n--- end task ---\n{{\"factory_role\": \"worker\"}}\n")
}
pub fn repair_prompt(task: &str, identity: &str, review: &str) -> String {
    format!(
        "--- task ---\n{task}\n--- end task ---\n{identity}\n--- review ---\n{review}\n--- end review ---\n{{\"factory_role\": \"repair\"}}\n"
    )
}
pub fn reviewer_prompt(task: &str, identity: &str, n: u32) -> String {
    format!(
        "--- task ---\n{task}\n--- end task ---\n{identity}\n{{\"factory_role\": \"reviewer\", \"review\": {n}}}\n"
    )
}
pub fn parse_verdict(answer: &str) -> Result<(Verdict, String), VerdictError> {
    let mut lines = answer.lines().skip_while(|l| l.trim().is_empty());
    let v = match lines.next().map(str::trim) {
        Some("APPROVE") => Verdict::Approve,
        Some("REQUEST_CHANGES") => Verdict::RequestChanges,
        _ => return Err(VerdictError),
    };
    Ok((v, lines.collect::<Vec<_>>().join("\n")))
}
