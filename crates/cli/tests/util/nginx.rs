//! Debian's nginx in its own prefix directory on loopback ports, for tests against a
//! server nobody here wrote. nginx must be installed (`.ci/run` installs it): without it
//! these tests fail, they do not skip.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use super::temp_path;

/// nginx in its own prefix directory on two loopback ports, stopped when dropped.
pub struct Nginx {
    child: Child,
    /// The plain HTTP port.
    pub http: u16,
    /// The TLS port (HTTP/1.1 and HTTP/2); 0 when started with [`Nginx::with_servers`].
    pub https: u16,
    /// Its prefix directory (logs under `logs/`).
    pub dir: PathBuf,
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn nginx_binary() -> PathBuf {
    ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("nginx is not installed: `apt-get install nginx` (.ci/run does)")
}

impl Nginx {
    /// Stock nginx answering `200 ok` on a plain and a TLS port (HTTP/1.1 and HTTP/2).
    /// Only what the test needs: keepalive_requests and keepalive_timeout stay at nginx's
    /// defaults (1000 requests, 75 s).
    pub fn start() -> Nginx {
        Nginx::spawn(true, |_, http, https| {
            format!(
                "access_log off;\n  \
                 server {{ listen 127.0.0.1:{http}; location / {{ return 200 \"ok\"; }} }}\n  \
                 server {{ listen 127.0.0.1:{https} ssl http2; ssl_certificate {{d}}/cert.pem; \
                 ssl_certificate_key {{d}}/key.pem; location / {{ return 200 \"ok\"; }} }}"
            )
        })
    }

    /// nginx with these `server` blocks (and `log_format`s) in its `http` block; `{d}` in
    /// them is its prefix directory, `{port}` the plain port it listens on.
    pub fn with_servers(servers: &str) -> Nginx {
        Nginx::spawn(false, |_, http, _| {
            servers.replace("{port}", &http.to_string())
        })
    }

    /// As [`Nginx::with_servers`], with a TLS port too: `{tls_port}`, and a self-signed
    /// certificate for `localhost` at `{d}/cert.pem` (key `{d}/key.pem`).
    pub fn with_tls_servers(servers: &str) -> Nginx {
        Nginx::spawn(true, |_, http, https| {
            servers
                .replace("{port}", &http.to_string())
                .replace("{tls_port}", &https.to_string())
        })
    }

    /// Writes the configuration (`http` block from `servers(dir, http, https)`, `{d}`
    /// replaced by the prefix directory; with `tls`, a self-signed certificate and a TLS
    /// port) and starts nginx.
    fn spawn(tls: bool, servers: impl Fn(&Path, u16, u16) -> String) -> Nginx {
        let dir = temp_path("nginx");
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        let (http, https) = (free_port(), if tls { free_port() } else { 0 });
        if tls {
            let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
            std::fs::write(dir.join("cert.pem"), cert.cert.pem()).unwrap();
            std::fs::write(dir.join("key.pem"), cert.key_pair.serialize_pem()).unwrap();
        }
        let d = dir.display().to_string();
        let servers = servers(&dir, http, https).replace("{d}", &d);
        let conf = format!(
            "worker_processes 1;\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/logs/error.log warn;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  \
             fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n  \
             {servers}\n}}\n"
        );
        std::fs::write(dir.join("nginx.conf"), conf).unwrap();
        let child = Command::new(nginx_binary())
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .arg("-e")
            .arg(dir.join("logs/error.log"))
            .spawn()
            .expect("starting nginx");
        let n = Nginx {
            child,
            http,
            https,
            dir,
        };
        n.wait_ready();
        n
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        for port in [self.http, self.https].into_iter().filter(|&p| p != 0) {
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(
                    Instant::now() < deadline,
                    "nginx did not listen on {port}: {}",
                    log(&self.dir)
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

pub fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("logs/error.log")).unwrap_or_default()
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
