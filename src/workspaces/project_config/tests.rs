use super::*;

#[test]
fn env_names_of_the_seed() {
    for n in ENV_NAMES {
        assert!(is_flagged_env_name(n), "{n}");
    }
    for n in [
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_S3",
        "OPENAI_BASE_URL",
        "AZURE_API_BASE",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
    ] {
        assert!(is_flagged_env_name(n), "{n}");
    }
    for n in [
        "NO_PROXY", "no_proxy", "HOME", "DEBUG", "PATHX", "MY_PATH", "ENDPOINT",
    ] {
        assert!(!is_flagged_env_name(n), "{n}");
    }
}

#[test]
fn url_passwords_are_masked() {
    assert_eq!(
        mask_url_passwords("https://user:s3cret@proxy.example:3128/x"),
        "https://user:***@proxy.example:3128/x"
    );
    assert_eq!(
        mask_url_passwords("a http://u:p@h and socks5://x:y@z:1"),
        "a http://u:***@h and socks5://x:***@z:1"
    );
    assert_eq!(
        mask_url_passwords("https://token@host/"),
        "https://token@host/"
    );
    assert_eq!(
        mask_url_passwords("https://host/a:b@c"),
        "https://host/a:b@c"
    );
    assert_eq!(mask_url_passwords("no url"), "no url");
    assert_eq!(
        mask_url_passwords("http://u:p:q@@h"),
        "http://u:***@h",
        "the password runs to the last @"
    );
}
