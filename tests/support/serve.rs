//! `nodectl serve` as a child process on loopback, and a minimal HTTP/1.1
//! client (std only) to scrape it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running `nodectl serve`, ended (SIGKILL, reaped) when dropped.
pub struct Served {
    child: Option<Child>,
    pub address: SocketAddr,
    log: Arc<Mutex<String>>,
}

/// One HTTP answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    /// The header lines, lower-cased names.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

impl Served {
    /// Spawns `command` (a `serve --listen 127.0.0.1:0 ...` line) and waits
    /// for the address it prints on stderr.
    pub fn start(mut command: Command) -> Served {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {command:?}: {e}"));
        let log = Arc::new(Mutex::new(String::new()));
        let (found, address) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let lines = log.clone();
        // Reads stderr to the end, so the child never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.split_once("serving http://").map(|(_, r)| r) {
                    if let Some((address, _)) = rest.split_once('/') {
                        let _ = found.send(address.to_string());
                    }
                }
                let mut log = lines.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let mut served = Served {
            child: Some(child),
            address: "0.0.0.0:0".parse().unwrap(),
            log,
        };
        match address.recv_timeout(Duration::from_secs(30)) {
            Ok(address) => served.address = address.parse().unwrap(),
            Err(_) => panic!("serve printed no address; stderr:\n{}", served.log()),
        }
        served
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    /// What it printed on stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    pub fn get(&self, path: &str) -> Answer {
        self.request("GET", path)
            .unwrap_or_else(|e| panic!("GET {path}: {e}; stderr:\n{}", self.log()))
    }

    pub fn request(&self, method: &str, path: &str) -> Result<Answer, String> {
        request(self.address, method, path)
    }

    /// `/metrics` once the first run has finished (503 until then).
    pub fn first_metrics(&self, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let answer = self.get("/metrics");
            match answer.status {
                200 => return answer.body,
                503 if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
                _ => panic!("/metrics: {answer:?}; stderr:\n{}", self.log()),
            }
        }
    }

    /// Waits up to `limit` for it to exit; its status code, None if it
    /// did not.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<Option<i32>> {
        let deadline = Instant::now() + limit;
        let child = self.child.as_mut().unwrap();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                self.child = None;
                return Some(status.code());
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `method path` over a fresh connection (`Connection: close`); the answer
/// must be whole: a status line, headers, and as many body bytes as
/// `Content-Length` says.
pub fn request(address: SocketAddr, method: &str, path: &str) -> Result<Answer, String> {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5))
        .map_err(|e| format!("connecting to {address}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .and_then(|()| stream.set_write_timeout(Some(Duration::from_secs(5))))
        .map_err(|e| e.to_string())?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nUser-Agent: nodectl-tests\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("sending: {e}"))?;
    let mut bytes = Vec::new();
    stream
        .read_to_end(&mut bytes)
        .map_err(|e| format!("reading: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no end of headers: {text:?}"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("not an HTTP/1.1 status line: {status_line:?}"))?;
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("not a header: {line:?}"))?;
        headers.push((name.to_ascii_lowercase(), value.trim().to_string()));
    }
    let answer = Answer {
        status,
        headers,
        body: body.to_string(),
    };
    let length: usize = answer
        .header("content-length")
        .and_then(|l| l.parse().ok())
        .ok_or_else(|| format!("no Content-Length: {answer:?}"))?;
    let expected = if method == "HEAD" { 0 } else { length };
    if answer.body.len() != expected {
        return Err(format!(
            "{} body bytes, Content-Length {length}",
            answer.body.len()
        ));
    }
    Ok(answer)
}

/// `count` scrapes of `/metrics` at once, each on its own connection: how
/// long each took, from connecting to the last byte, or why it failed (an
/// answer other than a whole 200 with `nodectl_up` in it).
pub fn scrapes_at_once(address: SocketAddr, count: usize) -> Vec<Result<Duration, String>> {
    let threads: Vec<_> = (0..count)
        .map(|_| {
            std::thread::spawn(move || {
                let asked = Instant::now();
                let answer = request(address, "GET", "/metrics")?;
                if answer.status != 200 || !answer.body.contains("nodectl_up") {
                    return Err(format!("{answer:?}"));
                }
                Ok(asked.elapsed())
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

/// The series of a metrics text (sample lines without their values).
pub fn series(text: &str) -> Vec<String> {
    let mut series: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.rsplit_once(' ').unwrap().0.to_string())
        .collect();
    series.sort();
    series
}

/// The value of the one sample of `series` in `text`.
pub fn value(text: &str, series: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.rsplit_once(' ').is_some_and(|(s, _)| s == series))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"));
    line.rsplit_once(' ').unwrap().1.parse().unwrap()
}

/// The metric families of a metrics text (its `# TYPE` lines).
pub fn families(text: &str) -> Vec<String> {
    let mut families: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    families.sort();
    families
}
