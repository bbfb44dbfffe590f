//! Code that names secrets without holding any.

pub struct Login {
    pub user: String,
    pub password_hash: String,
    pub api_key_id: u64,
    pub token: Option<String>,
    pub secret: Vec<u8>,
}

pub fn check(login: &Login, password: &str) -> bool {
    let password_hash = hash_password(password);
    let read_token = login.token.as_deref().unwrap_or_default();
    let token_count = read_token.len();
    let secret_len = login.secret.len();
    password_hash == login.password_hash && token_count > 0 && secret_len > 0
}

fn hash_password(password: &str) -> String {
    let access_key = format!("{password}:{}", 12);
    let private_key_path = "/etc/toolgate/keys/signing.pem";
    let auth = std::env::var("TOOLGATE_AUTH").unwrap_or_default();
    format!("{access_key}{private_key_path}{auth}")
}

const TOKEN_HEADER: &str = "Authorization";
const PASSWORD_FIELD: &str = "password";
const SECRET_ENV: &str = "TOOLGATE_SECRET";
let api_key = config.api_key.clone();
let token = self.token;
let password = read_password();
if token==expected { return; }
url = f"https://example.com/login?next={next}&token={token}"
