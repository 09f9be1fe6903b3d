//! The optional OpenTelemetry export of a finished factory run: one OTLP/HTTP JSON trace
//! (`POST {endpoint}/v1/traces`), a span for the run and one per provider invocation.
//!
//! Only a loopback address is accepted (an IP literal in 127.0.0.0/8 or `[::1]`, plain
//! `http`): the option cannot reach a hosted or billed service. What is exported is the
//! run's id, phases, tools, states, verdicts and outcome; never the task's text, a path, a
//! secret or a provider's output. An export that fails is swallowed (logged by the caller):
//! observation never changes the outcome or the authority.

use std::net::IpAddr;
use std::time::Duration;

use serde_json::{Value, json};

use super::engine::FactoryRun;

/// The export's one deadline.
pub const DEADLINE: Duration = Duration::from_secs(3);

/// Why an endpoint is refused.
#[derive(Debug, thiserror::Error)]
#[error(
    "--otel {given}: {why}. The export accepts only a loopback http address (an IP literal), \
     e.g. http://127.0.0.1:4318"
)]
pub struct EndpointError {
    given: String,
    why: &'static str,
}

/// Checks an endpoint: `http://` to a loopback IP literal, a port, no user info, no query.
/// Returns it without a trailing `/`.
pub fn check_endpoint(raw: &str) -> Result<String, EndpointError> {
    let err = |why| EndpointError {
        given: crate::text::one_line(raw, 80),
        why,
    };
    let uri: ureq::http::Uri = raw.parse().map_err(|_| err("not a URL"))?;
    if uri.scheme_str() != Some("http") {
        return Err(err("the scheme must be http (a loopback collector)"));
    }
    let auth = uri.authority().ok_or_else(|| err("no host"))?;
    if auth.as_str().contains('@') {
        return Err(err("user information is not accepted"));
    }
    let host = auth.host().trim_start_matches('[').trim_end_matches(']');
    let ip: IpAddr = host
        .parse()
        .map_err(|_| err("the host must be an IP literal (a name could resolve anywhere)"))?;
    if !ip.is_loopback() {
        return Err(err("the address is not loopback"));
    }
    if uri.query().is_some() {
        return Err(err("a query is not accepted"));
    }
    Ok(raw.trim_end_matches('/').to_string())
}

fn nanos(rfc3339: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .ok()
        .and_then(|t| t.timestamp_nanos_opt())
        .unwrap_or(0)
        .to_string()
}

fn attr(key: &str, value: &str) -> Value {
    json!({"key": key, "value": {"stringValue": value}})
}

fn hex_id(seed: &str, len: usize) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(seed.as_bytes()))[..len].to_string()
}

/// The OTLP JSON document of a finished run.
pub fn document(run: &FactoryRun) -> Value {
    let trace = hex_id(&format!("{}{}", run.id, run.started_at), 32);
    let root = hex_id(&format!("{trace}root"), 16);
    let end = run.finished_at.as_deref().unwrap_or(&run.started_at);
    let mut spans = vec![json!({
        "traceId": trace,
        "spanId": root,
        "name": "factory.run",
        "kind": 1,
        "startTimeUnixNano": nanos(&run.started_at),
        "endTimeUnixNano": nanos(end),
        "attributes": [
            attr("proctor.factory.run", &run.id),
            attr("proctor.factory.status", &format!("{:?}", run.status).to_lowercase()),
            attr("proctor.factory.worker", &run.worker.tool),
            attr("proctor.factory.reviewer", &run.reviewer.tool),
            attr("proctor.factory.error", run.error.as_ref().map(|e| e.code.as_str()).unwrap_or("")),
        ],
    })];
    for (i, s) in run.steps.iter().enumerate() {
        let start: i64 = nanos(&s.started_at).parse().unwrap_or(0);
        let stop = start + s.elapsed_ms.unwrap_or(0) as i64 * 1_000_000;
        spans.push(json!({
            "traceId": trace,
            "spanId": hex_id(&format!("{trace}{i}"), 16),
            "parentSpanId": root,
            "name": format!("factory.{}", s.role),
            "kind": 1,
            "startTimeUnixNano": start.to_string(),
            "endTimeUnixNano": stop.to_string(),
            "attributes": [
                attr("proctor.factory.tool", &s.tool),
                attr("proctor.factory.state", &s.state),
                attr("proctor.factory.verdict", s.verdict.as_deref().unwrap_or("")),
            ],
        }));
    }
    json!({
        "resourceSpans": [{
            "resource": {"attributes": [attr("service.name", "proctor")]},
            "scopeSpans": [{"scope": {"name": "proctor.factory"}, "spans": spans}],
        }]
    })
}

/// Sends the run's trace; any failure is returned for the log and changes nothing else.
pub fn export(endpoint: &str, run: &FactoryRun) -> Result<(), String> {
    let endpoint = check_endpoint(endpoint).map_err(|e| e.to_string())?;
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .proxy(None)
        .timeout_global(Some(DEADLINE))
        .build()
        .into();
    let body = serde_json::to_vec(&document(run)).map_err(|e| e.to_string())?;
    let resp = agent
        .post(format!("{endpoint}/v1/traces"))
        .header("content-type", "application/json")
        .send(&body[..])
        .map_err(|e| e.to_string())?;
    if resp.status().is_success() {
        Ok(())
    } else {
        Err(format!("the collector answered {}", resp.status()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_loopback_http_ip_literal_is_accepted() {
        for ok in [
            "http://127.0.0.1:4318",
            "http://127.1.2.3:9/",
            "http://[::1]:4318",
        ] {
            assert!(check_endpoint(ok).is_ok(), "{ok}");
        }
        for bad in [
            "https://127.0.0.1:4318",
            "http://localhost:4318",
            "http://10.0.0.1:4318",
            "http://otel.example.com",
            "http://user@127.0.0.1:4318",
            "http://127.0.0.1:4318/?x=1",
            "ftp://127.0.0.1",
            "127.0.0.1:4318",
            "",
        ] {
            assert!(check_endpoint(bad).is_err(), "{bad}");
        }
    }
}
